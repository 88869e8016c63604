"""Speed of the whole `bertcorpus extract-books` command on real book files: MB/s per core, and 1 → 2 workers.

The book files under the given directory (default: the shared samples, else tests/data/books) are copied under
distinct names (c0-…, c1-…) until the copies hold at least --min-mb of raw input, so every copy is a separate book
with its own id. Each configuration runs the real command as a subprocess, as a user would, and is timed from
start to exit: wall time, and CPU time (user + sys of the command and the worker processes it waited for). MB
is 10**6 bytes of raw input; "per core" divides by CPU seconds. Each figure is the best of --repeat runs.

The copies are exact duplicates, so with dedup on (the default) all but one copy of each book are dropped before
writing; --no-dedup writes every copy and shows the cost of the dedup stages. A run on one small book gives the
fixed cost of starting Beam, which every figure includes.

Run from the repository root:
    .venv/bin/python benchmarks/bench_extract_books.py ../shared/data/books --min-mb 24
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BOOKS = REPO.parent / "shared" / "data" / "books"
IN_MEMORY = ["--direct_running_mode=in_memory"]
CONFIGS = [
    ("in memory, exact + near dedup (default)", IN_MEMORY),
    ("in memory, exact dedup only", IN_MEMORY + ["--near-dup-threshold", "0"]),
    ("in memory, --no-dedup", IN_MEMORY + ["--no-dedup"]),
    ("multi_processing, 1 worker", ["--direct_running_mode=multi_processing", "--direct_num_workers=1"]),
    ("multi_processing, 2 workers", ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]),
]


def make_copies(books: Path, target: Path, min_bytes: int) -> int:
    """Copies of every book file under distinct names until min_bytes; returns the bytes copied."""
    files = sorted(p for p in books.rglob("*.txt") if p.is_file())
    if not files:
        sys.exit(f"no *.txt files under {books}")
    size, copy = 0, 0
    while size < min_bytes:
        for path in files:
            dest = target / f"c{copy}" / path.relative_to(books).parent / f"c{copy}-{path.name}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
            size += dest.stat().st_size
        copy += 1
    return size


def timed_run(inputs: Path, output: Path, options: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of the command."""
    command = [
        sys.executable,
        "-m",
        "bertcorpus",
        "extract-books",
        "--input",
        str(inputs),
        "--output",
        str(output),
        "--overwrite",
        "--runner=DirectRunner",
        *options,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "books",
        nargs="?",
        type=Path,
        default=DEFAULT_BOOKS if DEFAULT_BOOKS.is_dir() else REPO / "tests" / "data" / "books",
    )
    parser.add_argument("--min-mb", type=float, default=20.0, help="raw input to copy together (default 20)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration; the best counts (default 2)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-books-") as tmp:
        inputs, output = Path(tmp) / "books", Path(tmp) / "out"
        size = make_copies(args.books, inputs, int(args.min_mb * 1e6))
        one = min(inputs.rglob("*.txt"), key=lambda p: p.stat().st_size)
        start_wall, start_cpu = min(timed_run(one, output, IN_MEMORY) for _ in range(args.repeat))
        print(
            f"input: {size / 1e6:.1f} MB in {sum(1 for _ in inputs.rglob('*.txt'))} files "
            f"(copies of {args.books}); {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"fixed cost (one {one.stat().st_size / 1e3:.0f} kB book, in memory): "
            f"{start_wall:.1f} s wall, {start_cpu:.1f} s CPU\n"
        )
        print(
            f"{'configuration':42} {'wall s':>7} {'CPU s':>7} {'MB/s wall':>10} {'MB/s per core':>14} "
            f"{'(less the fixed CPU)':>21}"
        )
        walls = {}
        for name, options in CONFIGS:
            wall, cpu = min(timed_run(inputs, output, options) for _ in range(args.repeat))
            walls[name] = wall
            print(
                f"{name:42} {wall:7.1f} {cpu:7.1f} {size / 1e6 / wall:10.2f} {size / 1e6 / cpu:14.2f} "
                f"{size / 1e6 / (cpu - start_cpu):21.2f}"
            )
        print(
            f"\n1 → 2 workers wall speed-up: "
            f"{walls['multi_processing, 1 worker'] / walls['multi_processing, 2 workers']:.2f}x"
        )


if __name__ == "__main__":
    main()
