"""The input formats of `create` and `vocab`: documents Parquet, reference-format text and JSONL, each read into
`SourceDocument`s while a `ReadStats` counts what could not be used (replacement characters, skipped lines).

Every file boundary is a document boundary. A line format may be read in byte spans (reads.py): a document
belongs to the span that holds its first byte, and ids that fall back to a position use the byte offset, which
no split changes.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from bertcorpus.pipeline.inputs.streams import lines_of
from bertcorpus.transforms.compression import COMPRESSED_SUFFIXES
from bertcorpus.transforms.document_pieces import piece_id, sentence_pieces, text_pieces
from bertcorpus.transforms.languages import LanguageTagError, normalize_tag

_REPLACEMENT_BYTES = "\ufffd".encode()
PARQUET_READ_BUFFER = 1 << 20  # a column chunk is read through a buffer of this size, a page at a time


class InputError(ValueError):
    """Input the job cannot use; the message says which and why."""


@dataclass
class SourceDocument:
    id: str
    text: str | None = None  # paragraphs separated by blank lines, to be split into sentences
    sentences: list[str] | None = None  # already one sentence per entry (reference-format text)
    fields: dict | None = None  # the other fields a reader was asked for (dedup's title, url, source), None if absent
    language: str | None = None  # the BCP 47 tag the record carries (documents' language column, JSONL's field)
    language_confidence: float | None = None  # a detector's confidence in it, where the record carries one

    def plain_text(self) -> str:
        """The document's text, its sentences joined where it has them instead."""
        return self.text or " ".join(self.sentences or ())


def document_pieces(doc: SourceDocument, cap: int) -> Iterator[SourceDocument]:
    """The document itself, or where it is longer than `cap` characters its pieces, one at a time, each a document
    of its own (transforms/document_pieces.py)."""
    if doc.sentences is not None and sum(map(len, doc.sentences)) > cap:
        for number, run in enumerate(sentence_pieces(doc.sentences, cap), 1):
            yield replace(doc, id=piece_id(doc.id, number), sentences=run)  # its fields and language too
    elif doc.sentences is None and len(doc.text or "") > cap:
        for number, text in enumerate(text_pieces(doc.text, cap), 1):
            yield replace(doc, id=piece_id(doc.id, number), text=text)
    else:
        yield doc


