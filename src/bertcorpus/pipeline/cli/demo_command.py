"""`bertcorpus demo`: the whole chain on the real samples shipped with bertcorpus, then a summary table.

extract-wiki and extract-books → vocab (small) → create at 128/20 and 512/80 from one tokenisation pass →
stats (data card, with the samples' licences and provenance) → a short tiny-model training run with the trainer's
defaults, long enough for its masked-LM accuracy to beat always predicting the most frequent token. Where the
`train` extra (TensorFlow, Keras) is not installed, the demo says so and skips training.

The samples are package data (demo-samples/ beside this module: Wikipedia exports and Project Gutenberg books,
with the DATA.md files that give their sources and licences), so an installed bertcorpus runs the demo anywhere.
The stages' command lines are written here only: .ci/chain_digests.py runs this demo to digest its outputs.

Run again, the demo keeps every stage whose output is up to date (the jobs' --reuse: the same inputs, config and
version as its manifest records), and the data card and the training run when nothing before them ran; --force
runs everything again.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import time
from pathlib import Path

ACCEPTS_BEAM_OPTIONS = True
# The demo's paths are local: the options that suit it are the local runner's.
BEAM_OPTIONS_EPILOG = (
    "Beam pipeline options for the local runner may follow, e.g. --direct_running_mode "
    "multi_processing --direct_num_workers 2."
)
DATA = Path(__file__).parent / "demo-samples"
SOURCE_INFO = DATA / "sources.yaml"
TABLE_WIDTH = 100  # columns the summary table fits in
# Flags every data stage is given, which say how the demo reruns, not what a stage makes: its lines leave them out.
RERUN_FLAGS = ("--overwrite", "--reuse")


def add_arguments(parser) -> None:
    parser.add_argument(
        "--zh",
        action="store_true",
        help="the Chinese chain instead: a zhwiki article and a Chinese Project Gutenberg book, each in both scripts "
        "(--zh-variant both), bert-base-chinese's vocab layout, whole-word masks over jieba's words; needs pip "
        "install 'bertcorpus[zh]' (default: the English chain)",
    )
    parser.add_argument(
        "--output", default=None, help="where every stage writes (default: demo-out, demo-zh-out with --zh)"
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=None,
        help="the demo vocab's size (default: 8000; 21128, bert-base-chinese's, with --zh)",
    )
    parser.add_argument("--train-steps", type=int, default=300, help="tiny-model training steps (default: 300)")
    parser.add_argument("--skip-train", action="store_true", help="stop after the data card (default: off)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="run every stage, also those whose output is up to date (default: off: they are kept)",
    )


def _manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def _documents_counts(path: Path) -> str:
    docs = _manifest(path)["documents"]
    skipped = sum(docs["skipped"].values()) if isinstance(docs["skipped"], dict) else docs["skipped"]
    return f"read {docs['read']}, kept {docs['kept']}, skipped {skipped}, errors {docs['errors']}"


def _records_counts(path: Path) -> str:
    outputs = _manifest(path)["outputs"]
    return "; ".join(
        f"{name}: {o['train']['instances']:,} train + {o.get('eval', {}).get('instances', 0):,} eval"
        for name, o in outputs.items()
    )


def _eval_counts(path: Path) -> str:
    """The eval accuracies, each next to what always predicting the most frequent answer scores on the same data."""
    results = json.loads((path / "eval_results.json").read_text())
    return (
        f"masked_lm_accuracy {results['masked_lm_accuracy']:.3f} "
        f"(most frequent token {results['masked_lm_baseline_accuracy']:.3f}), "
        f"next_sentence_accuracy {results['next_sentence_accuracy']:.3f} "
        f"(chance {results['next_sentence_baseline_accuracy']:.3f})"
    )


def _stamp(path: Path) -> tuple[int, int] | None:
    """What tells a rewritten file from the same one: a job writes its manifest anew (a new inode), last."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


def _shown(path: Path, root: Path | None = None) -> str:
    """A path as the summary shows it: relative to `root` (else to the working directory) when inside it; a folder
    ends with /."""
    relative = os.path.relpath(path, root)
    shown = path.as_posix() if relative.startswith("..") else Path(relative).as_posix()
    return shown + "/" * path.is_dir()


