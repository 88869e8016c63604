"""extract-books' transforms one at a time, each in a TestPipeline with assert_that, on the real book samples:
listing, metadata, reading, decoding, cleaning and the de-duplication transform. The whole command is tested in
test_extract_books.py."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.extract.book_files import book_id
from bertcorpus.pipeline.extract.books_job import (
    Book,
    BooksConfig,
    CleanBooks,
    DecodeBooks,
    DropDuplicates,
    ListBookFiles,
    ReadBooks,
    ReadMetadata,
)
from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import decode_book
from bertcorpus.transforms.book_duplicates import dedup_key, minhash_signature
from bertcorpus.transforms.language_id import detect_language_lightly

from conftest import DATA

BOOKS = DATA / "books"
ALICE = BOOKS / "gutenberg_utf8" / "11-0.txt"
FRANKENSTEIN = BOOKS / "gutenberg_utf8" / "84-0.txt"
FRANKENSTEIN_PG = BOOKS / "gutenberg_cp1252_with_header" / "pg84.txt"
PG19 = BOOKS / "pg19_format"
METADATA = PG19 / "metadata.csv"
MIB = 2**20


def local_pipeline() -> test_pipeline.TestPipeline:
    return test_pipeline.TestPipeline(runner="DirectRunner")


def summed(counts):
    """The tally dicts of a transform, summed into one dict without the zero entries."""
    return counts | beam.CombineGlobally(tally.SumCounts()) | beam.Map(lambda c: {k: v for k, v in c.items() if v})


def book(path: Path, stem: str | None = None) -> Book:
    """The Book CleanBooks makes of a file, built here from the pure functions: its title the PG header's, else
    its file's name, and its language that of lingua's light detector."""
    cleaned = clean_book(decode_book(path.read_bytes()).text)
    text = cleaned.text
    name = str(path.with_name(stem)) if stem else str(path)
    language = detect_language_lightly(text, 0.5)
    document = {
        "id": book_id(name),
        "source": "books",
        "title": cleaned.title or book_id(name).split(":", 1)[1],
        "text": text,
        "url": None,
        "language": language.language,
        "language_confidence": language.confidence,
    }
    return Book(name, document, dedup_key(text), minhash_signature(text))


def source_of(path: Path) -> dict:
    data = path.read_bytes()
    return {"path": str(path), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# ---------------------------------------------------------------------------------------------- listing and reading


def test_list_book_files_sends_metadata_aside():
    expected = sorted((str(p), p.stat().st_size) for p in BOOKS.glob("*/*.txt"))
    with local_pipeline() as p:
        listed = p | beam.Create([str(BOOKS)]) | beam.ParDo(ListBookFiles()).with_outputs("metadata", main="books")
        assert_that(listed.books, equal_to(expected), label="books")
        assert_that(listed.metadata, equal_to([str(METADATA)]), label="metadata")


def test_read_metadata_reads_named_files_and_passes_over_missing_guesses():
    with local_pipeline() as p:
        tables = (
            p
            | beam.Create([(str(METADATA), True), (str(PG19 / "missing" / "metadata.csv"), False)])
            | beam.ParDo(ReadMetadata())
            | beam.Map(lambda entry: (entry[0], entry[1][0], entry[1][1]["12204"]))
        )
        assert_that(
            tables,
            equal_to(
                [
                    (
                        str(METADATA),
                        True,
                        ("Odd Craft Part 4: Bill's Lapse by W.W. Jacobs", "http://www.gutenberg.org/ebooks/12204"),
                    )
                ]
            ),
        )


def test_read_books_gives_bytes_or_a_dead_letter(tmp_path):
    cut = tmp_path / "cut.txt.gz"
    cut.write_bytes(gzip.compress(ALICE.read_bytes())[:5000])
    large = tmp_path / "large.txt"
    large.write_bytes(b"word " * (MIB // 5 + 1))
    files = [(str(ALICE), ALICE.stat().st_size), (str(cut), 5000), (str(large), large.stat().st_size)]
    with local_pipeline() as p:
        read = (
            p
            | beam.Create(files)
            | beam.ParDo(ReadBooks(MIB)).with_outputs("errors", "inputs", tally.TALLY, main="books")
        )
        assert_that(read.books, equal_to([(source_of(ALICE), ALICE.read_bytes())]), label="books")
        assert_that(
            read.errors | beam.Map(lambda e: (Path(e["input"]).name, e["where"], e["reason"])),
            equal_to([("cut.txt.gz", "file", "read_error"), ("large.txt", "file", "too_large")]),
            label="errors",
        )
        assert_that(
            read.inputs | beam.Map(lambda i: (Path(i["path"]).name, i["rejected"])),
            equal_to([("cut.txt.gz", "read_error"), ("large.txt", "too_large")]),
            label="inputs",
        )
        assert_that(
            summed(read[tally.TALLY]),
            equal_to([{"read": 2, "errors:read_error": 1, "errors:too_large": 1}]),
            label="counts",
        )


def test_decode_books_reads_encodings_and_rejects_what_is_not_text():
    cover = {"path": "cover.txt", "size": 208, "sha256": "x"}
    png = b"\x89PNG\r\n\x1a\n" + bytes(200)
    elements = [(source_of(FRANKENSTEIN_PG), FRANKENSTEIN_PG.read_bytes()), (cover, png)]
    with local_pipeline() as p:
        decoded = (
            p
            | beam.Create(elements)
            | beam.ParDo(DecodeBooks()).with_outputs("errors", "inputs", tally.TALLY, main="books")
        )
        assert_that(
            decoded.books | beam.Map(lambda b: (b[0]["path"], b[1].encoding, b[1].text[:32])),
            equal_to([(str(FRANKENSTEIN_PG), "cp1252", "The Project Gutenberg eBook of F")]),
            label="books",
        )
        assert_that(
            decoded.errors,
            equal_to([{"input": "cover.txt", "where": "file", "reason": "binary", "detail": "png file signature"}]),
            label="errors",
        )
        assert_that(summed(decoded[tally.TALLY]), equal_to([{"read": 1, "errors:binary": 1}]), label="counts")


def test_clean_books_takes_titles_from_metadata_and_counts_short_books():
    config = BooksConfig(inputs=[str(BOOKS)], output="unused", near_dup_threshold=0.9)
    short = {"path": str(PG19 / "stub.txt"), "size": 40, "sha256": "x"}
    elements = [
        (source_of(PG19 / "12204.txt"), decode_book((PG19 / "12204.txt").read_bytes())),
        (short, decode_book(b"Too short to be a book.\n")),
    ]
    expected = book(PG19 / "12204.txt")
    with local_pipeline() as p:
        metadata = p | "metadata" >> beam.Create([(str(METADATA), (False, {"12204": ("Bill's Lapse", "u")}))])
        cleaned = (
            p
            | "books" >> beam.Create(elements)
            | beam.ParDo(CleanBooks(config), beam.pvalue.AsDict(metadata)).with_outputs(
                "inputs", tally.TALLY, main="books"
            )
        )
        assert_that(
            cleaned.books,
            equal_to(
                [
                    Book(
                        expected.path,
                        {**expected.document, "title": "Bill's Lapse", "url": "u"},
                        expected.key,
                        expected.signature,
                    )
                ]
            ),
            label="books",
        )
        assert_that(
            cleaned.inputs | beam.Map(lambda i: (Path(i["path"]).name, i["encoding"])),
            equal_to([("12204.txt", "utf-8"), ("stub.txt", "utf-8")]),
            label="inputs",
        )
        assert_that(
            summed(cleaned[tally.TALLY]) | beam.Map(lambda c: (c["read"], c["skipped:too_short"])),
            equal_to([(2, 1)]),
            label="counts",
        )


# ---------------------------------------------------------------------------------------------- de-duplication


@pytest.fixture(scope="module")
def books() -> dict[str, Book]:
    """Alice, an exact copy of it under a smaller id, both editions of Frankenstein, and a PG-19 book."""
    return {
        "alice": book(ALICE),
        "alice copy": book(ALICE, stem="0-alice.txt"),
        "frankenstein": book(FRANKENSTEIN),
        "frankenstein pg": book(FRANKENSTEIN_PG),
        "pg19": book(PG19 / "10006.txt"),
    }


def drop_duplicates(books: list[Book], threshold: float, expected_ids: list[str], expected_counts: dict) -> None:
    with local_pipeline() as p:
        kept = p | beam.Create(books) | DropDuplicates(threshold)
        assert_that(kept.documents | beam.Map(lambda d: d["id"]), equal_to(expected_ids), label="kept")
        assert_that(summed(kept[tally.TALLY]), equal_to([expected_counts]), label="counts")


def test_drop_duplicates_keeps_the_smallest_id_of_exact_and_near_copies(books):
    drop_duplicates(
        list(books.values()),
        0.9,
        ["books:0-alice", "books:84-0", "books:10006"],
        {"skipped:duplicate": 1, "skipped:near_duplicate": 1},
    )


def test_drop_duplicates_without_near_copies_keeps_both_editions(books):
    drop_duplicates(
        list(books.values()),
        0.0,
        ["books:0-alice", "books:84-0", "books:pg84", "books:10006"],
        {"skipped:duplicate": 1},
    )


def test_drop_duplicates_passes_distinct_books_whole(books):
    distinct = [books["alice"], books["frankenstein"], books["pg19"]]
    with local_pipeline() as p:
        kept = p | beam.Create(distinct) | DropDuplicates(0.9)
        assert_that(kept.documents, equal_to([b.document for b in distinct]), label="kept")
        assert_that(summed(kept[tally.TALLY]), equal_to([{}]), label="counts")


def test_drop_duplicates_does_not_depend_on_arrival_order(books):
    # The copy arrives first here and last above; the smaller id wins both times.
    ordered = [books["alice copy"], books["frankenstein pg"], books["pg19"], books["frankenstein"], books["alice"]]
    drop_duplicates(
        ordered,
        0.9,
        ["books:0-alice", "books:84-0", "books:10006"],
        {"skipped:duplicate": 1, "skipped:near_duplicate": 1},
    )
