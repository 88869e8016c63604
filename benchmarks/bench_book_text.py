"""CPU cost of book extraction per MB of raw book files: decode_book + clean_book + dedup_key, and MinHash.

Every *.txt file under the given directories (default: the samples in tests/data/books) is read into memory once,
then processed in passes over all the files until at least --min-mb of raw input has gone through; one untimed
pass first warms up the regex caches. CPU time is time.process_time() of this process around each call, so file
reading and start-up are not counted. Each figure is the best of --repeat rounds, the one least disturbed by
other load. Throughput is MB (10**6 bytes) of raw input per CPU-second, on one core; minhash_signature is also
given per MB of its own input, the cleaned text.

Run from the repository root, e.g. over all the shared book samples:
    .venv/bin/python benchmarks/bench_book_text.py ../shared/data/books
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import DecodedBook, decode_book
from bertcorpus.transforms.book_duplicates import dedup_key, minhash_signature

STAGES = ("decode_book", "clean_book", "dedup_key", "minhash_signature")


def process(raws: list[bytes], min_bytes: int) -> tuple[dict[str, float], int, int]:
    """CPU seconds per stage over passes of all files until min_bytes of raw input; raw and clean bytes."""
    cpu = dict.fromkeys(STAGES, 0.0)
    raw_bytes = clean_bytes = 0
    clock = time.process_time
    while raw_bytes < min_bytes:
        for raw in raws:
            t0 = clock()
            decoded = decode_book(raw)
            t1 = clock()
            cpu["decode_book"] += t1 - t0
            raw_bytes += len(raw)
            if not isinstance(decoded, DecodedBook):
                continue
            book = clean_book(decoded.text)
            t2 = clock()
            dedup_key(book.text)
            t3 = clock()
            minhash_signature(book.text)
            t4 = clock()
            cpu["clean_book"] += t2 - t1
            cpu["dedup_key"] += t3 - t2
            cpu["minhash_signature"] += t4 - t3
            clean_bytes += len(book.text.encode("utf-8"))
    return cpu, raw_bytes, clean_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "dirs",
        nargs="*",
        type=Path,
        default=[REPO / "tests" / "data" / "books"],
        help="directories searched recursively for *.txt book files",
    )
    parser.add_argument("--min-mb", type=float, default=20.0, help="raw input to process per round (MB)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the fastest is reported")
    args = parser.parse_args()

    files = sorted(path for d in args.dirs for path in d.rglob("*.txt"))
    if not files:
        parser.error("no *.txt files found")
    raws = [path.read_bytes() for path in files]
    total = sum(map(len, raws))
    print(f"{len(files)} files, {total / 1e6:.2f} MB, from {', '.join(str(d) for d in args.dirs)}")
    process(raws, 1)  # warm-up

    best: dict[str, float] = {}
    raw_bytes = clean_bytes = 0
    for _ in range(args.repeat):
        cpu, raw_bytes, clean_bytes = process(raws, int(args.min_mb * 1e6))
        for stage, seconds in cpu.items():
            best[stage] = min(best.get(stage, seconds), seconds)
    raw_mb, clean_mb = raw_bytes / 1e6, clean_bytes / 1e6
    print(f"per round: {raw_mb:.1f} MB raw in, {clean_mb:.1f} MB clean text out; best of {args.repeat} rounds")
    print(f"{'stage':<34}{'CPU s':>8}{'MB/s of raw input':>20}")
    for stage in STAGES:
        print(f"{stage:<34}{best[stage]:>8.3f}{raw_mb / best[stage]:>20.1f}")
    pipeline = best["decode_book"] + best["clean_book"] + best["dedup_key"]
    print(f"{'decode + clean + dedup_key':<34}{pipeline:>8.3f}{raw_mb / pipeline:>20.1f}")
    with_minhash = pipeline + best["minhash_signature"]
    print(f"{'decode + clean + dedup + minhash':<34}{with_minhash:>8.3f}{raw_mb / with_minhash:>20.1f}")
    print(f"minhash_signature alone: {clean_mb / best['minhash_signature']:.1f} MB/s of cleaned text")


if __name__ == "__main__":
    main()
