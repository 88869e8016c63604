"""What the recipes of `create` cost and save: disk, padding and label balance, on real text.

* disk: bytes per instance and in all, dynamic masking (Parquet, dupe factor 1) against static masking (TFRecords,
  dupe factor 10), at 128/20 on the same --mb of real text (benchmarks/bench_create.py's corpus);
* padding: the share of padded tokens at 512 on the demo's corpus (the bundled Wikipedia sample and books,
  extracted, with a vocab trained as the demo trains it), batches padded to L against batches padded to the edge
  of their length bin (--bin-size 64);
* labels: the share of label 1 in every output of nsp and sop, and the instances per objective.

  .venv/bin/python benchmarks/bench_recipes.py [--mb 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from bench_create import VOCAB, write_corpus

ROOT = Path(__file__).resolve().parent.parent
DEMO_SAMPLES = ROOT / "src" / "bertcorpus" / "pipeline" / "cli" / "demo-samples"
EXE = str(Path(sys.executable).parent / "bertcorpus")


def bertcorpus(*argv) -> None:
    local = [] if argv[0] == "vocab" else ["--runner", "DirectRunner"]  # vocab counts in process unless told
    done = subprocess.run([EXE, *map(str, argv), *local], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{argv[0]} failed:\n{done.stderr[-3000:]}")


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def output_bytes(entry: dict) -> int:
    return sum(s["bytes"] for split in ("train", "eval") if split in entry for s in entry[split]["shards"])


def instances(entry: dict) -> int:
    return sum(entry[split]["instances"] for split in ("train", "eval") if split in entry)


def disk(tmp: Path, megabytes: float) -> list[str]:
    tmp.mkdir(parents=True)
    corpus = tmp / "corpus.jsonl"
    text, _ = write_corpus(corpus, megabytes)
    lines = [f"disk, 128/20, {text / 1e6:.1f} MB of text:"]
    rows = []
    for name, flags in (
        ("static, dupe 10 (TFRecord)", ["--dupe-factor", "10"]),
        ("dynamic, dupe 1 (Parquet)", ["--masking", "dynamic"]),
        ("dynamic, sop", ["--masking", "dynamic", "--pair-objective", "sop"]),
        ("dynamic, none", ["--masking", "dynamic", "--pair-objective", "none"]),
    ):
        out = tmp / name.split(",")[0].replace(" ", "-") / str(len(rows))
        bertcorpus("create", "--input", corpus, "--vocab", VOCAB, "--output", out, *flags)
        entry = manifest(out)["outputs"]["seq128"]
        rows.append((name, instances(entry), output_bytes(entry), entry["train"].get("label_share")))
    base = rows[0][2]
    for name, n, size, share in rows:
        label = f", label share {share:.4f}" if share is not None else ""
        lines.append(
            f"  {name:28s} {n:>9,} instances {size / 1e6:8.2f} MB {size / n:7.1f} B/instance "
            f"{base / size:6.1f}x smaller in all{label}"
        )
    return lines


def demo_corpus(tmp: Path, *vocab_flags: str) -> tuple[list[Path], Path]:
    """The demo's corpus: the demo's two Wikipedia samples and its books extracted, and a vocab of 8,000 trained on
    them as the demo trains it: (documents globs, vocab)."""
    wiki, books, vocab = tmp / "wiki", tmp / "books", tmp / "vocab.txt"
    dumps = sorted((DEMO_SAMPLES / "wiki").glob("*.xml.bz2"))
    bertcorpus("extract-wiki", "--input", *dumps, "--output", wiki)
    bertcorpus("extract-books", "--input", DEMO_SAMPLES / "books", "--output", books)
    documents = [wiki / "documents-*.parquet", books / "documents-*.parquet"]
    bertcorpus("vocab", "--input", *documents, "--vocab-size", "8000", "--output", vocab, *vocab_flags)
    return documents, vocab


def padding(tmp: Path) -> list[str]:
    documents, vocab = demo_corpus(tmp)
    out = tmp / "records"
    bertcorpus(
        "create",
        "--input",
        *documents,
        "--vocab",
        vocab,
        "--output",
        out,
        "--masking",
        "dynamic",
        "--seq-configs",
        "128:20,512:80",
        "--bin-size",
        "64",
    )
    lines = ["padding, the demo's wiki + books corpus, dynamic masking, --bin-size 64:"]
    for name, length in (("seq128", 128), ("seq512", 512)):
        lengths = np.concatenate(
            [
                pq.read_table(p, columns=["length"])["length"].to_numpy()
                for p in sorted((out / name).glob("train-*.parquet"))
            ]
        ).astype(np.int64)
        edges = np.minimum((lengths - 1) // 64 * 64 + 64, length)
        unbinned = 1 - lengths.sum() / (len(lengths) * length)
        binned = 1 - lengths.sum() / edges.sum()
        lines.append(
            f"  {name}: {len(lengths):,} instances, mean length {lengths.mean():.1f}; padded share "
            f"{unbinned:.4f} padded to L, {binned:.4f} padded to the bin's edge "
            f"({binned / unbinned:.3f} of it)"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0, help="MB of real text for the disk comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for line in disk(Path(tmp) / "disk", args.mb) + padding(Path(tmp) / "padding"):
            print(line, flush=True)


if __name__ == "__main__":
    main()
