"""The figures the docs quote from commands, written from the commands' own output:

- README.md's demo table: `bertcorpus demo --force`, run in a temporary folder (the data stages, the data card and
  the tiny model's 300 steps);
- docs/dataflow.md §7's plan of the full corpus: `bertcorpus plan chain` on a listing of full-size inputs (sparse
  files of the sizes an English Wikipedia multistream dump and BooksCorpus have: the plan reads sizes, no data);
- docs/recipes.md's tables of what each recipe costs: `bertcorpus create` with each recipe's flags on the demo's
  corpus (the documents of the demo's two extractions and its vocab; for the ModernBERT-style recipe a vocab of the
  same size padded to a multiple of 64), measured from the outputs: instances, bytes, label shares, padding, and the
  share of packed batches that the loader fills; and docs/command_line.md's `bertcorpus inspect` of a shard of the
  dynamic recipe's output, with the masks of an epoch.

Each goes between its markers, `<!-- begin: NAME ... -->` and `<!-- end: NAME -->`. With --check nothing is written:
the exit status is 1 where a block differs from what the command prints. The plan, the recipes' tables and the
inspected shard are compared whole (made from sizes and the outputs' bytes, which are the same for the same
version); the demo's table by each row's stage, output and counts, not its times (which differ from run to run) nor
the training row's accuracies (which depend on --train-steps), from the output of a run given with --printed.

    .venv/bin/python .ci/docs_figures.py                                   # rewrite every block
    .venv/bin/python .ci/docs_figures.py --check plan                      # tests/test_docs_figures.py
    .venv/bin/python .ci/docs_figures.py --check corpus                    # tests/test_docs_figures.py
    .venv/bin/python .ci/docs_figures.py --check demo --printed RUN.txt    # tests/test_demo.py
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
BERTCORPUS = [sys.executable, "-m", "bertcorpus"]
README, DATAFLOW, RECIPES = ROOT / "README.md", ROOT / "docs" / "dataflow.md", ROOT / "docs" / "recipes.md"
COMMAND_LINE = ROOT / "docs" / "command_line.md"

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


def fenced(body: str) -> str:
    """A command's output as the docs quote it: a code block."""
    return f"```\n{body.rstrip()}\n```"


def replaced(path: Path, name: str, body: str) -> bool:
    """Write `body` (markdown: a code block, a table) between the block's markers; whether it changed."""
    text = path.read_text(encoding="utf-8")
    start, end = block(text, name)
    new = text[:start] + f"{body.rstrip()}\n" + text[end:]
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def quoted(path: Path, name: str) -> str:
    """What stands between a block's markers."""
    text = path.read_text(encoding="utf-8")
    start, end = block(text, name)
    return text[start:end].rstrip()


def quoted_output(path: Path, name: str) -> str:
    """A quoted command output, without its code fence."""
    return quoted(path, name).strip().removeprefix("```").removesuffix("```").strip("\n")


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


