"""Speed and memory of `bertcorpus create` at 128/20, dupe factor 10.

Figures (recorded in docs/benchmarks.md):
  * marginal CPU-µs per instance = (CPU of the large run − CPU of the tiny run) ÷ (difference in instances),
    user+sys of the command and every worker process it starts;
  * start-up CPU = CPU of the run on the reference sample_text.txt;
  * wall-clock speed-up from 1 to 2 worker processes on the large run; peak RSS of the largest process.

The large input is real text: the Gutenberg books and the cleaned enwiki sample from ../shared/data, written as
JSONL documents and repeated (with fresh ids) until it reaches --mb megabytes.

    .venv/bin/python benchmarks/bench_create.py [--mb 20] [--modes multi_processing:1,multi_processing:2]
        [--speedup-rounds 5] [--control] [--reference SCRIPT] [--baseline TREE]

With --baseline TREE (a checkout of another version of this repository, e.g. `git worktree add /tmp/old REV`),
every mode and every speed-up round is measured for that code too, alternately with the current code, and the
marginal figures are compared.

With --reference PATH (a runnable copy of google-research/bert's create_pretraining_data.py, its tokenization.py
beside it, `import tensorflow as tf` pointed at `tensorflow.compat.v1`), the reference runs side by side on a
--reference-mb slice of the same text in its own input format (one sentence per line, a blank line between
documents), and so does `create` on the same file, alternating, so that the ratio of the two marginal figures
holds on whatever machine and hour the script runs.
"""

from __future__ import annotations

import argparse
import bz2
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
ENTRY_POINTS = {True: "bertcorpus.pipeline.cli.commands", False: "pipeline.cli"}  # by whether a tree has bertcorpus/
VOCAB = ROOT / "tests" / "data" / "reference" / "bert-base-uncased-vocab.txt"
SAMPLE = ROOT / "tests" / "data" / "reference" / "sample_text.txt"

_MEASURE = """
import json, resource, subprocess, sys, time
start = time.time()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": done.returncode, "cpu": usage.ru_utime + usage.ru_stime, "wall": time.time() - start,
                  "maxrss_mb": usage.ru_maxrss / 1024, "err": done.stderr[-2000:]}))
"""


def measure(cmd: list[str]) -> dict:
    """Run cmd in a fresh process; its CPU includes all of its descendants. Earlier runs' written files are flushed
    to disk first, so that no run pays for another's: the kernel writes dirty pages back some 30 s after they were
    written, which would land in the middle of the next run and take a core from it."""
    os.sync()
    out = subprocess.run([sys.executable, "-c", _MEASURE, *map(str, cmd)], capture_output=True, text=True)
    result = json.loads(out.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"command failed: {' '.join(map(str, cmd))}\n{result['err']}")
    return result


def real_documents() -> list[tuple[str, str]]:
    sys.path.insert(0, str(ROOT))
    docs = []
    for path in sorted(glob.glob(str(SHARED / "books" / "gutenberg_utf8" / "*.txt"))):
        docs.append((Path(path).stem, Path(path).read_text(encoding="utf-8")))
    for path in sorted(glob.glob(str(SHARED / "books" / "gutenberg_cp1252_with_header" / "*.txt"))):
        docs.append((Path(path).stem, Path(path).read_bytes().decode("cp1252").replace("\r\n", "\n")))
    from bertcorpus.transforms.wiki_page_items import Page
    from bertcorpus.transforms.wiki_pages import iter_pages
    from bertcorpus.transforms.wikitext import clean_wikitext

    with bz2.open(SHARED / "wiki" / "enwiki-2014-sample-truncated.xml.bz2") as f:
        for page in iter_pages(f):
            if isinstance(page, Page) and page.ns == 0 and not page.redirect and page.text:
                text = clean_wikitext(page.text, title=page.title)
                if len(text) > 500:
                    docs.append((f"enwiki:{page.page_id}", text))
    return docs


def document_pieces() -> list[tuple[str, str]]:
    """The real documents, books cut into ~16 KB documents of 60 paragraphs."""
    pieces = []
    for doc_id, text in real_documents():
        paragraphs = text.split("\n\n")
        for i in range(0, len(paragraphs), 60):
            pieces.append((f"{doc_id}:{i}", "\n\n".join(paragraphs[i : i + 60])))
    return pieces


def write_corpus(path: Path, megabytes: float) -> tuple[int, int]:
    """Books cut into ~16 KB documents plus wiki articles, repeated with fresh ids to reach the size."""
    pieces = document_pieces()
    distinct = sum(len(t.encode()) for _, t in pieces)
    size, rep = 0, 0
    with open(path, "w") as f:
        while size < megabytes * 1e6:
            for doc_id, text in pieces:
                f.write(json.dumps({"id": f"r{rep}:{doc_id}", "text": text}) + "\n")
                size += len(text.encode())
            rep += 1
    return size, distinct


