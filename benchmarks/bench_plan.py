"""`bertcorpus plan` against measured runs: each local stage's predicted CPU beside the CPU the stage took.

Real inputs at N×: the 2014 enwiki sample's pages N times in one complete dump (.xml.bz2), and the shared
Gutenberg books (../shared/data/books) copied N times under new file names. Each copy's ids sort apart from the
other copies' (its page ids moved by 10^8 times the copy, its books' names given a prefix), so that no copy lies
next to another in a documents file: zstd, which compresses a Parquet page at a time, would otherwise shrink the
repeated text, and the plan, which estimates text from the files' sizes as create does, would see less text than
there is. On each, one after another, every stage runs as the demo runs it, on the direct runner in memory,
after `bertcorpus plan` has planned the same words:

    extract-wiki --input wiki.xml.bz2          extract-books --input books/      (copies removed as duplicates)
    extract-books --input books/ --no-dedup    (every copy kept: the documents the later stages read)
    dedup --input wiki/ books-all/             vocab --input wiki/ books-all/ --vocab-size 8000
    create --input wiki/ books-all/ --vocab ... --seq-configs 128:20,512:80 --dupe-factor 5

CPU is user + sys of the command and every process it waited for (os.wait4), peak memory its largest process's
resident set; with --repeat N the scales take turns N times and each stage's least CPU counts (other work on a
shared machine only ever adds CPU). Two modes:

    .venv/bin/python benchmarks/bench_plan.py --fit      # 2× and 8× (and create at 8× with --dupe-factor 1):
                                                         # the start-up and per-MB rates for pipeline/plan/rates.py
    .venv/bin/python benchmarks/bench_plan.py            # 1× and 4×: planned against measured, per stage; exit 1
                                                         # when a stage's CPU is outside ±30% of its plan

The rates are fitted on other scales than those they are checked on. docs/benchmarks.md ("bertcorpus plan") has
the figures.
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
sys.path[:0] = [str(BENCHMARKS), str(REPO / "tests")]

from bench_extract_wiki import repeated_dump

SHARED_BOOKS = REPO.parent / "shared" / "data" / "books"
BERTCORPUS = [sys.executable, "-m", "bertcorpus"]
TOLERANCE = 0.30


def build_inputs(work: Path, copies: int) -> tuple[Path, Path]:
    """The dump and the books folder at `copies`×."""
    work.mkdir(parents=True, exist_ok=True)
    dump = work / f"enwiki-x{copies}.xml.bz2"
    if not dump.exists():
        # Each copy's ids (k + 1) × 10^8 on, of one length and first digit, sort together.
        dump.write_bytes(bz2.compress(repeated_dump(copies, step=10**8, first=1)))
    books = work / "books"
    if not books.exists():
        for copy in range(copies):
            for source in sorted(SHARED_BOOKS.rglob("*")):
                if not source.is_file() or (copy and source.name == "metadata.csv"):
                    continue
                name = source.name if copy == 0 else f"copy{copy}-{source.name}"
                target = books / f"copy{copy}" / source.parent.relative_to(SHARED_BOOKS) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    return dump, books


def stage_words(dump: Path, books: Path, out: Path, dupe_factor: int = 5) -> list[tuple[str, list[str]]]:
    documents = [str(out / "wiki"), str(out / "books-all")]
    vocab = out / "vocab" / "vocab.txt"
    return [
        ("extract-wiki", ["extract-wiki", "--input", str(dump), "--output", str(out / "wiki")]),
        ("extract-books", ["extract-books", "--input", str(books), "--output", str(out / "books")]),
        (
            "extract-books --no-dedup",
            ["extract-books", "--input", str(books), "--output", str(out / "books-all"), "--no-dedup"],
        ),
        ("dedup", ["dedup", "--input", *documents, "--output", str(out / "dedup")]),
        ("vocab", ["vocab", "--input", *documents, "--vocab-size", "8000", "--output", str(vocab)]),
        (
            f"create, dupe {dupe_factor}",
            [
                "create",
                "--input",
                *documents,
                "--vocab",
                str(vocab),
                "--output",
                str(out / f"records-{dupe_factor}"),
                "--seq-configs",
                "128:20,512:80",
                "--dupe-factor",
                str(dupe_factor),
            ],
        ),
    ]


def planned(words: list[str]) -> dict:
    done = subprocess.run([*BERTCORPUS, "plan", *words, "--json"], capture_output=True, text=True, check=True)
    [stage] = json.loads(done.stdout)["stages"]
    return stage


def measured(words: list[str]) -> dict:
    """CPU seconds (the command and what it waited for), wall seconds and peak RSS bytes of one run."""
    started = time.perf_counter()
    process = subprocess.Popen([*BERTCORPUS, *words, "--overwrite"], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"{' '.join(words[:1])} failed with exit status {process.returncode}")
    return {
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": time.perf_counter() - started,
        "rss": usage.ru_maxrss * 1024,
        "output": output_bytes(Path(words[words.index("--output") + 1])),
    }


def output_bytes(output: Path) -> int:
    """The bytes a run wrote: its output folder's files (a vocab's folder, for the vocab file)."""
    folder = output.parent if output.suffix == ".txt" else output
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def run_scale(work: Path, copies: int, dupe_factors=(5,)) -> list[dict]:
    dump, books = build_inputs(work / f"x{copies}", copies)
    out = work / f"x{copies}" / "out"
    rows = []
    for dupe in dupe_factors:
        for name, words in stage_words(dump, books, out, dupe):
            if dupe != dupe_factors[0] and not name.startswith("create"):
                continue
            plan = planned(words)
            rows.append({"copies": copies, "stage": name, "plan": plan, **measured(words)})
            print(
                f"  {copies}× {name}: planned {plan['cpu_seconds']:.1f} CPU-s, took {rows[-1]['cpu']:.1f}", flush=True
            )
    return rows


def least_of(rounds: list[list[dict]]) -> list[dict]:
    """Each stage's run of least CPU over the rounds (the same stages in the same order in each)."""
    return [min(runs, key=lambda r: r["cpu"]) for runs in zip(*rounds)]


