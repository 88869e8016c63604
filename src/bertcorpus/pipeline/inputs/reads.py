"""Reading input files in parallel: a large uncompressed text or JSONL file is shared between readers by byte
spans (plan_reads), every other file has one reader; read_documents reads one span or file, and the per-reader
file stats are merged back into one entry per file. Files are opened through Beam's FileSystems, so gs:// works
on Dataflow."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import re
from collections.abc import Iterator
from typing import BinaryIO

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.cli.shared_flags import MAX_DOCUMENT_MB
from bertcorpus.pipeline.inputs.discovery import remote_matches
from bertcorpus.pipeline.inputs.formats import (
    LINE_READERS,
    ReadStats,
    Rejected,
    SourceDocument,
    Span,
    guess_format,
    read_parquet_documents,
)
from bertcorpus.pipeline.inputs.long_lines import file_lines
from bertcorpus.pipeline.inputs.streams import HashingReader, ReadProgress, hashed_to_the_end
from bertcorpus.pipeline.sinks.output import FILESYSTEM_ERRORS, is_remote
from bertcorpus.transforms.compression import COMPRESSED_SUFFIXES, MIB, decompressed_by_suffix, is_cut
from bertcorpus.transforms.manifest_paths import manifest_paths_problem

MIN_RANGE_MB, MAX_RANGE_MB = 1, 32  # the bounds of auto_range_bytes
BINARY_HEAD = 1 << 16  # the bytes of a file's start (decompressed) looked at for NUL bytes


def auto_range_bytes(file_size: int) -> int:
    """The byte range one reader takes of a large file: a 64th of it, so that even a small file gives every local
    worker many ranges to even out their cost, but at least MIN_RANGE_MB and at most MAX_RANGE_MB (the unit of
    work on Dataflow)."""
    return int(min(MAX_RANGE_MB * MIB, max(MIN_RANGE_MB * MIB, file_size / 64)))


def is_splittable(path: str, input_format: str) -> bool:
    """Whether readers can share the file by byte spans: uncompressed text and JSONL."""
    fmt = guess_format(path) if input_format == "auto" else input_format
    return fmt in LINE_READERS and not path.lower().endswith(COMPRESSED_SUFFIXES)


def plan_reads(path: str, size: int, input_format: str) -> list[tuple[str, int, int]]:
    """(path, start, stop) per reader of the file: byte spans of auto_range_bytes for a splittable file larger than
    one span, else one reader (0, -1) for the whole file."""
    span = auto_range_bytes(size)
    if not is_splittable(path, input_format) or size <= span:
        return [(path, 0, -1)]
    count = math.ceil(size / span)
    bounds = [size * i // count for i in range(count + 1)]
    return [(path, start, stop) for start, stop in zip(bounds, bounds[1:])]


def read_documents(
    path: str,
    input_format: str,
    stats: ReadStats,
    start: int = 0,
    stop: int = -1,
    fields: tuple[str, ...] = (),
    again: bool = False,
    cap: int = int(MAX_DOCUMENT_MB * 1e6),
) -> Iterator[SourceDocument | Rejected]:
    """The documents of one file, or of its byte span [start, stop) (plan_reads), and the file's fingerprint;
    among them a Rejected dead letter for each record (line, row group, damaged, binary or foreign file) that could
    not be read, also counted in stats.errors. A document longer than `cap` characters comes as its pieces
    (transforms/document_pieces.py), cut as it is read, and counted in stats.split and stats.pieces. Documents
    Parquet and JSONL give the `fields` asked for with each document (SourceDocument.fields). `again`: a second
    pass over what the run has read once, which its progress does not count again.

    A whole file is hashed as it streams past; of a file read in spans, the reader of the first span hashes it."""
    try:
        yield from _read_documents(path, input_format, stats, start, stop, fields, again, cap)
    except OSError as e:
        if e.filename is None and e.strerror:  # a read that fails (a disk's I/O error) names no file by itself
            raise OSError(e.errno, e.strerror, path) from None
        raise


def _read_documents(
    path: str,
    input_format: str,
    stats: ReadStats,
    start: int,
    stop: int,
    fields: tuple[str, ...],
    again: bool,
    cap: int,
) -> Iterator[SourceDocument | Rejected]:
    fmt = guess_format(path) if input_format == "auto" else input_format
    with (
        FileSystems.open(path, compression_type="uncompressed") as opened,
        contextlib.nullcontext(opened) if again else ReadProgress(opened, start, stop if stop >= 0 else None) as raw,
    ):
        if fmt == "documents":
            if not again:  # the fingerprint first, and the manifest's promise kept before a row is taken
                hashed_to_the_end(HashingReader(raw, stats))
                if (broken := broken_promise(path, stats)) is not None:
                    yield broken
                    return
                raw.seek(0)
            yield from read_parquet_documents(raw, path, stats, cap, fields)
            return
        read_lines = functools.partial(LINE_READERS[fmt], cap=cap, **({"fields": fields} if fmt == "jsonl" else {}))
        if stop >= 0:
            # Every reader of a span looks at the file's head; the first one speaks for the file.
            raw.seek(0)
            if (binary := binary_problem(raw.read(BINARY_HEAD))) is not None:
                if start == 0:
                    yield stats.reject("file", "binary_file", binary)
                    _fingerprint(path, stats)
                return
            span = span_opening(raw, start, stop, fmt == "text")
            if span is not None:
                raw.seek(span.first_line)
                reopen = functools.partial(opened_at, path, False)
                yield from read_lines(file_lines(raw, span.first_line, reopen, lambda: False), path, stats, span)
            if start == 0:
                _fingerprint(path, stats)
            return
        hashed = HashingReader(raw, stats)
        stream = decompressed_by_suffix(hashed, path)
        buffered = stream if hasattr(stream, "peek") else io.BufferedReader(stream, MIB)
        try:
            if (binary := binary_problem(buffered.peek(BINARY_HEAD)[:BINARY_HEAD])) is not None:
                hashed_to_the_end(hashed)
                yield stats.reject("file", "binary_file", binary)
                return
            reopen = functools.partial(opened_at, path, path.lower().endswith(COMPRESSED_SUFFIXES))
            yield from read_lines(file_lines(buffered, 0, reopen, lambda: is_cut(stream)), path, stats, Span())
            if is_cut(stream):
                # What the file held before the damage was read; the rest is lost: one dead letter for the file.
                # A file of no bytes is empty whatever its suffix (bz2 alone calls it cut), as in extract-books.
                hashed_to_the_end(hashed)
                if stats.size:
                    yield stats.reject(
                        "file",
                        "damaged_compressed_file",
                        "cut short or damaged, or not compressed "
                        f"as its name says; the {stats.documents:,} documents before the damage were "
                        "kept",
                    )
        finally:
            hashed.close()


def binary_problem(head: bytes) -> str | None:
    """Why a file whose (decompressed) bytes begin with `head` is no text to read line by line, or None: a NUL
    byte, which no UTF-8 text holds but binary data and UTF-16 or UTF-32 text hold many of (extract-books tells
    UTF-16 books apart; create, dedup and vocab read UTF-8)."""
    if b"\x00" not in head:
        return None
    return (
        f"NUL bytes in its first {len(head):,} bytes: binary data, or text in UTF-16 or UTF-32, not UTF-8 text; "
        "none of it was read"
    )


def span_opening(f: BinaryIO, start: int, stop: int, text: bool) -> Span | None:
    """The Span of a reader of bytes [start, stop) of a file: where the first line that starts in it starts, and
    (for text) whether the line before that one is blank; None where no line starts in it. Only the bytes from
    start - 1 up to that line are read, and, back from it, the line before it up to its last character that is not
    whitespace: never the whole of a long line, which a reader of each span of it would otherwise read."""
    if start == 0:
        return Span(0, stop, 0, True)
    at = start - 1
    f.seek(at)
    while at < stop:
        block = f.read(min(1 << 16, stop - at))
        if not block:
            return None
        newline = block.find(b"\n")
        if newline >= 0:
            first = at + newline + 1
            return Span(start, stop, first, _blank_line_before(f, first) if text else True) if first < stop else None
        at += len(block)
    return None


def _blank_line_before(f: BinaryIO, first: int) -> bool:
    """Whether the line that ends with the newline at byte first - 1 holds nothing but whitespace (str.strip's),
    read back from its end until a character that is not, or its start."""
    end = first - 1
    while end > 0:
        begin = max(0, end - (1 << 16))
        f.seek(begin)
        block = f.read(end - begin)
        newline = block.rfind(b"\n")
        if newline >= 0 or begin == 0:
            return _WHITESPACE.fullmatch(block, newline + 1) is not None
        # Continuation bytes at the block's start belong to a character begun before it: read with that block.
        cut = len(block) - len(block.lstrip(_CONTINUATION))
        if cut > 3 or _WHITESPACE.fullmatch(block, cut) is None:
            return False
        end = begin + cut
    return True


# What str.strip() takes away, as UTF-8: every character Python counts as whitespace (they are all below U+3001).
_WHITESPACE = re.compile(
    b"(?:" + b"|".join(re.escape(chr(c).encode()) for c in range(0x3001) if chr(c).isspace() and c != 10) + b")*"
)
_CONTINUATION = bytes(range(0x80, 0xC0))


@contextlib.contextmanager
def opened_at(path: str, compressed: bool, offset: int) -> Iterator[BinaryIO]:
    """The file's (decompressed) bytes from `offset` on, in a stream of its own: for the second pass over a line
    too long to hold (long_lines.py). A compressed file is decompressed again up to there."""
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        if not compressed:
            raw.seek(offset)
            yield raw
            return
        stream = decompressed_by_suffix(raw, path)
        left = offset
        while left and (skipped := stream.read(min(left, MIB))):
            left -= len(skipped)
        yield stream


def broken_promise(path: str, stats: ReadStats) -> Rejected | None:
    """A dead letter for a documents file (hashed into `stats`) whose sha256 is not the one that the manifest
    beside it lists for it: bytes damaged or changed after the job that wrote it, at its size too, which no reader
    would otherwise notice in a file written without page checksums. Its rows, as the manifest counts them, are
    lost (damaged_parquet_row). None where the file keeps the promise, or no manifest makes one."""
    promise = promised_by_manifest(path)
    if promise is None or promise["sha256"] == stats.sha256:
        return None
    stats.skip("damaged_parquet_row", promise["records"])
    return stats.reject(
        "file",
        "changed_documents_file",
        f"its sha256 is not the one {promise['manifest']} lists for it: damaged or changed since it was written; "
        f"its {promise['records']:,} documents were not read",
    )


def promised_by_manifest(path: str) -> dict | None:
    """{"manifest", "sha256", "records"} that the bertcorpus manifest in a documents file's folder lists for it;
    None where there is no such manifest, it does not list the file, or it is not one bertcorpus reads."""
    folder, name = FileSystems.split(path)
    manifest = FileSystems.join(folder, "manifest.json")
    try:
        with FileSystems.open(manifest, compression_type="uncompressed") as f:
            content = json.load(f)
        listed = content["outputs"]["documents"] if content.get("tool") == "bertcorpus" else []
        entry = next(e for e in listed if isinstance(e, dict) and e.get("path") == name)
        promise = {"manifest": manifest, "sha256": str(entry["sha256"]), "records": int(entry["records"])}
    except (*FILESYSTEM_ERRORS, ValueError, KeyError, TypeError, AttributeError, StopIteration):
        return None
    return None if manifest_paths_problem(content) else promise


def _fingerprint(path: str, stats: ReadStats) -> None:
    """The whole file's size and sha256, read apart from any span."""
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        hashed_to_the_end(HashingReader(raw, stats))


def merge_file_stats(parts: list[dict]) -> list[dict]:
    """Per-reader file stats (one per span) → one entry per file: counts summed, the fingerprint kept."""
    merged: dict[str, dict] = {}
    for part in sorted(parts, key=lambda p: p["path"]):
        entry = merged.setdefault(
            part["path"],
            {
                "path": part["path"],
                "size": 0,
                "sha256": "",
                "documents": 0,
                "replaced_chars": 0,
                "skipped": {},
                "errors": {},
            },
        )
        if part["sha256"]:
            entry["size"], entry["sha256"] = part["size"], part["sha256"]
        entry["documents"] += part["documents"]
        entry["replaced_chars"] += part["replaced_chars"]
        if part.get("unknown_language_tags"):  # records whose language is no tag, read as carrying none
            entry["unknown_language_tags"] = entry.get("unknown_language_tags", 0) + part["unknown_language_tags"]
        for kind in ("skipped", "errors"):
            for reason, n in part.get(kind, {}).items():
                entry[kind][reason] = entry[kind].get(reason, 0) + n
    return list(merged.values())


def match_on_worker(pattern: str) -> Iterator[tuple[str, int]]:
    """A file as matched at launch → (its path, size); a remote pattern, as a dry run leaves it, is matched now.
    An existing object is taken by its name before that name is read as a pattern, as find_inputs does."""
    if not is_remote(pattern):
        yield pattern, os.path.getsize(pattern)
        return
    yield from remote_matches(
        pattern, lambda p: [(m.path, m.size_in_bytes) for m in FileSystems.match([p])[0].metadata_list]
    )


class PlanReads(beam.PTransform):
    """Input files (match_inputs) → (file path, start, stop) per reader, spread over the workers: a large text
    or JSONL file is read in byte spans (plan_reads), by several workers."""

    def __init__(self, inputs: list[str], input_format: str):
        super().__init__()
        self.inputs, self.input_format = inputs, input_format

    def expand(self, pbegin):
        # → (file path, size) → (file path, start, stop)
        return (
            pbegin
            | "list inputs" >> beam.Create(self.inputs)
            | "match inputs" >> beam.FlatMap(match_on_worker)
            | "plan spans" >> beam.FlatMap(lambda file, fmt: plan_reads(*file, fmt), self.input_format)
            | "spread reads" >> beam.Reshuffle()
        )
