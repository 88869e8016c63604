"""The `extract-books` job: book files → one document per book, as documents Parquet (its command line is
books_command.py).

    --input patterns ─ list book files ─ drop duplicate files ─ read books ─ decode books ─ clean books ─┐
                     └ metadata.csv files (named, listed, or beside the books) ─ read metadata ─ (titles) ┘
        books ─ drop duplicates ─ documents ─ WriteDocuments ──────────────────────────────────────────┐
        unreadable, empty, binary and undecodable files ─ errors ─ WriteErrors ────────────────────────┼─ publish
        counts, input fingerprints with each book's encoding and removed lines ────────────────────────┘

A file is a book: plain text as epub-to-text converters and Project Gutenberg ship it (any encoding decode_book
recognises), a PG-19 book whose title is in a metadata.csv, or an HF bookcorpus book with one sentence per line,
as text or as a Parquet file with one row per line in its `text` column. Every file read is kept, skipped for a
counted reason (too_short, duplicate, near_duplicate) or recorded in the dead letter with the reason it was
rejected. Exact copies (the same dedup_key after cleaning) and, with --near-dup-threshold, near copies found by
MinHash LSH keep the book with the smallest id. Which files are books, and how their bytes are had, is
pipeline/extract/book_files.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.extract.book_files import MIB, beside, book_id, list_inputs, load_book, metadata_table
from bertcorpus.pipeline.inputs.formats import InputError
from bertcorpus.pipeline.sinks import documents
from bertcorpus.transforms.book_cleaning import clean_book
from bertcorpus.transforms.book_decoding import BookRejection, decode_book
from bertcorpus.transforms.book_duplicates import (
    NUM_PERM,
    band_keys,
    dedup_key,
    lsh_rows,
    minhash_signature,
    near_copies,
)
from bertcorpus.transforms.language_id import DETECT, LanguageSetting
from bertcorpus.transforms.text_length import long_enough
from bertcorpus.transforms.zh_variants import chinese_versions

JOB = "extract-books"
# How a book's language was had, besides a detector's or the script's (transforms/language_id.py): --language's
# tag, or --zh-variant's script.
GIVEN_METHOD, ZH_VARIANT_METHOD = "given", "zh-variant"
SKIP_REASONS = ("too_short", "duplicate", "near_duplicate")
REMOVED_KINDS = (
    "licence_lines",
    "credit_lines",
    "toc_lines",
    "heading_lines",
    "title_page_lines",
    "separator_lines",
    "art_lines",
    "illustration_lines",
)


@dataclass
class BooksConfig:
    inputs: list[str]  # files, globs or directories; local ones made absolute
    output: str
    metadata: list[str] = field(default_factory=list)
    num_shards: int = 1
    min_chars: int = 1000
    source: str = "books"
    dedup: bool = True
    near_dup_threshold: float = 0.9  # 0 turns near-duplicate detection off
    max_book_mb: float = 64.0
    language: LanguageSetting = field(default_factory=lambda: LanguageSetting(DETECT))
    zh_variant: str | None = None  # Chinese books converted to this script (transforms/zh_variants.py CHOICES)
    strict: bool = False
    max_error_rate: float = 0.01
    # The book files as listed at launch, (path, size): what the run reads, not a setting (describe leaves it out).
    input_files: list[tuple[str, int]] = field(default_factory=list)

    def describe(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "input_files"}


@dataclass(frozen=True)
class Book:
    """A cleaned book on its way to dedup: the document, and what duplicates are recognised by."""

    path: str
    document: dict
    key: str | None = None  # dedup_key of the text
    signature: tuple[int, ...] | None = None  # MinHash of the text


# ---------------------------------------------------------------------------------------------- DoFns


def _reject(source: dict, rejection: BookRejection):
    """The three outputs of a rejected file: its dead-letter record, its input description, its counts."""
    yield beam.pvalue.TaggedOutput(
        "errors", {"input": source["path"], "where": "file", "reason": rejection.reason, "detail": rejection.detail}
    )
    yield beam.pvalue.TaggedOutput("inputs", {**source, "rejected": rejection.reason})
    yield tally.emit(documents.METRICS, {"read": 1, f"errors:{rejection.reason}": 1})


class ListBookFiles(WatchedDoFn):
    """pattern → (path, size) per book file; the metadata.csv files it matches go to 'metadata'."""

    def process(self, pattern: str):
        books, metadata, _ = list_inputs(pattern)
        if not books and not metadata:
            raise InputError(f"no book files match {pattern!r}")
        yield from books
        for path in metadata:
            yield beam.pvalue.TaggedOutput("metadata", path)


class ReadMetadata(WatchedDoFn):
    """(metadata.csv path, whether it was named or listed) → (path, (that, {id: (title, url)})). A named or listed
    file must exist; a path guessed beside the books that is not there gives nothing."""

    def process(self, element):
        path, named = element
        if not FileSystems.exists(path):
            if named:
                raise InputError(f"metadata file {path} does not exist")
            return
        yield path, (named, metadata_table(path))


class ReadBooks(WatchedDoFn):
    """(path, size) → ({path, size, sha256}, bytes); files that cannot be read go to 'errors'."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes

    def process(self, element):
        source, data = load_book(*element, self.max_bytes)
        if isinstance(data, BookRejection):
            yield from _reject(source, data)
        else:
            yield source, data


