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

from bertcorpus.pipeline.inputs.long_lines import (
    SMALL_VALUE,
    JsonLineScanner,
    JsonStringText,
    LongLine,
    NotJson,
    Utf8Parts,
    decode_line,
    decoded,
    json_text,
    stripped_extent,
    text_of_line,
    too_long,
)
from bertcorpus.pipeline.inputs.parquet_pages import largest_page
from bertcorpus.transforms.compression import COMPRESSED_SUFFIXES, MIB
from bertcorpus.transforms.document_pieces import (
    numbered_pieces,
    piece_id,
    sentence_pieces,
    streamed_text_pieces,
    text_pieces,
)
from bertcorpus.transforms.languages import LanguageTagError, normalize_tag

PARQUET_READ_BUFFER = MIB  # a column chunk is read through a buffer of this size, a page at a time
# A page of a documents file's text is held whole, and its values twice more (as Arrow's and as Python's): a page
# larger than this, which one long document makes, is refused before it is read. JSONL and text are read in pieces.
MAX_PARQUET_PAGE = 128 * MIB
PARQUET_BATCH_TEXT = 64 * MIB  # the text of the rows read at once, about, from what a row group's metadata says


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
    whole_id: str | None = None  # for a piece of a document longer than the cap (ID#part-N): the document's id

    def plain_text(self) -> str:
        """The document's text, its sentences joined where it has them instead."""
        return self.text or " ".join(self.sentences or ())


@dataclass
class ReadStats:
    path: str
    size: int = 0
    sha256: str = ""
    documents: int = 0
    split: int = 0  # documents longer than the cap, read as pieces
    pieces: int = 0  # the pieces they were cut into
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


@dataclass(frozen=True)
class Span:
    """The documents of a file that one reader yields: those whose first byte lies in [start, stop). The reader
    starts at first_line, the first line that starts at or after `start` (reads.py finds it), knowing whether the
    line before it is blank (a text document starts after one), and reads a document begun inside the span through
    to its end."""

    start: int = 0
    stop: float = float("inf")
    first_line: int = 0
    blank_before: bool = True


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".zst", ".gz", ".bz2", ".jsonl", ".json", ".parquet", ".txt"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base


Lines = Iterator[tuple[int, "bytes | LongLine"]]  # (offset, line) of a file's lines, from long_lines.file_lines