def write_reference_corpus(path: Path, megabytes: float) -> int:
    """The benchmark's documents in the reference's input format, sentences split by `create`'s splitter."""
    from bertcorpus.transforms.sentences import document_sentences

    size, pieces = 0, document_pieces()
    with open(path, "w", encoding="utf-8") as f:
        while size < megabytes * 1e6:
            for _, text in pieces:
                block = "".join(line + "\n" for line in document_sentences(text))
                f.write(block + "\n")
                size += len(block.encode())
                if size >= megabytes * 1e6:
                    return size
    return size


def create_command(exe: list[str], inputs: list, output: Path, *options: str) -> list[str]:
    """The `create` command every measurement runs: 128/20 (the defaults), dupe factor 10, the reference vocab."""
    return [
        *exe,
        "create",
        "--input",
        *map(str, inputs),
        "--vocab",
        str(VOCAB),
        "--output",
        str(output),
        "--dupe-factor",
        "10",
        *options,
    ]


def fresh(path: Path) -> Path:
    """An output directory emptied before a measured run: deleting an earlier run's output is not the job's work."""
    shutil.rmtree(path, ignore_errors=True)
    return path


def cheaper(best: dict | None, run: dict) -> dict:
    """Of two measured runs of the same command, the one that took less CPU."""
    return run if best is None or run["cpu"] < best["cpu"] else best


def marginal_us(tiny: dict, large: dict) -> float:
    """CPU-µs per extra instance between a tiny and a large run."""
    return (large["cpu"] - tiny["cpu"]) / (large["instances"] - tiny["instances"]) * 1e6


def compare_with_reference(script: Path, megabytes: float, repeat: int, tmp: Path, exe: list[str]) -> None:
    """Marginal CPU-µs per instance of the reference and of `create` (in memory) on the same text files."""
    corpus = tmp / "reference-corpus.txt"
    size = write_reference_corpus(corpus, megabytes)
    print(f"reference comparison input: {size / 1e6:.1f} MB of text, one sentence per line", flush=True)
    flags = [
        "--do_lower_case=True",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        "--dupe_factor=10",
        f"--vocab_file={VOCAB}",
    ]
    best: dict = {}
    for _ in range(repeat):
        for name, path in (("tiny", SAMPLE), ("large", corpus)):
            out = tmp / "reference.tfrecord"
            r = measure([sys.executable, script, f"--input_file={path}", f"--output_file={out}", *flags])
            r["instances"] = int(re.findall(r"Wrote (\d+) total instances", r["err"])[-1])
            best[("reference", name)] = cheaper(best.get(("reference", name)), r)
            ours = fresh(tmp / "ours")
            r = measure(create_command(exe, [path], ours, "--input-format", "text", "--direct_running_mode=in_memory"))
            r["instances"] = instances(ours)
            best[("create", name)] = cheaper(best.get(("create", name)), r)
    marginal = {}
    for tool in ("reference", "create"):
        tiny, large = best[(tool, "tiny")], best[(tool, "large")]
        marginal[tool] = marginal_us(tiny, large)
        print(
            json.dumps(
                {
                    "tool": tool,
                    "startup_cpu_s": round(tiny["cpu"], 2),
                    "large_cpu_s": round(large["cpu"], 2),
                    "instances": large["instances"],
                    "marginal_cpu_us_per_instance": round(marginal[tool], 2),
                    "peak_rss_mb": round(large["maxrss_mb"]),
                }
            ),
            flush=True,
        )
    print(json.dumps({"create_vs_reference_per_core": round(marginal["reference"] / marginal["create"], 1)}))