class DecodeBooks(WatchedDoFn):
    """({path, size, sha256}, bytes) → (that, DecodedBook); empty, binary and undecodable files go to 'errors'."""

    def process(self, element):
        source, data = element
        decoded = decode_book(data)
        if isinstance(decoded, BookRejection):
            yield from _reject(source, decoded)
        else:
            yield source, decoded


class CleanBooks(WatchedDoFn):
    """({path, size, sha256}, DecodedBook) → Book, with its dedup key and MinHash signature when they are used;
    the file's description, with its encoding, removed lines and language (and how it was had), goes to 'inputs'."""

    def __init__(self, config: BooksConfig):
        self.source, self.min_chars, self.language = config.source, config.min_chars, config.language
        self.zh_variant = config.zh_variant
        self.dedup, self.near = config.dedup, config.dedup and config.near_dup_threshold > 0

    @staticmethod
    def _metadata(path: str, tables: dict) -> tuple[str | None, str | None]:
        """(title, url) from the nearest metadata.csv beside the book, else from the named and listed ones in the
        order of their paths; a metadata.csv found beside other books is theirs only."""
        stem = book_id(path).split(":", 1)[1]
        nearby = [tables[p][1] for p in beside(path) if p in tables]
        named = [table for _, (is_named, table) in sorted(tables.items()) if is_named]
        for table in nearby + named:
            if stem in table:
                return table[stem]
        return None, None

    def process(self, element, metadata: dict):
        source, decoded = element
        book = clean_book(decoded.text)
        removed = {k: v for k, v in sorted(book.removed.items()) if v}
        description = {
            **source,
            "encoding": decoded.encoding,
            "replaced": decoded.replaced,
            "mojibake_fixed": decoded.mojibake_fixed,
            "removed": removed,
        }
        counts = {
            "read": 1,
            f"encoding:{decoded.encoding}": 1,
            "replaced_chars": decoded.replaced,
            "mojibake_fixed": decoded.mojibake_fixed,
            **{f"removed:{k}": v for k, v in removed.items()},
        }
        if not long_enough(book.text, self.min_chars):
            yield beam.pvalue.TaggedOutput("inputs", description)
            yield tally.emit(documents.METRICS, {**counts, "skipped:too_short": 1})
            return
        yield tally.emit(documents.METRICS, counts)
        title, url = self._metadata(source["path"], metadata)
        # The metadata's title, else the one the PG header names, else the file's name: never none.
        title = title or book.title or book_id(source["path"]).split(":", 1)[1]
        versions = chinese_versions(book.text, self.zh_variant) if self.zh_variant else None
        if versions:
            yield beam.pvalue.TaggedOutput(
                "inputs", {**description, "languages": {v.language: ZH_VARIANT_METHOD for v in versions}}
            )
            if len(versions) > 1:  # one book in two scripts: two documents read
                yield tally.emit(documents.METRICS, {"read": len(versions) - 1})
            for version in versions:
                document = {
                    "id": book_id(source["path"]) + version.id_suffix,
                    "source": self.source,
                    "title": version.convert(title),
                    "text": version.text,
                    "url": url,
                    "language": version.language,
                    "language_confidence": None,
                }
                yield self._book(source["path"], document)
            return
        language = self.language.resolve(None, lambda: book.text)
        yield beam.pvalue.TaggedOutput(
            "inputs", {**description, "languages": {language.language: language.method or GIVEN_METHOD}}
        )
        document = {
            "id": book_id(source["path"]),
            "source": self.source,
            "title": title,
            "text": book.text,
            "url": url,
            "language": language.language,
            "language_confidence": language.confidence,
        }
        yield self._book(source["path"], document)

    def _book(self, path: str, document: dict) -> Book:
        text = document["text"]
        return Book(
            path,
            document,
            dedup_key(text) if self.dedup else None,
            minhash_signature(text, NUM_PERM) if self.near else None,
        )


