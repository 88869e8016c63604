"""`bertcorpus demo`: the whole chain on the real samples bundled in the repository, then a summary table.

extract-wiki and extract-books → vocab (small) → create at 128/20 and 512/80 from one tokenisation pass →
stats (data card) → a short tiny-model training run with the trainer's defaults, long enough for its masked-LM
accuracy to beat always predicting the most frequent token. Where the `train` extra (TensorFlow, Keras) is not
installed, the demo says so and skips training.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

ACCEPTS_BEAM_OPTIONS = True
# The demo's paths are local: the options that suit it are the local runner's.
BEAM_OPTIONS_EPILOG = (
    "Beam pipeline options for the local runner may follow, e.g. --direct_running_mode "
    "multi_processing --direct_num_workers 2."
)
ROOT = Path(__file__).resolve().parents[2]  # the repository: pipeline/cli/demo.py
DATA = ROOT / "tests" / "data"


def add_arguments(parser) -> None:
    parser.add_argument("--output", default="demo-out", help="where every stage writes (default: demo-out)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="the demo vocab's size (default: 8000)")
    parser.add_argument("--train-steps", type=int, default=300, help="tiny-model training steps (default: 300)")
    parser.add_argument("--skip-train", action="store_true", help="stop after the data card")


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


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli import commands, train_command
    from bertcorpus.trainer.config import backend_extra

    out = Path(args.output).resolve()
    wiki, books, vocab, records, train = (
        out / "wiki",
        out / "books",
        out / "vocab.txt",
        out / "records",
        out / "train",
    )
    rows: list[tuple[str, str, str, str]] = []

    def stage(name: str, argv: list, output: Path, counts) -> None:
        words = [str(a) for a in argv]
        print(f"\n=== {name}: bertcorpus {' '.join(words)}", flush=True)
        started = time.time()
        code = commands.main(words)
        if code > 128:  # stopped by a signal: the stage said so in its one line
            raise SystemExit(code)
        if code != 0:
            raise SystemExit(f"demo stage {name!r} failed with exit status {code}")
        rows.append((name, counts(), f"{time.time() - started:.1f} s", str(output)))

    stage(
        "extract-wiki",
        [
            "extract-wiki",
            "--input",
            DATA / "wiki" / "enwiki-2014-sample-truncated.xml.bz2",
            DATA / "wiki" / "enwiki-table-markup.xml.bz2",
            "--output",
            wiki,
            "--overwrite",
            *beam_args,
        ],
        wiki,
        lambda: _documents_counts(wiki),
    )
    stage(
        "extract-books",
        ["extract-books", "--input", DATA / "books", "--output", books, "--overwrite", *beam_args],
        books,
        lambda: _documents_counts(books),
    )
    documents = [wiki / "documents-*.parquet", books / "documents-*.parquet"]
    stage(
        "vocab",
        ["vocab", "--input", *documents, "--vocab-size", args.vocab_size, "--output", vocab, "--overwrite"],
        vocab,
        lambda: f"{sum(1 for _ in open(vocab, encoding='utf-8')):,} tokens",
    )
    stage(
        "create",
        [
            "create",
            "--input",
            *documents,
            "--vocab",
            vocab,
            "--output",
            records,
            "--seq-configs",
            "128:20,512:80",
            "--dupe-factor",
            "5",
            "--eval-fraction",
            "0.05",
            "--overwrite",
            *beam_args,
        ],
        records,
        lambda: _records_counts(records),
    )
    stage("stats", ["stats", out], out / "report.html", lambda: "stats.json, report.html")
    missing = None if args.skip_train else train_command.trainer_missing()
    if missing:
        print(f"\n=== train: skipped: {missing}", flush=True)
        rows.append(("train", f"skipped: {backend_extra('tensorflow')} to train", "", ""))
    if not args.skip_train and not missing:
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

    header = ("stage", "counts", "time", "output")
    width = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    print("\nbertcorpus demo summary")
    for row in [header] + rows:
        print(("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, width))).rstrip())
    print(f"\ndata card: {out / 'report.html'}")
    return 0
