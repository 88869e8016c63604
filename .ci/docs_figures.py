"""The figures the docs quote from commands, written from the commands' own output:

- README.md's demo table: `bertcorpus demo --force`, run in a temporary folder (the data stages, the data card and
  the tiny model's 300 steps);
- docs/dataflow.md §7's plan of the full corpus: `bertcorpus plan chain` on a listing of full-size inputs (sparse
  files of the sizes an English Wikipedia multistream dump and BooksCorpus have: the plan reads sizes, no data).

Each goes between its markers, `<!-- begin: NAME ... -->` and `<!-- end: NAME -->`. With --check nothing is written:
the exit status is 1 where a block differs from what the command prints. The plan is compared whole (it is made from
sizes alone); the demo's table by each row's stage, output and counts, not its times (which differ from run to run)
nor the training row's accuracies (which depend on --train-steps), from the output of a run given with --printed.

    .venv/bin/python .ci/docs_figures.py                                   # rewrite both blocks
    .venv/bin/python .ci/docs_figures.py --check plan                      # tests/test_docs_figures.py
    .venv/bin/python .ci/docs_figures.py --check demo --printed RUN.txt    # tests/test_demo.py
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BERTCORPUS = [sys.executable, "-m", "bertcorpus"]
README, DATAFLOW = ROOT / "README.md", ROOT / "docs" / "dataflow.md"

# The full corpus of docs/dataflow.md §7: the English Wikipedia multistream dump and its index as Wikimedia
# publishes them (≈ 22 GB of bz2), and BooksCorpus as ≈ 11,000 books holding ≈ 4.5 GB of text.
WIKI_DUMP = ("enwiki-latest-pages-articles-multistream.xml.bz2", 22_000_000_000)
WIKI_INDEX = ("enwiki-latest-pages-articles-multistream-index.txt.bz2", 250_000_000)
BOOKS, BOOK_BYTES = 11_000, 409_091
PLAN_FLAGS = [
    "--dedup",
    "--seq-configs",
    "128:20,512:80",
    "--dupe-factor",
    "10",
    "--runner",
    "DataflowRunner",
    "--machine_type",
    "n2-standard-8",
    "--max_num_workers",
    "64",
]


def block(text: str, name: str) -> tuple[int, int]:
    """Where the text between a block's markers starts and ends."""
    begin = re.search(rf"<!-- begin: {re.escape(name)}\b.*?-->\n", text)
    end = text.find(f"<!-- end: {name} -->")
    if begin is None or end < begin.end():
        raise SystemExit(f"no block {name!r} between markers")
    return begin.end(), end


def replaced(path: Path, name: str, body: str) -> bool:
    """Write `body` (a code block) between the block's markers; whether it changed."""
    text = path.read_text(encoding="utf-8")
    start, end = block(text, name)
    new = text[:start] + f"```\n{body.rstrip()}\n```\n" + text[end:]
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def quoted(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = block(text, name)
    return text[start:end].strip().removeprefix("```").removesuffix("```").strip("\n")


# ---------------------------------------------------------------------------------------------- the plan


def full_corpus(folder: Path) -> None:
    """Sparse files of the full corpus's sizes: they list as the real ones do and take no disk."""
    for name, size in (WIKI_DUMP, WIKI_INDEX):
        with open(folder / name, "wb") as f:
            f.truncate(size)
    books = folder / "bookcorpus"
    books.mkdir(exist_ok=True)
    for i in range(BOOKS):
        with open(books / f"book-{i:05d}.txt", "wb") as f:
            f.truncate(BOOK_BYTES)


def plan_output() -> str:
    with tempfile.TemporaryDirectory() as work:
        full_corpus(Path(work))
        words = ["plan", "chain", "--wiki", WIKI_DUMP[0], "--wiki-index", WIKI_INDEX[0], "--books", "bookcorpus"]
        done = subprocess.run([*BERTCORPUS, *words, *PLAN_FLAGS], cwd=work, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bertcorpus plan failed:\n{done.stderr[-2000:]}")
    command = "bertcorpus " + " ".join([*words, *PLAN_FLAGS])
    return f"$ {command}\n{done.stdout.rstrip()}"


# ---------------------------------------------------------------------------------------------- the demo


def demo_output() -> str:
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [*BERTCORPUS, "demo", "--force", "--output", "demo-out"], cwd=work, capture_output=True, text=True
        )
    if done.returncode:
        raise SystemExit(f"bertcorpus demo failed:\n{done.stderr[-2000:]}")
    return done.stdout


def demo_table(printed: str) -> str:
    """The summary table and its notes, from the demo's output."""
    table = printed[printed.index("bertcorpus demo summary") :]
    return table[: table.index("\ndata card:")].rstrip()


def table_rows(table: str) -> dict[str, tuple[str, str]]:
    """stage → (output, counts) of the demo's table: its columns found from the header, a row's continuation lines
    joined to its counts, the times left out."""
    lines = table.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("stage") and "counts" in line)
    output_at, counts_at = header.index("output"), header.index("counts")
    rows: dict[str, list[str]] = {}
    stage = None
    for line in lines[lines.index(header) + 1 :]:
        if not line.startswith("  ") or line.lstrip().startswith("note:"):
            stage = None
            continue
        if line[2] != " ":
            stage = line[2:].split()[0]
            rows[stage] = [line[output_at:counts_at].strip(), line[counts_at:].strip()]
        elif stage is not None:
            rows[stage][1] += " " + line.strip()
    return {name: (output, counts) for name, (output, counts) in rows.items()}


def demo_drift(quoted_table: str, printed_table: str) -> list[str]:
    """The rows whose output or counts differ; the training row by its output only."""
    quoted_rows, printed_rows = table_rows(quoted_table), table_rows(printed_table)
    problems = [f"stages {list(quoted_rows)} quoted, {list(printed_rows)} printed"] * (
        list(quoted_rows) != list(printed_rows)
    )
    for stage, (output, counts) in printed_rows.items():
        if stage not in quoted_rows:
            continue
        quoted_output, quoted_counts = quoted_rows[stage]
        if output != quoted_output or (stage != "train" and counts != quoted_counts):
            problems.append(f"{stage}: quoted {quoted_output} {quoted_counts!r}, printed {output} {counts!r}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", choices=("plan", "demo"), help="compare a block instead of writing both")
    parser.add_argument("--printed", type=Path, help="with --check demo: the output of a demo run")
    args = parser.parse_args()
    if args.check == "plan":
        if quoted(DATAFLOW, "plan") != plan_output():
            raise SystemExit("docs/dataflow.md's plan differs from `bertcorpus plan`'s output: run .ci/docs_figures.py")
        return
    if args.check == "demo":
        printed = demo_table(args.printed.read_text(encoding="utf-8"))
        problems = demo_drift(quoted(README, "demo table"), printed)
        if problems:
            raise SystemExit("README.md's demo table differs from the demo's: " + "; ".join(problems))
        return
    for path, name, body in ((DATAFLOW, "plan", plan_output()), (README, "demo table", demo_table(demo_output()))):
        print(f"{path.relative_to(ROOT)}: {name} {'rewritten' if replaced(path, name, body) else 'unchanged'}")


if __name__ == "__main__":
    main()