def _exact_copies(element):
    """(dedup key, [(id, path)]) → (path, 'duplicate') for every copy but the one with the smallest (id, path)."""
    _, members = element
    for _, path in sorted(members)[1:]:
        yield path, "duplicate"


class KeepSurvivors(WatchedDoFn):
    """(path, {'book': [document], 'verdict': [reasons]}) → the document, or a count of why it was dropped."""

    def process(self, element):
        _, joined = element
        verdicts = set(joined["verdict"])
        for document in joined["book"]:
            if not verdicts:
                yield document
            else:
                reason = "duplicate" if "duplicate" in verdicts else "near_duplicate"
                yield tally.emit(documents.METRICS, {f"skipped:{reason}": 1})


class DropDuplicates(beam.PTransform):
    """Books → the documents of the books that are not copies; counts of the copies to tally.TALLY.

    Only keys and ids are grouped: exact copies by dedup key, near copies by LSH band of their MinHash signature
    (a few hundred bytes per band). The verdicts then meet their documents in one join by path, where each
    group holds one document, so no worker ever holds more than one book to decide."""

    def __init__(self, near_dup_threshold: float):
        super().__init__()
        self.threshold = near_dup_threshold

    def expand(self, books):
        # Book → (dedup key, (id, path)) → (path, 'duplicate') for all copies but the first
        exact = (
            books
            | "key exact copies" >> beam.Map(lambda b: (b.key, (b.document["id"], b.path)))
            | "group exact copies" >> beam.GroupByKey()
            | "mark exact copies" >> beam.FlatMap(_exact_copies)
        )
        verdicts = [exact]
        if self.threshold > 0:
            rows, threshold = lsh_rows(self.threshold), self.threshold
            # Book → (band bucket, (id, path, signature)) → (path, 'near_duplicate') for books with an earlier
            # near copy in any of their buckets
            near = (
                books
                | "band signatures"
                >> beam.FlatMap(
                    lambda b: [(k, (b.document["id"], b.path, b.signature)) for k in band_keys(b.signature, rows)]
                )
                | "group bands" >> beam.GroupByKey()
                | "mark near copies"
                >> beam.FlatMap(lambda bucket: ((path, "near_duplicate") for path in near_copies(bucket[1], threshold)))
            )
            verdicts.append(near)
        # (path, document) joined with (path, verdict) → documents of the books without a verdict
        keyed = books | "key books by path" >> beam.Map(lambda b: (b.path, b.document))
        merged = verdicts | "merge verdicts" >> beam.Flatten()
        return (
            {"book": keyed, "verdict": merged}
            | "join verdicts" >> beam.CoGroupByKey()
            | "keep survivors" >> beam.ParDo(KeepSurvivors()).with_outputs(tally.TALLY, main="documents")
        )