def instances(output: Path) -> int:
    manifest = json.loads((output / "manifest.json").read_text())
    return sum(o[s]["instances"] for o in manifest["outputs"].values() for s in ("train", "eval") if s in o)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=20.0, help="size of the large input (MB of text)")
    parser.add_argument(
        "--modes",
        default="multi_processing:1,multi_processing:2",
        help="running_mode:workers pairs to measure ('' for none)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement; the fastest counts")
    parser.add_argument(
        "--reference",
        type=Path,
        metavar="SCRIPT",
        help="also run this copy of the reference create_pretraining_data.py side by side",
    )
    parser.add_argument(
        "--reference-mb",
        type=float,
        default=5.0,
        help="size of the text both tools read for the reference comparison (MB)",
    )
    parser.add_argument(
        "--speedup-rounds",
        type=int,
        default=0,
        metavar="N",
        help="also run N rounds of one 1-worker and one 2-worker run on the large input, "
        "alternating, and report each round's wall-clock speed-up and their median",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="also measure every mode and speed-up round with the code of this checkout, alternately",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="also measure what this machine gives two independent create runs at once (the "
        "ceiling for a 2-worker speed-up at the time of the run)",
    )
    args = parser.parse_args()
    exe = [str(Path(sys.executable).parent / "bertcorpus")]
    codes = {"current": exe}
    if args.baseline:
        # Run from that checkout with it on the path, so that its modules come first, also in the worker processes
        # Beam starts (they put their working directory first on the path).
        tree = str(args.baseline.resolve())
        codes["baseline"] = [
            "env",
            "-C",
            tree,
            f"PYTHONPATH={tree}",
            sys.executable,
            "-c",
            # a checkout from before the bertcorpus namespace has its command line at pipeline.cli
            f"from {ENTRY_POINTS[(Path(tree) / 'bertcorpus').is_dir()]} import entry_point; entry_point()",
        ]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = tmp / "corpus.jsonl"
        size, distinct = write_corpus(corpus, args.mb)
        print(f"large input: {size / 1e6:.1f} MB of text ({distinct / 1e6:.1f} MB distinct, repeated)")
        for mode in filter(None, args.modes.split(",")):
            running_mode, workers = mode.split(":")
            beam = [f"--direct_running_mode={running_mode}", f"--direct_num_workers={workers}"]
            runs: dict = {}
            for _ in range(args.repeat):
                for code, command in codes.items():  # alternately, so that both see the machine alike
                    for name, inputs in (("tiny", [SAMPLE]), ("large", [corpus])):
                        out = fresh(tmp / f"out-{name}")
                        r = measure(create_command(command, inputs, out, *beam))
                        r["instances"] = instances(out)
                        runs[(code, name)] = cheaper(runs.get((code, name)), r)
            marginal = {}
            for code in codes:
                tiny, large = runs[(code, "tiny")], runs[(code, "large")]
                marginal[code] = marginal_us(tiny, large)
                print(
                    json.dumps(
                        {
                            "mode": mode,
                            "code": code,
                            "startup_cpu_s": round(tiny["cpu"], 2),
                            "large_cpu_s": round(large["cpu"], 2),
                            "large_wall_s": round(large["wall"], 2),
                            "instances": large["instances"],
                            "marginal_cpu_us_per_instance": round(marginal[code], 2),
                            "instances_per_cpu_s": round(1e6 / marginal[code]),
                            "input_mb_per_cpu_s": round(size / 1e6 / (large["cpu"] - tiny["cpu"]), 3),
                            "peak_rss_mb": round(large["maxrss_mb"]),
                        }
                    ),
                    flush=True,
                )
            if "baseline" in marginal:
                print(
                    json.dumps(
                        {
                            "mode": mode,
                            "marginal_current_over_baseline": round(marginal["current"] / marginal["baseline"], 3),
                        }
                    ),
                    flush=True,
                )
        if args.speedup_rounds:
            speedup_rounds(codes, corpus, tmp, args.speedup_rounds)
        if args.control:
            control(exe, corpus, tmp, args.repeat)
        if args.reference:
            compare_with_reference(args.reference.resolve(), args.reference_mb, args.repeat, tmp, exe)


def speedup_rounds(codes: dict[str, list[str]], corpus: Path, tmp: Path, rounds: int) -> None:
    """Wall-clock speed-up from 1 to 2 worker processes, a 1-worker and a 2-worker run side by side per round (and
    per code, with --baseline): the VM's speed drifts between minutes, and a pair taken together sees the same
    machine."""
    ratios: dict[str, list[float]] = {code: [] for code in codes}
    for i in range(rounds):
        for code, exe in codes.items():
            wall = {}
            for workers in (1, 2):
                out = fresh(tmp / f"out-round-{workers}")
                wall[workers] = measure(
                    create_command(
                        exe, [corpus], out, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"
                    )
                )["wall"]
            ratios[code].append(wall[1] / wall[2])
            print(
                json.dumps(
                    {
                        "round": i + 1,
                        "code": code,
                        "wall_1_worker_s": round(wall[1], 2),
                        "wall_2_workers_s": round(wall[2], 2),
                        "speedup": round(ratios[code][-1], 3),
                    }
                ),
                flush=True,
            )
    for code, found in ratios.items():
        print(
            json.dumps({"code": code, "speedup_median": round(statistics.median(found), 3), "rounds": rounds}),
            flush=True,
        )


def control(exe: list[str], corpus: Path, tmp: Path, repeat: int) -> None:
    """Wall time of one in-memory create run on a 4 MB slice of the corpus, and of two such runs at once."""
    from bench_extract_wiki import best_wall

    part = tmp / "control.jsonl"
    with open(corpus, "rb") as src, open(part, "wb") as dst:
        for line in src:
            dst.write(line)
            if dst.tell() > 4e6:
                break

    def command(i: int) -> list[str]:
        return create_command(exe, [part], tmp / f"control-{i}", "--overwrite", "--direct_running_mode=in_memory")

    one, two = best_wall([command(0)], repeat), best_wall([command(0), command(1)], repeat)
    print(
        json.dumps(
            {
                "control": "two independent in-memory runs at once vs one",
                "one_s": round(one, 2),
                "two_s": round(two, 2),
                "ceiling": round(2 * one / two, 2),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