@dataclass
class ReadStats:
    path: str
    size: int = 0
    sha256: str = ""
    documents: int = 0
    replaced_chars: int = 0  # U+FFFD substituted for invalid UTF-8 and for JSONL's lone surrogates
    unknown_language_tags: int = 0  # records whose language is no known BCP 47 tag: taken as carrying none
    skipped: dict[str, int] = field(default_factory=dict)  # records set aside on purpose (a null text), by reason
    errors: dict[str, int] = field(default_factory=dict)  # records that could not be read, by reason

    def skip(self, reason: str, records: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + records

    def reject(self, where: str, reason: str, detail: str) -> Rejected:
        """A dead letter for a record of this file that could not be read, counted."""
        self.errors[reason] = self.errors.get(reason, 0) + 1
        return Rejected(self.path, where, reason, detail)


@dataclass(frozen=True)
class Rejected:
    """What a reader yields, among the documents, for a record it could not read: a dead-letter record."""

    input: str
    where: str  # "byte N" of the file, "row group N", or "file"
    reason: str
    detail: str

    def record(self) -> dict:
        return {"input": self.input, "where": self.where, "reason": self.reason, "detail": self.detail}


def guess_format(path: str) -> str:
    name = path.lower()
    for suffix in COMPRESSED_SUFFIXES:  # a compressed file holds the format its name gives without the suffix
        name = name.removesuffix(suffix)
    if name.endswith(".parquet"):
        return "documents"
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    return "text"


def decode_line(raw: bytes) -> tuple[str, int]:
    """The line as text, invalid UTF-8 replaced by U+FFFD, and how many replacements that took."""
    try:
        return raw.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        return text, text.count("\ufffd") - raw.count(_REPLACEMENT_BYTES)


@dataclass(frozen=True)
class Span:
    """The documents of a file that one reader yields: those whose first byte lies in [start, stop). The reader
    starts at line_start, the start of the line holding byte start - 1 (0 for a span at the file's start), and
    reads a document begun inside the span through to its end."""

    start: int = 0
    stop: float = float("inf")
    line_start: int = 0


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".zst", ".gz", ".bz2", ".jsonl", ".json", ".parquet", ".txt"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base


def read_text_documents(stream: BinaryIO, path: str, stats: ReadStats, span: Span) -> Iterator[SourceDocument]:
    """Reference format: one sentence per line, blank lines between documents; the file ends a document.

    A document starts at a non-blank line that opens the file or follows a blank line. Its id is the file stem
    and the offset of that line, so it does not depend on how the file is split between readers."""
    stem, pos, sentences = _stem(path), span.line_start, []
    owned, previous_blank, first = False, span.line_start == 0, 0
    for raw in lines_of(stream):
        at, pos = pos, pos + len(raw)
        text, replaced = decode_line(raw)
        line = text.strip()
        if not line:
            if sentences:
                yield SourceDocument(f"{stem}:{first}", sentences=sentences)
            owned, previous_blank, sentences = False, True, []
            continue
        if previous_blank:  # a document starts here
            if at >= span.stop:
                return
            owned, first = at >= span.start, at
        previous_blank = False
        if owned:
            stats.replaced_chars += replaced
            sentences.append(line)
    if sentences:
        yield SourceDocument(f"{stem}:{first}", sentences=sentences)


def _bad_line(stats: ReadStats, at: int, what: str) -> Rejected:
    return stats.reject(f"byte {at}", "bad_jsonl_line", f'{what} (a line holds {{"id", "text"}})')


def read_jsonl_documents(
    stream: BinaryIO, path: str, stats: ReadStats, span: Span, fields: tuple[str, ...] = ()
) -> Iterator[SourceDocument | Rejected]:
    """One {"id", "text"} object per line, belonging to the span that holds its first byte; a missing id falls
    back to the file stem and the line's offset. A line that is no such object is a dead letter; a null text is
    skipped (null_text), as in documents Parquet. The `fields` asked for come with each document, as text."""
    stem, pos = _stem(path), span.line_start
    for raw in lines_of(stream):
        at, pos = pos, pos + len(raw)
        if at < span.start:
            continue  # the end of a line that began before the span
        if at >= span.stop:
            return
        if at == 0:  # the byte-order mark some editors put first, which json.loads refuses
            raw = raw.removeprefix(codecs.BOM_UTF8)
        text, replaced = decode_line(raw)
        stats.replaced_chars += replaced
        line = text.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            yield stats.reject(f"byte {at}", "bad_jsonl_line", f"not JSON: {e}")
            continue
        if not isinstance(record, dict):
            yield _bad_line(stats, at, f"a {type(record).__name__}, not an object")
            continue
        if "text" not in record:
            yield _bad_line(stats, at, 'no "text"')
            continue
        text = record["text"]
        if text is None:
            stats.skip("null_text")
            continue
        if not isinstance(text, str):
            yield _bad_line(stats, at, f"its text is a {type(text).__name__}")
            continue
        doc_id = record.get("id")
        doc_id = str(doc_id) if doc_id is not None else f"{stem}:{at}"
        if "\\u" in line:  # only a \uXXXX escape can leave half a surrogate pair, which is no text at all
            (text, bad_text), (doc_id, bad_id) = _lone_surrogates_replaced(text), _lone_surrogates_replaced(doc_id)
            stats.replaced_chars += bad_text + bad_id
        yield SourceDocument(
            doc_id,
            text=text,
            fields=_text_fields(record, fields) if fields else None,
            language=_language_tag(record.get("language"), stats),
        )


def _language_tag(value, stats: ReadStats) -> str | None:
    """A record's language as a canonical tag; None, counted, where it is not one."""
    if value is None:
        return None
    try:
        return normalize_tag(value) if isinstance(value, str) else normalize_tag("?")
    except LanguageTagError:
        stats.unknown_language_tags += 1
        return None


def _text_fields(record: dict, names: tuple[str, ...]) -> dict:
    """The named fields of a record as text, None where a record lacks one (or holds null)."""
    return {name: None if record.get(name) is None else str(record[name]) for name in names}


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogates_replaced(text: str) -> tuple[str, int]:
    """text with U+FFFD for every lone surrogate (json.loads makes them from unpaired escapes), and their count.
    Two ids that differ only there become equal; a bucket orders its documents by id and then text, so that
    stays reproducible."""
    return _LONE_SURROGATE.subn("\ufffd", text)


def read_parquet_documents(
    stream: BinaryIO, path: str, stats: ReadStats, fields: tuple[str, ...] = ()
) -> Iterator[SourceDocument | Rejected]:
    """Documents Parquet (the extraction jobs' output) from a seekable stream: the id and text columns, and the
    `fields` asked for that the file has. Row groups are read one by one, so that a damaged one costs its own rows
    only (a dead letter, its rows counted as damaged_parquet_row); a page whose CRC-32 does not match its bytes is
    such damage (the documents sink writes one for every page); a file that is no documents Parquet is one dead
    letter. A null id falls back to the file stem and the row's number in the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(stream, page_checksum_verification=True, buffer_size=PARQUET_READ_BUFFER)
    except Exception as e:  # pyarrow raises several types for a damaged file
        yield stats.reject("file", "unreadable_parquet", f"not a readable Parquet file: {str(e).splitlines()[0]}")
        return
    names = set(table.schema_arrow.names)
    if not {"id", "text"} <= names:
        yield stats.reject("file", "not_a_documents_file", f"no id/text columns (has {', '.join(sorted(names))})")
        return
    text_type = table.schema_arrow.field("text").type
    if not _holds_strings(text_type):
        yield stats.reject("file", "not_a_documents_file", f"its text column holds {text_type}, not strings")
        return
    stem, first_row = _stem(path), 0
    present = [name for name in fields if name in names and name not in ("id", "text", *_LANGUAGE_COLUMNS)]
    language = [name for name in _LANGUAGE_COLUMNS if name in names]
    for group in range(table.num_row_groups):
        rows, done = table.metadata.row_group(group).num_rows, 0
        batches = table.iter_batches(columns=["id", "text", *language, *present], batch_size=1024, row_groups=[group])
        while True:
            try:
                batch = next(batches, None)
            except (OSError, pa.ArrowInvalid) as e:  # what a damaged page, header or compressed block raises
                stats.skip("damaged_parquet_row", rows - done)
                yield stats.reject(
                    f"row group {group}",
                    "damaged_parquet_row_group",
                    f"rows {first_row + done} to {first_row + rows - 1} lost: {str(e).splitlines()[0]}",
                )
                break
            if batch is None:
                break
            columns = [_values(batch.column(name), stats) for name in ("id", "text", *present)]
            tags = [
                _values(batch.column(name), stats) if name in language else [None] * batch.num_rows
                for name in _LANGUAGE_COLUMNS
            ]
            for row, (doc_id, text, *more), tag, confidence in zip(
                itertools.count(first_row + done), zip(*columns), *tags
            ):
                if text is None:
                    stats.skip("null_text")
                    continue
                yield SourceDocument(
                    str(doc_id) if doc_id is not None else f"{stem}:row{row}",
                    text=text,
                    fields=_text_fields(dict(zip(present, more)), fields) if fields else None,
                    language=_language_tag(tag, stats),
                    language_confidence=confidence,
                )
            done += batch.num_rows
        first_row += rows


# The documents columns that say a document's language, read whenever a file has them.
_LANGUAGE_COLUMNS = ("language", "language_confidence")


def _holds_strings(arrow_type) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or pa.types.is_null(arrow_type)


def _values(column, stats: ReadStats) -> list:
    """A column's values. Arrow does not check that a writer stored UTF-8 in a string column: bytes that are not
    get U+FFFD, counted as in text files."""
    import pyarrow as pa

    try:
        return column.to_pylist()
    except UnicodeDecodeError:
        values = []
        for raw in column.cast(pa.large_binary()).to_pylist():
            text, replaced = decode_line(raw) if raw is not None else (None, 0)
            stats.replaced_chars += replaced
            values.append(text)
        return values


LINE_READERS = {"text": read_text_documents, "jsonl": read_jsonl_documents}  # the line formats; Parquet is read whole
