"""ModernBERT-class recipes on the demo's corpus: long-context outputs, packed batches, 30% masking and MDS.

* outputs: `create --masking dynamic --pair-objective none --masked-lm-prob 0.3 --seq-configs 1024:308,8192:2458`,
  as Parquet and as MDS (`--record-format mds`): instances, disk, mean length, and the padding share of batches
  padded to L and to the edge of 64-token bins; the CPU seconds of each whole create run, and of the shard writers
  alone on the same instances (best of 3);
* packed batches: the share of the token budget that instances fill, for budgets of 8 and 64 sequences;
* loader throughput on one pinned core, tokens per CPU second of the process (the machine is shared, so CPU time
  rather than wall time): layout="packed" with 30% masking (80/10/10) over Parquet and over
  MDS, against the padded reference layout at 15% (the loader before these recipes) in the same run;
* StreamingDataset (mosaicml-streaming, the [mds] extra) reading our MDS samples one by one, on one core, beside
  our loader over Parquet.

  .venv/bin/python benchmarks/bench_modern_recipes.py [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from bench_recipes import bertcorpus, demo_corpus

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ((1024, 308), (8192, 2458))
FLAGS = [
    *("--masking", "dynamic", "--pair-objective", "none", "--masked-lm-prob", "0.3"),
    *("--seq-configs", ",".join(f"{L}:{P}" for L, P in CONFIGS)),
]

_LOADER = """
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
out, cache, L, seconds, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
from bertcorpus.trainer.loader import PretrainingLoader
if layout == "packed":
    loader = PretrainingLoader(out, seq_length=L, layout="packed", tokens_per_batch=64 * L, masked_lm_prob=0.3,
                               seed=1, cache_dir=cache)
else:
    loader = PretrainingLoader(out, seq_length=L, batch_size=64, masked_lm_prob=0.15, seed=1, cache_dir=cache)
loader[0]  # the first batch opens the files and packs the epoch's first window
start, cpu, tokens, epoch, i = time.perf_counter(), time.process_time(), 0, 0, 1
while time.perf_counter() - start < seconds:
    if i == len(loader):
        epoch, i = epoch + 1, 0
        loader.set_epoch(epoch)
    batch = loader[i]
    tokens += len(batch["input_ids"]) if layout == "packed" else int(batch["input_mask"].sum())
    i += 1
print(json.dumps({"tokens": tokens, "tokens_per_s": round(tokens / (time.process_time() - cpu))}))
"""

_STREAMING = """
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
from streaming.base.util import clean_stale_shared_memory
from bertcorpus.trainer.mds_files import streaming_dataset
clean_stale_shared_memory()
out, L, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
dataset = streaming_dataset(out, L, "train", shuffle=False, batch_size=1)
dataset[0]
start, cpu, tokens, i = time.perf_counter(), time.process_time(), 0, 0
while time.perf_counter() - start < seconds:
    tokens += len(dataset[i % len(dataset)]["input_ids"])
    i += 1
