"""The whole `bertcorpus extract-wiki` command: CPU per MB of dump XML against wikiextractor, and 1 → 2 workers.

1. CPU time (user+sys of the command and every process it waited for, from getrusage(RUSAGE_CHILDREN)) of whole
   command-line runs: interpreter start, imports, pipeline construction, the run and the Parquet output. On the
   10.5 MB enwiki sample, and on the sample repeated --copies times (page ids made unique), as .xml and .xml.bz2,
   to separate the fixed cost of a run from the cost per MB. wikiextractor 3.1 --no-templates runs on the same
   files; the ratios of whole commands per core are printed beside the marginal one. The wikiextractor and
   child-process helpers are those of bench_wikitext.py.
2. Wall time with 1 and 2 worker processes (--direct_running_mode=multi_processing) on a multistream dump of the
   repeated sample, read with --index, beside the same runs on a 26 KB dump (the fixed part) and a control: the
   speed-up this machine gives two independent CPU-bound processes at the time of the run. Where other work keeps
   the cores busy, the control falls towards 1x and the speed-up says nothing; docs/wiki_extraction.md shows how
   the recorded figures were taken on a shared machine.

    python3.11 -m venv /tmp/wikibench-venv && /tmp/wikibench-venv/bin/pip install wikiextractor==3.1.0
    .venv/bin/python benchmarks/bench_extract_wiki.py --wikiextractor-python /tmp/wikibench-venv/bin/python
"""

from __future__ import annotations

import argparse
import bz2
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
sys.path[:0] = [str(BENCHMARKS), str(REPO / "tests")]

from bench_wikitext import best_child_cpu, cpu_seconds, wikiextractor_version

from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, build_multistream, read_xml, split_dump

_PAGE_ID = re.compile(rb"<id>(\d+)</id>")  # a page's first <id> is the page id


def repeated_dump(copies: int, step: int = 10_000_000, first: int = 0) -> bytes:
    """The 2014 sample's pages `copies` times in one complete dump, copy k's page ids moved by (k + first) × step."""
    header, pages, footer = split_dump(read_xml(ENWIKI_2014))
    shifted = [
        _PAGE_ID.sub(lambda m, k=k: b"<id>%d</id>" % (int(m.group(1)) + (k + first) * step), page, count=1)
        for k in range(copies)
        for page in pages
    ]
    return header + b"".join(shifted) + footer


def extract_wiki(inputs: list[Path], out: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bertcorpus",
        "extract-wiki",
        "--input",
        *map(str, inputs),
        "--output",
        str(out),
        "--overwrite",
        *options,
    ]


def best_wall(commands: list[list[str]], repeat: int) -> float:
    """The lowest wall time of `repeat` runs of the commands started together."""
    return min(timed(commands)[0] for _ in range(repeat))


def timed(commands: list[list[str]]) -> tuple[float, float, list[float]]:
    """Run the commands together: (wall seconds, CPU seconds of all their processes, CPU seconds of each Beam
    worker process among them). Worker CPU is read from /proc every 0.2 s while they run, so the last fraction
    of a second may be missed."""
    started, cpu_before = time.perf_counter(), cpu_seconds(resource.RUSAGE_CHILDREN)
    running = [subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in commands]
    workers: dict[int, float] = {}
    while any(p.poll() is None for p in running):
        workers.update(worker_cpu({p.pid for p in running}))
        time.sleep(0.2)
    if any(p.returncode for p in running):
        raise RuntimeError(f"a command failed: {commands}")
    return (
        time.perf_counter() - started,
        cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before,
        sorted(workers.values(), reverse=True),
    )


def worker_cpu(roots: set[int]) -> dict[int, float]:
    """CPU seconds so far of the Beam SDK worker processes below `roots`, which Beam starts through `sh -c`."""
    processes = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
                processes[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])), argv)
        except OSError:  # the process ended meanwhile
            continue

    def below_roots(pid: int) -> bool:
        while pid in processes and pid not in roots:
            pid = processes[pid][0]
        return pid in roots

    def is_worker(pid: int) -> bool:
        argv = processes[pid][2]
        return argv[-2:] == [b"-m", b"apache_beam.runners.worker.sdk_worker_main"] and below_roots(pid)

    tick = os.sysconf("SC_CLK_TCK")
    return {pid: ticks / tick for pid, (_, ticks, argv) in processes.items() if pid not in roots and is_worker(pid)}