def bertcorpus(*words, cwd: Path | None = None) -> str:
    """What a command prints; its error's last lines end the script."""
    done = subprocess.run([*BERTCORPUS, *map(str, words)], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bertcorpus {words[0]} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def demo_output(out: Path) -> str:
    """The whole demo's output, run into `out` (named relative to its folder, as `make demo` names demo-out)."""
    return bertcorpus("demo", "--force", "--output", out.name, cwd=out.parent)


def demo_data(out: Path) -> None:
    """The demo's data stages alone, into `out`: what the recipes' figures are measured on."""
    bertcorpus("demo", "--force", "--skip-train", "--output", out.name, cwd=out.parent)


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


# ---------------------------------------------------------------------------------------------- the recipes

# docs/recipes.md's rows: the disk and labels of each recipe at 128/20, as `create` makes them from the same corpus,
# each into its folder (the dynamic NSP one is the `out` whose shard docs/command_line.md inspects).
COST_RECIPES = (
    ("static NSP, dupe 10 (TFRecord)", "static", ["--dupe-factor", "10"]),
    ("dynamic NSP, dupe 1 (Parquet)", "out", ["--masking", "dynamic"]),
    ("dynamic SOP", "sop", ["--masking", "dynamic", "--pair-objective", "sop"]),
    ("dynamic none", "none", ["--masking", "dynamic", "--pair-objective", "none"]),
)
INSPECTED = ["-n", "1", "--skip", "1", "--epoch", "1"]  # the second instance of the second shard, and its masks
BINNED = ["--masking", "dynamic", "--seq-configs", "128:20,512:80", "--bin-size", "64"]
MODERN_CONFIGS = ((1024, 308), (8192, 2458))
MODERN = [
    *("--masking", "dynamic", "--pair-objective", "none", "--masked-lm-prob", "0.3"),
    *("--seq-configs", ",".join(f"{length}:{predictions}" for length, predictions in MODERN_CONFIGS)),
]
BIN = 64  # the length bins of the padding columns, and the vocab's multiple in the ModernBERT-style recipe


def create(demo: Path, vocab: Path, out: Path, *flags: str) -> dict:
    """create on the demo's documents with `flags`: its manifest."""
    documents = [demo / "wiki" / "documents-*.parquet", demo / "books" / "documents-*.parquet"]
    bertcorpus("create", "--input", *documents, "--vocab", vocab, "--output", out, *flags)
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def shard_bytes(entry: dict, splits=("train", "eval")) -> int:
    return sum(shard["bytes"] for split in splits if split in entry for shard in entry[split]["shards"])


def instances(entry: dict) -> int:
    return sum(entry[split]["instances"] for split in ("train", "eval") if split in entry)


def train_lengths(out: Path, length: int) -> np.ndarray:
    """The real tokens of every train instance of seq{length}, from the Parquet shards."""
    shards = sorted((out / f"seq{length}").glob("train-*.parquet"))
    return np.concatenate([pq.read_table(p, columns=["length"])["length"].to_numpy() for p in shards]).astype(np.int64)


def padding_shares(lengths: np.ndarray, length: int) -> tuple[float, float]:
    """The share of padding in batches padded to L, and in batches padded to the edge of their length bin."""
    edges = np.minimum((lengths - 1) // BIN * BIN + BIN, length)
    return 1 - lengths.sum() / (len(lengths) * length), 1 - lengths.sum() / edges.sum()


def cost_table(demo: Path, work: Path) -> str:
    """Instances, disk and label share of each recipe at 128/20; how much smaller each is than static × 10."""
    rows = []
    for name, folder, flags in COST_RECIPES:
        entry = create(demo, demo / "vocab" / "vocab.txt", work / folder, *flags)["outputs"]["seq128"]
        rows.append((name, instances(entry), shard_bytes(entry), entry["train"].get("label_share")))
    static = rows[0][2]
    lines = [
        "| form | instances | on disk | per instance | smaller in all than static × 10 | label share |",
        "|---|---|---|---|---|---|",
    ]
    for name, count, size, share in rows:
        label = "unused" if share is None else f"{share:.4f}"
        smaller = f"{static / size:.1f}×"
        lines.append(f"| {name} | {count:,} | {size / 1e6:.2f} MB | {size / count:.0f} B | {smaller} | {label} |")
    return "\n".join(lines)


def padding_table(demo: Path, work: Path) -> str:
    """Padding at 128 and 512, dynamic NSP in 64-token bins: batches padded to L, and to their bin's edge."""
    out = work / "binned"
    create(demo, demo / "vocab" / "vocab.txt", out, *BINNED)
    lines = [
        "| L | instances (train) | mean length | padding to L | padding to 64-token bins |",
        "|---|---|---|---|---|",
    ]
    for length in (128, 512):
        lengths = train_lengths(out, length)
        to_length, to_bins = padding_shares(lengths, length)
        lines.append(
            f"| {length} | {len(lengths):,} | {lengths.mean():.1f} | {to_length:.2%} | {to_bins:.2%} "
            f"({to_bins / to_length:.0%} of it) |"
        )
    return "\n".join(lines)


def modern_table(demo: Path, work: Path) -> str:
    """The ModernBERT-style recipe, train split: instances, length, bytes as Parquet and MDS (int64 and compact
    ids), padding, and the share of the token budget that packed batches fill (loader, epoch 0)."""
    from bertcorpus.trainer.loader import PretrainingLoader

    vocab = work / "vocab-64" / "vocab.txt"
    documents = [demo / "wiki" / "documents-*.parquet", demo / "books" / "documents-*.parquet"]
    bertcorpus("vocab", "--input", *documents, "--vocab-size", "8000", "--pad-to-multiple", BIN, "--output", vocab)
    parquet = work / "modern-parquet"
    forms = {
        "parquet": create(demo, vocab, parquet, *MODERN),
        "mds": create(demo, vocab, work / "modern-mds", *MODERN, "--record-format", "mds"),
        "compact": create(
            demo, vocab, work / "modern-compact", *MODERN, "--record-format", "mds", "--mds-ids", "compact"
        ),
    }
    lines = [
        "| config | instances (eval) | mean length | Parquet | MDS | padding to L | padding to 64-token bins "
        "| packed, 64 × L budget: filled |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for length, predictions in MODERN_CONFIGS:
        entries = {form: manifest["outputs"][f"seq{length}"] for form, manifest in forms.items()}
        size = {form: shard_bytes(entry, ("train",)) for form, entry in entries.items()}
        ratios.append((size["mds"] / size["parquet"], size["compact"] / size["parquet"]))
        lengths = train_lengths(parquet, length)
        to_length, to_bins = padding_shares(lengths, length)
        filled = {
            rows: PretrainingLoader(
                parquet, seq_length=length, layout="packed", tokens_per_batch=rows * length, cache_dir=work / "cache"
            ).filled_share()
            for rows in (64, 8)
        }
        lines.append(
            f"| {length:,}:{predictions} | {len(lengths):,} ({entries['parquet']['eval']['instances']:,}) | "
            f"{lengths.mean():,.1f} | {size['parquet'] / 1e6:.2f} MB | {size['mds'] / 1e6:.2f} MB "
            f"({size['compact'] / 1e6:.2f} MB compact) | {to_length:.2%} | {to_bins:.2%} | "
            f"{filled[64]:.2%} ({filled[8]:.2%} at 8 × L) |"
        )
    int64 = min(r for r, _ in ratios), max(r for r, _ in ratios)
    compact = min(c for _, c in ratios), max(c for _, c in ratios)
    lines += [
        "",
        f"MDS holds {_span(int64, '×')} the bytes of zstd Parquet with int64 ids, {_span(compact, '×')} with "
        "`--mds-ids compact`.",
    ]
    return "\n".join(lines)


def _span(values: tuple[float, float], unit: str) -> str:
    low, high = (f"{v:.2f}" for v in values)
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def inspected_shard(work: Path) -> str:
    """`bertcorpus inspect` of the dynamic recipe's second train shard (work/out, which cost_table wrote)."""
    shard = sorted((work / "out" / "seq128").glob("train-*.parquet"))[1].relative_to(work).as_posix()
    return fenced(
        f"$ bertcorpus inspect {shard} {' '.join(INSPECTED)}\n" + bertcorpus("inspect", shard, *INSPECTED, cwd=work)
    )


def corpus_blocks(work: Path) -> dict[tuple[Path, str], str]:
    """The blocks measured on the demo's corpus, from its data stages in work/demo-out: (page, name) → body."""
    demo = work / "demo-out"
    return {
        (RECIPES, "recipe costs"): cost_table(demo, work),
        (COMMAND_LINE, "inspect"): inspected_shard(work),
        (RECIPES, "recipe padding"): padding_table(demo, work),
        (RECIPES, "modernbert recipe"): modern_table(demo, work),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", choices=("plan", "corpus", "demo"), help="compare blocks instead of writing them")
    parser.add_argument("--printed", type=Path, help="with --check demo: the output of a demo run")
    args = parser.parse_args()
    if args.check == "plan":
        if quoted_output(DATAFLOW, "plan") != plan_output():
            raise SystemExit("docs/dataflow.md's plan differs from `bertcorpus plan`'s output: run .ci/docs_figures.py")
        return
    if args.check == "corpus":
        with tempfile.TemporaryDirectory() as work:
            demo_data(Path(work) / "demo-out")
            blocks = corpus_blocks(Path(work))
        differ = [f"{path.name}'s {name}" for (path, name), body in blocks.items() if quoted(path, name) != body]
        if differ:
            raise SystemExit(f"{', '.join(differ)} differ from the commands' outputs: run .ci/docs_figures.py")
        return
    if args.check == "demo":
        printed = demo_table(args.printed.read_text(encoding="utf-8"))
        problems = demo_drift(quoted_output(README, "demo table"), printed)
        if problems:
            raise SystemExit("README.md's demo table differs from the demo's: " + "; ".join(problems))
        return
    with tempfile.TemporaryDirectory() as work:
        blocks = [(DATAFLOW, "plan", fenced(plan_output()))]
        blocks.append((README, "demo table", fenced(demo_table(demo_output(Path(work) / "demo-out")))))
        blocks += [(path, name, body) for (path, name), body in corpus_blocks(Path(work)).items()]
    for path, name, body in blocks:
        print(f"{path.relative_to(ROOT)}: {name} {'rewritten' if replaced(path, name, body) else 'unchanged'}")


if __name__ == "__main__":
    main()