print(json.dumps({"tokens": tokens, "tokens_per_s": round(tokens / (time.process_time() - cpu))}))
"""


def run_json(code: str, *args) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def create(documents: list[Path], vocab: Path, out: Path, *flags: str) -> float:
    """CPU seconds of the whole create run (its processes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    bertcorpus("create", "--input", *documents, "--vocab", vocab, "--output", out, "--overwrite", *FLAGS, *flags)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def lengths_of(out: Path, L: int) -> np.ndarray:
    paths = sorted((out / f"seq{L}").glob("train-*.parquet"))
    return np.concatenate([pq.read_table(p, columns=["length"])["length"].to_numpy() for p in paths]).astype(np.int64)


def train_bytes(out: Path, L: int) -> int:
    return sum(
        s["bytes"] for s in json.loads((out / "manifest.json").read_text())["outputs"][f"seq{L}"]["train"]["shards"]
    )


def outputs(parquet: Path, mds: Path, compact: Path, cpu: dict[str, float]) -> list[str]:
    lines = ["outputs, the demo's wiki + books corpus, --pair-objective none, dynamic masking (train split):"]
    for L, _ in CONFIGS:
        m = json.loads((parquet / "manifest.json").read_text())["outputs"][f"seq{L}"]
        lengths = lengths_of(parquet, L)
        edges = np.minimum((lengths - 1) // 64 * 64 + 64, L)
        size, size_mds, size_compact = (train_bytes(out, L) for out in (parquet, mds, compact))
        lines.append(
            f"  seq{L}: {len(lengths):,} instances (eval {m.get('eval', {}).get('instances', 0):,}), mean length "
            f"{lengths.mean():.1f}; disk {size / 1e6:.2f} MB Parquet, {size_mds / 1e6:.2f} MB MDS "
            f"({size_compact / 1e6:.2f} MB with --mds-ids compact); padded share "
            f"{1 - lengths.sum() / (len(lengths) * L):.4f} padded to L, {1 - lengths.sum() / edges.sum():.4f} to "
            "64-token bins"
        )
    lines.append(
        f"  whole create, CPU s: Parquet {cpu['parquet']:.1f}, MDS {cpu['mds']:.1f} "
        f"({cpu['mds'] / cpu['parquet'] - 1:+.1%})"
    )
    return lines


def writer_cost(parquet: Path) -> list[str]:
    """The shard writers alone: the same instances (every train instance at 1,024) to Parquet and to MDS bytes."""
    from bertcorpus.pipeline.create.shard_writing import _parquet_bytes
    from bertcorpus.transforms.instance_columns import InstanceColumns
    from bertcorpus.transforms.instance_mds import MdsColumns, mds_shard

    table = pq.read_table(sorted((parquet / "seq1024").glob("train-*.parquet")))
    lengths = table["length"].to_numpy().astype(np.int64)
    ids = np.zeros((len(lengths), 1024), np.int32)
    flat = table["input_ids"].combine_chunks().values.to_numpy()
    ids[np.arange(1024)[None, :] < lengths[:, None]] = flat
    zeros = np.zeros(len(lengths), np.int64)
    instances = InstanceColumns(
        ids, lengths, lengths - 2, np.zeros((len(lengths), 0)), np.zeros((len(lengths), 0)), zeros, zeros
    )
    times = {}
    for name, write in (
        ("parquet", lambda: _parquet_bytes(instances, 8000)),
        ("mds", lambda: mds_shard(instances, MdsColumns.for_output(8000, "none", "int64"))),
    ):
        runs = []
        for _ in range(3):
            start = time.process_time()
            write()
            runs.append(time.process_time() - start)
        times[name] = min(runs)
    return [
        f"shard writers alone, {len(lengths):,} instances of seq1024: Parquet {times['parquet'] * 1e3:.1f} ms, MDS "
        f"{times['mds'] * 1e3:.1f} ms CPU ({times['mds'] / times['parquet']:.2f}x)"
    ]


def filled(parquet: Path, cache: Path) -> list[str]:
    from bertcorpus.trainer.loader import PretrainingLoader

    lines = ["packed batches, share of the token budget filled (whole epoch 0):"]
    for L, _ in CONFIGS:
        shares = []
        for rows in (8, 64):
            loader = PretrainingLoader(
                parquet, seq_length=L, layout="packed", tokens_per_batch=rows * L, cache_dir=cache
            )
            shares.append(f"{rows} x L: {loader.filled_share():.4f} in {len(loader)} batches")
        lines.append(f"  seq{L}: " + "; ".join(shares))
    return lines


def throughput(parquet: Path, mds: Path, cache: Path, seconds: float) -> list[str]:
    lines = ["one pinned core, tokens per CPU second (real tokens; packed: 64 x L per batch, 30% masking 80/10/10):"]
    for L, _ in CONFIGS:
        padded = run_json(_LOADER, parquet, cache, L, seconds, "reference")["tokens_per_s"]
        packed = run_json(_LOADER, parquet, cache, L, seconds, "packed")["tokens_per_s"]
        packed_mds = run_json(_LOADER, mds, cache, L, seconds, "packed")["tokens_per_s"]
        streaming = run_json(_STREAMING, mds, L, seconds)["tokens_per_s"]
        lines.append(
            f"  seq{L}: loader packed 30% {packed / 1e6:.2f}M (Parquet), {packed_mds / 1e6:.2f}M (MDS); padded "
            f"reference layout 15% {padded / 1e6:.2f}M; StreamingDataset over our MDS (reads only, sample by "
            f"sample) {streaming / 1e6:.2f}M"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time each throughput measurement reads for")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        documents, vocab = demo_corpus(work / "corpus", "--pad-to-multiple", "64")
        parquet, mds, compact, cache = work / "parquet", work / "mds", work / "mds-compact", work / "cache"
        cpu = {
            "parquet": create(documents, vocab, parquet),
            "mds": create(documents, vocab, mds, "--record-format", "mds"),
        }
        create(documents, vocab, compact, "--record-format", "mds", "--mds-ids", "compact")
        for line in outputs(parquet, mds, compact, cpu) + writer_cost(parquet) + filled(parquet, cache):
            print(line, flush=True)
        for line in throughput(parquet, mds, cache, args.seconds):
            print(line, flush=True)


if __name__ == "__main__":
    main()