def cpu_rows(args, work: Path, sample: Path, big: Path, big_bz2: Path) -> None:
    mb = {path: path.stat().st_size / 1e6 for path in (sample, big)}
    mb[big_bz2] = mb[big]  # per MB of XML, compressed or not
    out = work / "out"
    ours = {  # label: (MB of XML, CPU-s)
        f"extract-wiki, .xml.bz2 sample ({mb[sample]:.2f} MB of XML)": (
            mb[sample],
            best_child_cpu(extract_wiki([ENWIKI_2014], out), args.repeat),
        ),
        "extract-wiki, .xml sample": (mb[sample], best_child_cpu(extract_wiki([sample], out), args.repeat)),
        f"extract-wiki, .xml x{args.copies} ({mb[big]:.2f} MB)": (
            mb[big],
            best_child_cpu(extract_wiki([big], out), args.repeat),
        ),
        f"extract-wiki, .xml.bz2 x{args.copies}": (mb[big], best_child_cpu(extract_wiki([big_bz2], out), args.repeat)),
        f"extract-wiki, {ENWIKI_SMALL.name} (26 KB)": (
            None,
            best_child_cpu(extract_wiki([ENWIKI_SMALL], out), args.repeat),
        ),
        "python -c 'import apache_beam'": (
            None,
            best_child_cpu([sys.executable, "-c", "import apache_beam"], args.repeat),
        ),
    }
    theirs = {}
    version = wikiextractor_version(args.wikiextractor_python)
    if version is None:
        print(f"wikiextractor is not installed for {args.wikiextractor_python}: no comparison")
    for path in (sample, big, big_bz2) if version else ():
        command = [
            args.wikiextractor_python,
            "-m",
            "wikiextractor.WikiExtractor",
            "--no-templates",
            "-q",
            "-o",
            str(work / "wikiextractor"),
            str(path),
        ]
        theirs[path] = (mb[path], best_child_cpu(command, args.repeat))
    rows = list(ours.items()) + [
        (f"wikiextractor {version} --no-templates, {path.name} ({mb[path]:.2f} MB)", row)
        for path, row in theirs.items()
    ]
    print(f"CPU = user+sys of the whole command and its children; best of {args.repeat}")
    width = max(len(label) for label, _ in rows)
    for label, (size, seconds) in rows:
        rate = f"  {seconds / size:6.3f} CPU-s/MB  {size / seconds:6.2f} MB/CPU-s" if size else ""
        print(f"  {label:<{width}}  {seconds:6.2f} CPU-s{rate}")
    ours_cpu = [seconds for _, seconds in ours.values()]
    span = mb[big] - mb[sample]
    marginal = (ours_cpu[2] - ours_cpu[1]) / span
    print(f"  marginal cost per MB of XML (x{args.copies} minus x1): extract-wiki {marginal:.4f} CPU-s/MB", end="")
    if version:
        their_marginal = (theirs[big][1] - theirs[sample][1]) / span
        print(
            f", wikiextractor {their_marginal:.4f} CPU-s/MB: {their_marginal / marginal:.2f}x the speed of "
            "wikiextractor",
            end="",
        )
        # the figure a user sees: whole commands side by side, per core, on the same dump
        print(
            f"\n  whole command per core on x{args.copies}: .xml {theirs[big][1] / ours_cpu[2]:.2f}x, .xml.bz2 "
            f"{theirs[big_bz2][1] / ours_cpu[3]:.2f}x the speed of wikiextractor",
            end="",
        )
    print()


def speedup_rows(args, work: Path, big_xml: bytes) -> None:
    dump, index = build_multistream(big_xml, work, pages_per_stream=100)
    tiny_dump, tiny_index = build_multistream(ENWIKI_SMALL, work, pages_per_stream=100)
    options = ["--range-mb", str(args.range_mb), "--num-shards", "2", "--direct_running_mode=multi_processing"]
    runs = {}
    for name, (d, i) in (("big", (dump, index)), ("tiny", (tiny_dump, tiny_index))):
        for workers in (1, 2):
            command = extract_wiki(
                [d], work / f"ms-{name}-{workers}", "--index", str(i), *options, f"--direct_num_workers={workers}"
            )
            runs[name, workers] = min(timed([command]) for _ in range(args.repeat))
    manifest = json.loads((work / "ms-big-2" / "manifest.json").read_text())
    control = [
        sys.executable,
        str(BENCHMARKS / "bench_wikitext.py"),
        "--dump",
        str(ENWIKI_2014),
        "--extract-to",
        "/dev/null",
    ]
    one, two = best_wall([control], args.repeat), best_wall([control, control], args.repeat)
    print(
        f"multistream dump: {len(big_xml) / 1e6:.1f} MB of XML, {dump.stat().st_size / 1e6:.1f} MB of bz2, "
        f"{manifest['inputs'][0]['byte_ranges']} byte ranges (--range-mb {args.range_mb or 'default'}); "
        f"wall time, best of {args.repeat}, with the CPU time of each process in that run"
    )
    for workers in (1, 2):
        print(
            f"  {workers} worker{'s' if workers > 1 else ' '}  "
            + "   ".join(
                f"{label}: {wall:5.2f} s wall, {total - sum(cpu):5.2f} CPU-s launcher and runner, workers "
                + " + ".join(f"{c:.2f}" for c in cpu)
                + " CPU-s"
                for label, (wall, total, cpu) in (("dump", runs["big", workers]), ("26 KB", runs["tiny", workers]))
            )
        )
    walls = {key: run[0] for key, run in runs.items()}
    marginal = (walls["big", 1] - walls["tiny", 1]) / (walls["big", 2] - walls["tiny", 2])
    print(
        f"  speed-up 1 → 2 workers: {walls['big', 1] / walls['big', 2]:.2f}x whole command, {marginal:.2f}x "
        "beyond the fixed part of a run"
    )
    print(
        f"  control: two independent extraction processes at once vs one: {2 * one / two:.2f}x "
        f"({one:.2f} s alone, {two:.2f} s for two)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wikiextractor-python", default="/tmp/wikibench-venv/bin/python")
    parser.add_argument("--copies", type=int, default=8, help="copies of the sample in the larger dump")
    parser.add_argument(
        "--range-mb",
        type=float,
        default=0.0,
        help="--range-mb of the multistream runs (default 0: the command's own default)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", choices=["cpu", "speedup"], help="leave one part out")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sample, big = work / "enwiki-sample.xml", work / f"enwiki-sample-x{args.copies}.xml"
        sample.write_bytes(read_xml(ENWIKI_2014))
        big_xml = repeated_dump(args.copies)
        big.write_bytes(big_xml)
        print(f"dump: {ENWIKI_2014.name}; {args.copies} copies for the larger runs")
        if args.skip != "cpu":
            big_bz2 = big.with_name(big.name + ".bz2")
            big_bz2.write_bytes(bz2.compress(big_xml))
            cpu_rows(args, work, sample, big, big_bz2)
        if args.skip != "speedup":
            speedup_rows(args, work, big_xml)


if __name__ == "__main__":
    main()