class ExtractBooks(beam.PTransform):
    """The whole job on a pipeline; returns the PCollection holding the manifest."""

    def __init__(self, config: BooksConfig):
        super().__init__()
        self.config = config

    def expand(self, pbegin):
        cfg = self.config
        # patterns → distinct (path, size) of book files; Distinct groups by path, which also spreads the files
        listed = (
            pbegin
            | "list inputs" >> beam.Create(cfg.inputs)
            | "list book files" >> beam.ParDo(ListBookFiles()).with_outputs("metadata", main="books")
        )
        files = listed.books | "drop duplicate files" >> beam.Distinct()
        # metadata.csv paths, each with whether it was named or listed (it must exist, and it serves every book)
        # or guessed beside the books (it may be missing, and it serves the books beside it) → (path, table).
        # Guessed from the listing, not from `files`: then reading, decoding and cleaning stay one fused stage,
        # spread over the workers by file, instead of waiting for this side input in a stage of their own.
        named = pbegin | "list metadata" >> beam.Create([(p, True) for p in cfg.metadata])
        listed_metadata = listed.metadata | "metadata listed" >> beam.Map(lambda p: (p, True))
        guessed = listed.books | "metadata beside books" >> beam.FlatMap(lambda f: [(p, False) for p in beside(f[0])])
        metadata = (
            (named, listed_metadata, guessed)
            | "merge metadata paths" >> beam.Flatten()
            | "one entry per metadata path" >> beam.CombinePerKey(any)
            | "read metadata" >> beam.ParDo(ReadMetadata())
        )
        # (path, size) → ({path, size, sha256}, bytes) → (that, DecodedBook) → Book
        read = files | "read books" >> beam.ParDo(ReadBooks(int(cfg.max_book_mb * MIB))).with_outputs(
            "errors", "inputs", tally.TALLY, main="books"
        )
        decoded = read.books | "decode books" >> beam.ParDo(DecodeBooks()).with_outputs(
            "errors", "inputs", tally.TALLY, main="books"
        )
        cleaned = decoded.books | "clean books" >> beam.ParDo(
            CleanBooks(cfg), beam.pvalue.AsDict(metadata)
        ).with_outputs("inputs", tally.TALLY, main="books")
        counts = [read[tally.TALLY], decoded[tally.TALLY], cleaned[tally.TALLY]]
        # Book → {id, source, title, text, url} of every book that is not a copy of another
        if cfg.dedup:
            kept = cleaned.books | "drop duplicates" >> DropDuplicates(cfg.near_dup_threshold)
            docs = kept.documents
            counts.append(kept[tally.TALLY])
        else:
            docs = cleaned.books | "take documents" >> beam.Map(lambda b: b.document)
        written = docs | "write documents" >> documents.WriteDocuments(cfg.output, cfg.num_shards)
        errors = (
            (read.errors, decoded.errors)
            | "merge errors" >> beam.Flatten()
            | "write errors" >> documents.WriteErrors(cfg.output)
        )
        inputs = (read.inputs, decoded.inputs, cleaned.inputs) | "merge input descriptions" >> beam.Flatten()
        # Every skip reason appears in the manifest, also with a count of 0.
        zeros = pbegin | "list skip reasons" >> beam.Create([{f"skipped:{r}": 0 for r in SKIP_REASONS}])
        counts = [zeros, *counts, written[tally.TALLY]] | "merge counts" >> beam.Flatten()
        return {
            "documents": written["files"],
            "errors": errors["files"],
            "counts": counts,
            "inputs": inputs,
        } | "publish" >> documents.PublishDocuments(cfg.output, JOB, cfg.describe())