def measured_rounds(work: Path, scales: dict[int, tuple[int, ...]], repeat: int) -> list[dict]:
    """Every scale's stages, the scales taking turns `repeat` times; each stage's least CPU."""
    rounds = [
        [row for copies, dupes in scales.items() for row in run_scale(work, copies, dupes)] for _ in range(repeat)
    ]
    return least_of(rounds)


def fit(rows: list[dict]) -> None:
    """Start-up and per-MB rates from the runs at 2× and 8× (create: and --dupe-factor 1 at 8×)."""
    by = {(r["copies"], r["stage"]): r for r in rows}
    for stage in ("extract-wiki", "extract-books", "extract-books --no-dedup", "dedup", "vocab"):
        small, large = by[2, stage], by[8, stage]
        per_mb = (large["cpu"] - small["cpu"]) / (large["plan"]["work_mb"] - small["plan"]["work_mb"])
        start = small["cpu"] - per_mb * small["plan"]["work_mb"]
        print(f"{stage}: start_s={start:.2f}, per_mb_s={per_mb:.4f}")
    small, large, one = by[2, "create, dupe 5"], by[8, "create, dupe 5"], by[8, "create, dupe 1"]
    mb_small, mb_large = small["plan"]["work_mb"], large["plan"]["work_mb"]
    per_pass = (large["cpu"] - one["cpu"]) / (mb_large * (10 - 2))
    per_mb = (large["cpu"] - small["cpu"]) / (mb_large - mb_small) - 10 * per_pass
    start = small["cpu"] - (per_mb + 10 * per_pass) * mb_small
    print(f"create: start_s={start:.2f}, per_mb_s={per_mb:.4f}, pass per_mb_s={per_pass:.4f}")


def check(rows: list[dict]) -> int:
    """The table of planned against measured; the number of stages outside the tolerance."""
    print(
        "\n| input | stage | MB | planned CPU-s | measured CPU-s | measured / planned | wall s "
        "| memory MB, planned / peak RSS | output MB, planned / written |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    outside = 0
    for r in rows:
        ratio = r["cpu"] / r["plan"]["cpu_seconds"]
        outside += abs(ratio - 1) > TOLERANCE
        plan = r["plan"]
        print(
            f"| {r['copies']}× | {r['stage']} | {plan['work_mb']:.1f} | {plan['cpu_seconds']:.1f} | "
            f"{r['cpu']:.1f} | {ratio:.2f} | {r['wall']:.1f} | {plan['peak_memory_bytes'] / 1e6:.0f} / "
            f"{r['rss'] / 1e6:.0f} | {plan['output_bytes'] / 1e6:.1f} / {r['output'] / 1e6:.1f} |"
        )
    return outside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench-plan"), help="inputs and outputs go here")
    parser.add_argument("--fit", action="store_true", help="fit the rates at 2× and 8× instead of checking them")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every run; the least CPU counts")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.fit:
        rows = measured_rounds(args.work, {2: (5,), 8: (5, 1)}, args.repeat)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        fit(rows)
        return
    rows = measured_rounds(args.work, {1: (5,), 4: (5,)}, args.repeat)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    outside = check(rows)
    print(f"\n{outside} of {len(rows)} stages outside ±{TOLERANCE:.0%} of their planned CPU")
    sys.exit(1 if outside else 0)


if __name__ == "__main__":
    main()
