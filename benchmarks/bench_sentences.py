"""Sentence splitting: boundary quality on the hand-checked gold set and speed on real text, ours against others.

Quality: every file in tests/data/sentences/ holds paragraphs, one gold sentence per line. Each splitter gets the
paragraphs as single lines; a boundary is scored by the number of non-space characters before it, so splitters that
re-space their output are scored fairly. Precision, recall and F1 count boundaries inside paragraphs only (paragraph
ends are given, not found).

Speed: Project Gutenberg books (decode_book + clean_book) and the enwiki sample (clean_wikitext) from the shared data
directory, cut into paragraphs with split_paragraphs; every splitter gets the same paragraphs, and is timed with
time.process_time() over whole passes until --min-mb of text and one CPU-second have gone through. Extraction is
not timed. MB is 10**6 bytes of UTF-8 text, per CPU-second of one core.

Splitters: this project's transforms.sentences, a naive regex (a full stop, ! or ? then whitespace then a capital),
and, when importable, pysbd, blingfire and spaCy's rule-based sentencizer. Those are benchmark-only: install them in
a separate virtual environment and pass its site-packages with --site-packages; it is appended to sys.path, so the
project's own packages keep precedence. Run from the repository root:
    python3.11 -m venv /tmp/sent-venv && /tmp/sent-venv/bin/pip install pysbd blingfire spacy
    .venv/bin/python benchmarks/bench_sentences.py --site-packages /tmp/sent-venv/lib/python3.11/site-packages
"""

from __future__ import annotations

import argparse
import bz2
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import DecodedBook, decode_book
from bertcorpus.transforms.sentences import split_paragraphs, split_sentences
from bertcorpus.transforms.wiki_page_items import Page
from bertcorpus.transforms.wiki_pages import iter_pages
from bertcorpus.transforms.wikitext import clean_wikitext

GOLD = REPO / "tests" / "data" / "sentences"
# Distinct books only: the cp1252 copies of 84, 1342 and 2701 repeat the UTF-8 ones.
BOOK_FILES = (
    "gutenberg_utf8/*.txt",
    "gutenberg_cp1252_with_header/pg2641.txt",
    "gutenberg_cp1252_with_header/pg37106.txt",
    "gutenberg_cp1252_with_header/pg64317.txt",
    "pg19_format/*.txt",
)
WIKI_DUMP = "wiki/enwiki-2014-sample-truncated.xml.bz2"

Splitter = Callable[[str], list[str]]
_NAIVE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def naive_split(paragraph: str) -> list[str]:
    return _NAIVE.split(paragraph)


def optional_splitters() -> dict[str, Splitter]:
    """The comparison splitters that are installed, each as a paragraph → sentences function."""
    found: dict[str, Splitter] = {}
    try:
        import pysbd

        segmenter = pysbd.Segmenter(language="en", clean=False)
        found["pysbd"] = segmenter.segment
    except ImportError:
        pass
    try:
        import blingfire

        found["blingfire"] = lambda p: blingfire.text_to_sentences(p).split("\n")
    except ImportError:
        pass
    try:
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        found["spacy sentencizer"] = lambda p: [s.text for s in nlp(p).sents]
    except ImportError:
        pass
    return found


def read_gold(path: Path) -> list[list[str]]:
    """Paragraphs of a gold file, each a list of sentences."""
    return [block.split("\n") for block in path.read_text(encoding="utf-8").strip().split("\n\n")]


def boundary_keys(sentences: list[str]) -> set[int]:
    """Boundaries inside a paragraph as counts of non-space characters before them."""
    keys, count = set(), 0
    for sentence in sentences[:-1]:
        count += len("".join(sentence.split()))
        keys.add(count)
    keys.discard(0)
    return keys


def score(paragraphs: list[list[str]], split: Splitter) -> tuple[int, int, int]:
    """True positive, false positive and false negative boundary counts."""
    tp = fp = fn = 0
    for gold in paragraphs:
        expected = boundary_keys(gold)
        found = boundary_keys([s for s in split(" ".join(gold)) if s.strip()])
        tp += len(expected & found)
        fp += len(found - expected)
        fn += len(expected - found)
    return tp, fp, fn


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def real_paragraphs(data: Path) -> list[str]:
    """Paragraphs of the cleaned books and wiki articles under the shared data directory."""
    texts = []
    for pattern in BOOK_FILES:
        for path in sorted((data / "books").glob(pattern)):
            decoded = decode_book(path.read_bytes())
            if isinstance(decoded, DecodedBook):
                texts.append(clean_book(decoded.text).text)
    with bz2.open(data / WIKI_DUMP) as stream:
        for page in iter_pages(stream):
            if isinstance(page, Page) and page.ns == 0 and not page.redirect and page.text:
                texts.append(clean_wikitext(page.text, title=page.title))
    return [p for text in texts for p in split_paragraphs(text)]


def speed(paragraphs: list[str], split: Splitter, min_bytes: int) -> float:
    """MB per CPU-second over whole passes of the paragraphs, until min_bytes and at least one CPU-second."""
    size = sum(len(p.encode("utf-8")) for p in paragraphs)
    done, cpu = 0, 0.0
    while done < min_bytes or cpu < 1.0:
        t0 = time.process_time()
        for p in paragraphs:
            split(p)
        cpu += time.process_time() - t0
        done += size
    return done / 1e6 / cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data", help="shared real-data directory")
    ap.add_argument("--min-mb", type=float, default=5.0, help="text each splitter is timed on (whole passes)")
    ap.add_argument("--site-packages", action="append", default=[], help="where comparison splitters are installed")
    args = ap.parse_args(argv)
    sys.path.extend(args.site_packages)

    splitters: dict[str, Splitter] = {"bertcorpus": split_sentences, "naive regex": naive_split}
    splitters.update(optional_splitters())
    gold = {path.stem: read_gold(path) for path in sorted(GOLD.glob("*.txt"))}
    paragraphs = real_paragraphs(args.data)
    mb = sum(len(p.encode("utf-8")) for p in paragraphs) / 1e6
    sentences = sum(len(p) for ps in gold.values() for p in ps)
    print(
        f"gold: {sentences} sentences in {sum(map(len, gold.values()))} paragraphs; "
        f"speed text: {mb:.1f} MB in {len(paragraphs)} paragraphs, timed on >= {args.min_mb:g} MB\n"
    )

    header = ["splitter", *(f"F1 {name}" for name in gold), "P", "R", "F1", "MB/CPU-s"]
    rows = []
    for name, split in splitters.items():
        counts = {stem: score(ps, split) for stem, ps in gold.items()}
        total = [sum(c[i] for c in counts.values()) for i in range(3)]
        p, r, f = prf(*total)
        rate = speed(paragraphs, split, int(args.min_mb * 1e6))
        rows.append(
            [name, *(f"{prf(*c)[2]:.3f}" for c in counts.values()), f"{p:.3f}", f"{r:.3f}", f"{f:.3f}", f"{rate:.2f}"]
        )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print(" | ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