def _train_kept(train: Path, steps: int, vocab_size: int) -> bool:
    """Whether a finished training run of these settings is in `train`."""
    try:
        settings = json.loads((train / "config.json").read_text())["train"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    finished = (train / "eval_results.json").is_file()
    return finished and (settings.get("steps"), settings.get("vocab_size")) == (steps, vocab_size)


def summary_table(rows: list[tuple[str, str, str, str]], width: int = TABLE_WIDTH) -> list[str]:
    """The table's lines, at most `width` columns: stage, time and output in columns, the counts after them, wrapped
    onto lines of their own where they are long."""
    header = ("stage", "time", "output", "counts")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    indent = 2 + sum(widths) + 2 * 3
    lines = []
    for row in [header, *rows]:
        lead = "  " + "  ".join(
            cell.rjust(w) if i == 1 else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))
        )
        counts = textwrap.wrap(row[3], max(width - indent, 40), break_on_hyphens=False) or [""]
        lines.append(f"{lead}  {counts[0]}".rstrip())
        lines += [" " * indent + more for more in counts[1:]]
    return lines


def data_stages(out: Path, vocab_size: int, chinese: bool = False) -> list[tuple[str, list, Path]]:
    """The data stages in order, each (name, its command line without RERUN_FLAGS and Beam options, its output)."""
    if chinese:
        return chinese_stages(out, vocab_size)
    wiki, books = out / "wiki", out / "books"
    dumps = [DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2", DATA / "wiki" / "enwiki-table-markup.xml.bz2"]
    return [
        ("extract-wiki", ["extract-wiki", "--input", *dumps, "--output", wiki], wiki),
        ("extract-books", ["extract-books", "--input", DATA / "books", "--output", books], books),
        *vocab_and_records(
            out, vocab_size, ["--seq-configs", "128:20,512:80", "--dupe-factor", "5", "--eval-fraction", "0.05"]
        ),
    ]


def chinese_stages(out: Path, vocab_size: int) -> list[tuple[str, list, Path]]:
    """The Chinese chain: the zhwiki sample and the Chinese book in both scripts, the vocab in bert-base-chinese's
    layout, records whose whole-word masks fall on jieba's words."""
    zh = DATA / "zh"
    wiki, books = out / "wiki", out / "books"
    both = ["--zh-variant", "both"]
    return [
        (
            "extract-wiki",
            # labelled as sources.yaml describes it ("wikipedia" is the English sample there)
            [
                "extract-wiki",
                "--input",
                zh / "zhwiki-quantum-mechanics.xml.bz2",
                "--output",
                wiki,
                "--source",
                "zhwiki",
                *both,
            ],
            wiki,
        ),
        ("extract-books", ["extract-books", "--input", zh, "--output", books, "--source", "zhbooks", *both], books),
        *vocab_and_records(out, vocab_size, ["--seq-configs", "128:20", "--dupe-factor", "5", "--whole-word-mask"]),
    ]


def vocab_and_records(out: Path, vocab_size: int, create_flags: list) -> list[tuple[str, list, Path]]:
    """The vocab of out/wiki's and out/books's documents, then create's records from them with `create_flags`."""
    # The vocab in a folder of its own: the card's lineage reads wiki, books → vocab → records.
    vocab, records = out / "vocab" / "vocab.txt", out / "records"
    documents = [out / "wiki" / "documents-*.parquet", out / "books" / "documents-*.parquet"]
    return [
        ("vocab", ["vocab", "--input", *documents, "--vocab-size", vocab_size, "--output", vocab], vocab.parent),
        ("create", ["create", "--input", *documents, "--vocab", vocab, "--output", records, *create_flags], records),
    ]


def _stage_counts(name: str, output: Path) -> str:
    if name == "vocab":
        return f"{sum(1 for _ in open(output / 'vocab.txt', encoding='utf-8')):,} tokens"
    return _records_counts(output) if name == "create" else _documents_counts(output)


def table_notes(out: Path, trained: bool) -> list[str]:
    """What a reader might take for a failure in the table, and why it is not one."""
    notes = []
    wiki = _manifest(out / "wiki")
    markup = wiki.get("converter_markup")
    if markup:
        notes.append(
            f"extract-wiki: the article's {markup.get('blocks', 0):,} converter blocks and "
            f"{markup.get('page_rules', 0):,} page rules were resolved, and each document written in both scripts "
            "(zh-Hans and zh-Hant); none of the markup is left in the text"
        )
    errors = wiki["documents"]["errors_by_reason"]
    if errors == {"truncated": 1}:
        notes.append(
            "extract-wiki: the one error is expected: the 2014 sample export was cut short after its last page "
            "(it has no closing </mediawiki>), and the truncation is reported once, in wiki/errors-*.jsonl"
        )
    if trained:
        results = json.loads((out / "train" / "eval_results.json").read_text())
        if abs(results["next_sentence_accuracy"] - results["next_sentence_baseline_accuracy"]) < 0.05:
            notes.append(
                "train: next-sentence accuracy at chance is expected after so few steps of a tiny model; the "
                "masked-LM accuracy above the most frequent token's shows that it learns"
            )
    return notes


def _command_line(words: list) -> str:
    """A stage's command as its line shows it: paths named as _shown names them, the rerun flags left out."""
    return " ".join(_shown(Path(w)) if isinstance(w, Path) else str(w) for w in words if w not in RERUN_FLAGS)


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli import commands, train_command
    from bertcorpus.trainer.config import backend_extra

    if args.zh:
        from bertcorpus.transforms.word_segmentation import SegmenterSpec, check_segmenter
        from bertcorpus.transforms.zh_variants import check_converter

        check_converter()
        check_segmenter(SegmenterSpec())
    out = Path(args.output or ("demo-zh-out" if args.zh else "demo-out")).resolve()
    args.vocab_size = args.vocab_size or (21128 if args.zh else 8000)
    records, train = out / "records", out / "train"
    rows: list[tuple[str, str, str, str]] = []
    reuse = [] if args.force else ["--reuse"]
    kept: list[bool] = []  # of each data stage: its output was up to date, and kept

    def stage(name: str, argv: list, output: Path, counts, manifest: Path | None = None) -> None:
        print(f"\n=== {name}: bertcorpus {_command_line(argv)}", flush=True)
        started, before = time.time(), manifest and _stamp(manifest)
        code = commands.main([str(a) for a in argv])
        if code > 128:  # stopped by a signal: the stage said so in its one line
            raise SystemExit(code)
        if code != 0:
            raise SystemExit(f"demo stage {name!r} failed with exit status {code}")
        if manifest is not None:
            kept.append(before is not None and _stamp(manifest) == before)
        seconds = "kept" if manifest is not None and kept[-1] else f"{time.time() - started:.1f} s"
        rows.append((name, seconds, _shown(output, out), counts()))

    def unchanged(name: str, output: Path, counts) -> None:
        print(f"\n=== {name}: kept: no stage before it ran again (--force reruns it)", flush=True)
        rows.append((name, "kept", _shown(output, out), counts()))

    for name, words, output in data_stages(out, args.vocab_size, args.zh):
        if name == "vocab":  # the vocab counts in this process (no Beam options) and writes into its own folder
            output.mkdir(parents=True, exist_ok=True)
        options = [] if name == "vocab" else beam_args
        stage(
            name,
            [*words, "--overwrite", *reuse, *options],
            output,
            lambda name=name, output=output: _stage_counts(name, output),
            output / "manifest.json",
        )
    card = out / "report.html"
    if all(kept) and (out / "stats.json").is_file() and card.is_file():
        unchanged("stats", card, lambda: "stats.json, report.html, README.md")
    else:
        stage("stats", ["stats", out, "--source-info", SOURCE_INFO], card, lambda: "stats.json, report.html, README.md")
    missing = None if args.skip_train else train_command.trainer_missing()
    if missing:
        print(f"\n=== train: skipped: {missing}", flush=True)
        rows.append(("train", "", "", f"skipped: {backend_extra('tensorflow')} to train"))
    elif not args.skip_train and all(kept) and _train_kept(train, args.train_steps, args.vocab_size):
        unchanged("train", train, lambda: _eval_counts(train))
    elif not args.skip_train:
        # A training run resumes from its last checkpoint: one of other records or settings would be resumed
        # instead of trained afresh.
        shutil.rmtree(train, ignore_errors=True)
        stage(
            "train",
            [
                "train",
                "--data",
                records,
                "--seq-length",
                "128",
                "--config",
                "tiny",
                "--vocab-size",
                args.vocab_size,
                "--batch-size",
                "32",
                "--steps",
                args.train_steps,
                "--output",
                train,
            ],
            train,
            lambda: _eval_counts(train),
        )

    print(f"\nbertcorpus demo summary (outputs in {_shown(out)})")
    for line in summary_table(rows):
        print(line)
    trained = (train / "eval_results.json").is_file() and any(row[0] == "train" and row[2] for row in rows)
    for note in table_notes(out, trained):
        print(textwrap.fill(note, TABLE_WIDTH, initial_indent="note: ", subsequent_indent="      "))
    print(f"\ndata card: {_shown(card)}")
    return 0
