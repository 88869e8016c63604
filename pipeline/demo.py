"""`bertcorpus demo`: the chain on the real samples bundled in the repository, with a closing summary table."""
from __future__ import annotations

import json
import time
from pathlib import Path

ACCEPTS_BEAM_OPTIONS = True
ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def add_arguments(parser) -> None:
    parser.add_argument("--output", default="demo-out", help="where every stage writes (default: demo-out)")


def _stage(rows: list, name: str, argv: list, outputs: str, describe) -> None:
    from pipeline import cli

    print(f"\n=== {name}: bertcorpus {' '.join(map(str, argv))}")
    started = time.time()
    code = cli.main([str(a) for a in argv])
    if code != 0:
        raise SystemExit(f"demo stage {name!r} failed with exit status {code}")
    rows.append((name, describe(), f"{time.time() - started:.1f} s", outputs))


def _books_as_jsonl(path: Path) -> Path:
    """The bundled novels as JSONL documents, one per chapter-sized run of paragraphs (~8 KB)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for book in sorted((DATA / "create").glob("*.txt")):
            paragraphs = book.read_text(encoding="utf-8").split("\n\n")
            part: list[str] = []
            for paragraph in paragraphs + [None]:
                if paragraph is not None:
                    part.append(paragraph)
                if part and (paragraph is None or sum(map(len, part)) >= 8000):
                    f.write(json.dumps({"id": f"{book.stem}:{f.tell()}", "text": "\n\n".join(part)}) + "\n")
                    part = []
    return path


def run(args, beam_args: list[str]) -> int:
    from pipeline import cli

    out = Path(args.output)
    vocab = DATA / "reference" / "bert-base-uncased-vocab.txt"
    rows: list[tuple[str, str, str, str]] = []
    records = out / "records"

    def describe_records() -> str:
        m = json.loads((records / "manifest.json").read_text())
        parts = [f"{m['documents']['kept']} docs"]
        for name, o in m["outputs"].items():
            parts.append(f"{name}: {o['train']['instances']:,} train + {o.get('eval', {}).get('instances', 0):,} eval")
        return ", ".join(parts)

    books = _books_as_jsonl(out / "input" / "books.jsonl")
    _stage(rows, "create", ["create", "--input", books, DATA / "reference" / "sample_text.txt", "--vocab", vocab,
                            "--output", records, "--seq-configs", "128:20,512:80", "--dupe-factor", "5",
                            "--eval-fraction", "0.2", "--overwrite", *beam_args],
           f"{records}/seq128, {records}/seq512", describe_records)

    first = sorted((records / "seq128").glob("train-*.tfrecord"))[0]
    print(f"\n=== one decoded example from {first}")
    cli.main(["inspect", str(first), "--vocab", str(vocab), "-n", "1"])

    width = [max(len(r[i]) for r in rows + [("stage", "counts", "time", "output")]) for i in range(4)]
    print("\nbertcorpus demo summary")
    for row in [("stage", "counts", "time", "output")] + rows:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, width)))
    return 0
