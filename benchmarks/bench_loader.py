"""Speed of the loader of pretraining batches (trainer/loader.py) on one core, beside tf.data on the same records.

Figures (recorded in docs/benchmarks.md), each in a fresh process pinned to one CPU, the files in the page cache:
  * sequences/s of PretrainingLoader at 128/20 and 512/80, for the dynamic Parquet form (masks drawn at load
    time) and for static TFRecords (masks in the records), batch size 256, reading batches loader[0], loader[1], ...;
  * sequences/s of tf.data on the same TFRecords (trainer/data.py train_dataset, one thread);
  * the one-off scan that builds a TFRecord output's offset index (with its sha256 check), in MB/s;
  * the sha256 check of the dynamic form's shards when a first loader is made, and what a later one costs.

The corpus is real text: bench_create.py's Gutenberg books and enwiki articles as JSONL, repeated to --mb
megabytes, made into 128/20 and 512/80 instances by `bertcorpus create` in both forms (dupe factor 5 each).

    .venv/bin/python benchmarks/bench_loader.py [--mb 20] [--seconds 10] [--repeat 3] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_create import VOCAB, write_corpus

CONFIGS = ((128, 20), (512, 80))

_LOADER = """
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
out, cache = sys.argv[1], sys.argv[5]
seq_length, batch_size, seconds = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
from bertcorpus.trainer.loader import PretrainingLoader
start = time.perf_counter()
loader = PretrainingLoader(out, seq_length=seq_length, batch_size=batch_size, seed=1, cache_dir=cache)
opened = time.perf_counter() - start
loader[0]  # the first batch opens the files
start, count = time.perf_counter(), 0
for i in range(1, len(loader)):
    loader[i]
    count += batch_size
    if time.perf_counter() - start > seconds:
        break
rate = round(count / (time.perf_counter() - start))
print(json.dumps({"open_s": round(opened, 2), "sequences": count, "seq_per_s": rate}))
"""

_TF_DATA = """
import json, os, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
from bertcorpus.trainer.data import train_dataset
files = sys.argv[1].split(",")
seq_length, predictions, batch_size, seconds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
options = tf.data.Options()
options.threading.private_threadpool_size = 1
options.threading.max_intra_op_parallelism = 1
ds = train_dataset(files, batch_size, seq_length, predictions, seed=1).with_options(options)
batches = iter(ds)
next(batches)
start, count = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    next(batches)
    count += batch_size
print(json.dumps({"sequences": count, "seq_per_s": round(count / (time.perf_counter() - start))}))
"""


def run_json(code: str, *args) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def create(corpus: Path, out: Path, *flags: str) -> Path:
    if not (out / "manifest.json").exists():
        exe = str(Path(sys.executable).parent / "bertcorpus")
        subprocess.run(
            [
                exe,
                "create",
                "--input",
                str(corpus),
                "--vocab",
                str(VOCAB),
                "--output",
                str(out),
                "--seq-configs",
                ",".join(f"{L}:{P}" for L, P in CONFIGS),
                "--dupe-factor",
                "5",
                "--overwrite",
                "--runner",
                "DirectRunner",
                *flags,
            ],
            check=True,
            capture_output=True,
        )
    return out


def shard_paths(out: Path, seq_length: int) -> list[str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [str(out / s["path"]) for s in manifest["outputs"][f"seq{seq_length}"]["train"]["shards"]]


def best(code: str, repeat: int, *args) -> dict:
    runs = [run_json(code, *args) for _ in range(repeat)]
    top = max(runs, key=lambda r: r["seq_per_s"])
    return {**top, "runs_seq_per_s": [r["seq_per_s"] for r in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=20.0, help="megabytes of text for the corpus")
    parser.add_argument("--seconds", type=float, default=10.0, help="time each measurement reads for")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the fastest counts")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/bertcorpus-bench-loader"),
        help="kept between runs: the corpus, both outputs and the index cache",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.work / "corpus.jsonl"
    if not corpus.exists():
        write_corpus(corpus, args.mb)
    outputs = {
        "static": create(corpus, args.work / "static"),
        "dynamic": create(corpus, args.work / "dynamic", "--masking", "dynamic"),
    }

    # The offset index: a fresh cache, so that the first construction scans every TFRecord shard.
    scan_cache = args.work / "scan-cache"
    for seq_length, _ in CONFIGS:
        for old in scan_cache.glob("*"):
            old.unlink()
        size = sum(os.path.getsize(p) for p in shard_paths(outputs["static"], seq_length))
        opened = run_json(_LOADER, outputs["static"], seq_length, args.batch_size, 0, scan_cache)["open_s"]
        print(
            json.dumps(
                {
                    "what": "tfrecord index scan",
                    "seq_length": seq_length,
                    "mb": round(size / 1e6),
                    "seconds": opened,
                    "mb_per_s": round(size / 1e6 / opened),
                }
            ),
            flush=True,
        )

    # The sha256 check of a dynamic output's Parquet shards: a fresh cache hashes every shard when the loader is
    # made; a second loader finds this version of each file marked as checked and hashes nothing.
    for seq_length, _ in CONFIGS:
        for old in scan_cache.glob("*"):
            old.unlink()
        size = sum(os.path.getsize(p) for p in shard_paths(outputs["dynamic"], seq_length))
        first = run_json(_LOADER, outputs["dynamic"], seq_length, args.batch_size, 0, scan_cache)["open_s"]
        again = run_json(_LOADER, outputs["dynamic"], seq_length, args.batch_size, 0, scan_cache)["open_s"]
        print(
            json.dumps(
                {
                    "what": "parquet shards hashed when a loader is made",
                    "seq_length": seq_length,
                    "mb": round(size / 1e6),
                    "first_open_s": first,
                    "later_open_s": again,
                    "mb_per_s": round(size / 1e6 / max(first - again, 1e-3)),
                }
            ),
            flush=True,
        )

    cache = args.work / "cache"
    for seq_length, predictions in CONFIGS:
        for form, out in outputs.items():
            manifest = json.loads((out / "manifest.json").read_text())
            instances = manifest["outputs"][f"seq{seq_length}"]["train"]["instances"]
            result = best(_LOADER, args.repeat, out, seq_length, args.batch_size, args.seconds, cache)
            print(
                json.dumps(
                    {
                        "what": f"PretrainingLoader, {form}",
                        "config": f"{seq_length}/{predictions}",
                        "instances": instances,
                        **result,
                    }
                ),
                flush=True,
            )
        files = ",".join(shard_paths(outputs["static"], seq_length))
        result = best(_TF_DATA, args.repeat, files, seq_length, predictions, args.batch_size, args.seconds)
        print(
            json.dumps({"what": "tf.data train_dataset, static", "config": f"{seq_length}/{predictions}", **result}),
            flush=True,
        )


if __name__ == "__main__":
    main()