def whole_or_pieces(doc: SourceDocument, pieces: Iterator, kind: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """The document, its `kind` ("text" or "sentences") the one piece of `pieces` (of text_pieces or
    sentence_pieces), or, where there are several, each piece as a document of its own (ID#part-N, `whole_id` the
    document's id); counted in stats: a document read, and a cut into so many pieces."""
    stats.documents += 1
    count = 0
    for number, piece in numbered_pieces(pieces):
        if number == 0:
            yield replace(doc, **{kind: piece})
            return
        count = number
        yield replace(doc, id=piece_id(doc.id, number), whole_id=doc.id, **{kind: piece})
    stats.split += 1
    stats.pieces += count


def read_text_documents(lines: Lines, path: str, stats: ReadStats, span: Span, cap: int) -> Iterator[SourceDocument]:
    """Reference format: one sentence per line, blank lines between documents; the file ends a document.

    A document starts at a non-blank line that opens the file or follows a blank line. Its id is the file stem
    and the offset of that line, so it does not depend on how the file is split between readers. Its sentences are
    cut into pieces as they are read (transforms/document_pieces.py), so that no document is held whole."""
    stem, previous_blank = _stem(path), span.blank_before
    sentences = _text_lines(lines)
    line = next(sentences, None)
    while line is not None:
        at, sentence, _ = line
        if sentence is None:
            previous_blank, line = True, next(sentences, None)
            continue
        if at >= span.stop:
            return  # no document of the span starts here, nor later
        if not previous_blank:  # the rest of a document begun before the span: its reader's
            line = next(sentences, None)
            continue
        previous_blank, following = False, []
        body = _document_sentences(line, sentences, following, stats)
        yield from whole_or_pieces(SourceDocument(f"{stem}:{at}"), sentence_pieces(body, cap), "sentences", stats)
        line = following[0] if following else None


def _document_sentences(first: tuple, sentences: Iterator, following: list, stats: ReadStats) -> Iterator:
    """The sentences of the document that `first` starts, taken from `sentences` up to its end: a blank line, which
    goes into `following` for the reader to go on from, or the file's end."""
    line = first
    while line is not None and line[1] is not None:
        stats.replaced_chars += line[2]
        yield line[1]
        line = next(sentences, None)
    following.append(line)


def _text_lines(lines: Lines) -> Iterator[tuple[int, object, int]]:
    """(offset, its stripped text or None for a blank line, U+FFFD put in) of each line; the text of a line too long
    to hold is the chunks of its second pass, read only if wanted."""
    for at, line in lines:
        if isinstance(line, LongLine):
            decoder = Utf8Parts()
            extent = stripped_extent(decoded(line.parts, decoder))
            if not line.ended:
                return  # the damage of a compressed file cut it: part of the damage, not a line
            blank = extent[0] == extent[1]
            yield at, None if blank else text_of_line(line, extent), decoder.replaced
            continue
        text, replaced = decode_line(line)
        stripped = text.strip()
        yield at, stripped or None, replaced


def _bad_line(stats: ReadStats, at: int, what: str) -> Rejected:
    return stats.reject(f"byte {at}", "bad_jsonl_line", f'{what} (a line holds {{"id", "text"}})')


def read_jsonl_documents(
    lines: Lines, path: str, stats: ReadStats, span: Span, cap: int, fields: tuple[str, ...] = ()
) -> Iterator[SourceDocument | Rejected]:
    """One {"id", "text"} object per line, belonging to the span that holds its first byte; a missing id falls
    back to the file stem and the line's offset. A line that is no such object is a dead letter; a null text is
    skipped (null_text), as in documents Parquet. The `fields` asked for come with each document, as text. A text
    longer than `cap` is cut into pieces as it is read; a line too long to hold is read in two passes
    (long_lines.py)."""
    stem = _stem(path)
    for at, raw in lines:
        if at >= span.stop:
            return
        if isinstance(raw, LongLine):
            yield from _long_jsonl_document(raw, at, stem, stats, cap, fields)
            continue
        if at == 0:  # the byte-order mark some editors put first, which json.loads refuses
            raw = raw.removeprefix(codecs.BOM_UTF8)
        text, replaced = decode_line(raw)
        stats.replaced_chars += replaced
        line = text.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as e:  # RecursionError: arrays in arrays past Python's limit
            yield stats.reject(f"byte {at}", "bad_jsonl_line", f"not JSON: {e}")
            continue
        if not isinstance(record, dict):
            yield _bad_line(stats, at, f"a {type(record).__name__}, not an object")
            continue
        if "text" not in record:
            yield _bad_line(stats, at, 'no "text"')
            continue
        text = record.pop("text")
        yield from _jsonl_document(record, text, at, stem, stats, cap, fields)


def _jsonl_document(
    record: dict,
    text,
    at: int,
    stem: str,
    stats: ReadStats,
    cap: int,
    fields: tuple[str, ...],
    streamed: Iterator[str] | None = None,
) -> Iterator[SourceDocument | Rejected]:
    """The document of a JSONL line's object: its members but the text (`record`), and its text: the value of the
    line's "text", or where that string was too long to hold, `streamed`, its chunks (read in a second pass)."""
    if streamed is None and text is None:
        stats.skip("null_text")
        return
    if streamed is None and not isinstance(text, str):
        yield _bad_line(stats, at, f"its text is a {type(text).__name__}")
        return
    doc_id = record.get("id")
    doc_id, bad_id = _lone_surrogates_replaced(str(doc_id) if doc_id is not None else f"{stem}:{at}")
    stats.replaced_chars += bad_id
    doc = SourceDocument(
        doc_id,
        fields=_text_fields(record, fields) if fields else None,
        language=_language_tag(record.get("language"), stats),
    )
    if streamed is not None:
        yield from whole_or_pieces(doc, streamed_text_pieces(streamed, cap), "text", stats)
        return
    # Only a \uXXXX escape can leave half a surrogate pair, which is no text at all.
    text, bad_text = _lone_surrogates_replaced(text)
    stats.replaced_chars += bad_text
    yield from whole_or_pieces(doc, text_pieces(text, cap), "text", stats)


def _long_jsonl_document(
    line: LongLine, at: int, stem: str, stats: ReadStats, cap: int, fields: tuple[str, ...]
) -> Iterator[SourceDocument | Rejected]:
    """A JSONL line too long to hold: its object scanned in pass 1, its text read again in pass 2 as it is cut
    into pieces (long_lines.py). Its members but the text must be small (long_lines.SMALL_VALUE)."""
    decoder, scanner = Utf8Parts(), JsonLineScanner()
    try:
        for chunk in decoded(line.parts, decoder, first_line=at == 0):
            scanner.feed(chunk)
        scanned = scanner.finish() if line.ended else None
    except NotJson as e:
        line.pass_by()
        scanned, problem = None, str(e)
    else:
        problem = None
    if not line.ended:
        return  # the damage of a compressed file cut it: part of the damage, not a line
    stats.replaced_chars += decoder.replaced
    if problem is not None:
        yield stats.reject(f"byte {at}", "bad_jsonl_line", f"not JSON: {problem}")
        return
    if not scanned.has_text:
        yield _bad_line(stats, at, 'no "text"')
        return
    held = [name for name in ("id", "language", *fields) if too_long(scanned.members.get(name))]
    if held:
        yield _bad_line(stats, at, f"its {held[0]} is longer than the {SMALL_VALUE:,} characters read of it")
        return
    if scanned.text_span is None:
        yield from _jsonl_document(scanned.members, scanned.text, at, stem, stats, cap, fields)
        return
    unescaped = JsonStringText()
    streamed = json_text(line, scanned.text_span, unescaped)
    yield from _jsonl_document(scanned.members, None, at, stem, stats, cap, fields, streamed)
    stats.replaced_chars += unescaped.replaced


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
    stream: BinaryIO, path: str, stats: ReadStats, cap: int, fields: tuple[str, ...] = ()
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
        meta = table.metadata.row_group(group)
        rows, done = meta.num_rows, 0
        text = next(meta.column(i) for i in range(meta.num_columns) if meta.column(i).path_in_schema == "text")
        try:
            largest = _largest_text_page(stream, text)
        except (OSError, ValueError) as e:  # a damaged page header
            largest, why = None, str(e).splitlines()[0]
        if largest is None or largest > MAX_PARQUET_PAGE:
            lost = f"rows {first_row} to {first_row + rows - 1} lost"
            stats.skip("damaged_parquet_row" if largest is None else "oversized_parquet_row", rows)
            yield (
                stats.reject(f"row group {group}", "damaged_parquet_row_group", f"{lost}: {why}")
                if largest is None
                else stats.reject(
                    f"row group {group}",
                    "oversized_parquet_row_group",
                    f"{lost}: a page of {largest:,} bytes of text, more than the {MAX_PARQUET_PAGE:,} a reader holds "
                    "(a document so long is read from JSONL or text, in pieces)",
                )
            )
            first_row += rows
            continue
        batch_rows = max(1, min(1024, rows * PARQUET_BATCH_TEXT // max(text.total_uncompressed_size, 1)))
        columns = ["id", "text", *language, *present]
        batches = table.iter_batches(columns=columns, batch_size=batch_rows, row_groups=[group])
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
            for row, (doc_id, value, *more), tag, confidence in zip(
                itertools.count(first_row + done), zip(*columns), *tags
            ):
                if value is None:
                    stats.skip("null_text")
                    continue
                doc = SourceDocument(
                    str(doc_id) if doc_id is not None else f"{stem}:row{row}",
                    fields=_text_fields(dict(zip(present, more)), fields) if fields else None,
                    language=_language_tag(tag, stats),
                    language_confidence=confidence,
                )
                yield from whole_or_pieces(doc, text_pieces(value, cap), "text", stats)
            done += batch.num_rows
        first_row += rows


def _largest_text_page(stream: BinaryIO, chunk) -> int:
    """The largest uncompressed page of a row group's text column, or its whole size where that is no more than
    MAX_PARQUET_PAGE (no page can be larger): the headers are read only of a chunk that could hold too large a
    page. The stream is left where it was."""
    if chunk.total_uncompressed_size <= MAX_PARQUET_PAGE:
        return chunk.total_uncompressed_size
    position = stream.tell()
    try:
        start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        return largest_page(stream, start or chunk.data_page_offset, chunk.total_compressed_size)
    finally:
        stream.seek(position)


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


LINE_READERS = {"text": read_text_documents, "jsonl": read_jsonl_documents}  # the line formats
