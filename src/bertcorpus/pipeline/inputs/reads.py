"""Reading input files in parallel: a large uncompressed text or JSONL file is shared between readers by byte
spans (plan_reads), every other file has one reader; read_documents reads one span or file, and the per-reader
file stats are merged back into one entry per file. Files are opened through Beam's FileSystems, so gs:// works
on Dataflow."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
from collections.abc import Iterator
from typing import BinaryIO

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

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
from bertcorpus.pipeline.inputs.streams import HashingReader, ReadProgress, hashed_to_the_end
from bertcorpus.pipeline.sinks.output import FILESYSTEM_ERRORS, is_remote
from bertcorpus.transforms.compression import COMPRESSED_SUFFIXES, MIB, decompressed_by_suffix, is_cut
from bertcorpus.transforms.manifest_paths import manifest_paths_problem

MIN_RANGE_MB, MAX_RANGE_MB = 1, 32  # the bounds of auto_range_bytes


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
) -> Iterator[SourceDocument | Rejected]:
    """The documents of one file, or of its byte span [start, stop) (plan_reads), and the file's fingerprint;
    among them a Rejected dead letter for each record (line, row group, damaged or foreign file) that could not
    be read, also counted in stats.errors. Documents Parquet and JSONL give the `fields` asked for with each
    document (SourceDocument.fields). `again`: a second pass over what the run has read once, which its progress
    does not count again.

    A whole file is hashed as it streams past; of a file read in spans, the reader of the first span hashes it."""
    try:
        yield from _read_documents(path, input_format, stats, start, stop, fields, again)
    except OSError as e:
        if e.filename is None and e.strerror:  # a read that fails (a disk's I/O error) names no file by itself
            raise OSError(e.errno, e.strerror, path) from None
        raise


def _read_documents(
    path: str, input_format: str, stats: ReadStats, start: int, stop: int, fields: tuple[str, ...], again: bool
) -> Iterator[SourceDocument | Rejected]:
    fmt = guess_format(path) if input_format == "auto" else input_format
    read_lines = (
        functools.partial(LINE_READERS[fmt], fields=fields) if fields and fmt == "jsonl" else LINE_READERS.get(fmt)
    )
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
            yield from _counted(read_parquet_documents(raw, path, stats, fields), stats)
            return
        if stop >= 0:
            span = Span(start, stop, _start_of_line(raw, start))
            raw.seek(span.line_start)
            yield from _counted(read_lines(raw, path, stats, span), stats)
            if start == 0:
                _fingerprint(path, stats)
            return
        hashed = HashingReader(raw, stats)
        stream = decompressed_by_suffix(hashed, path)
        try:
            yield from _counted(read_lines(stream, path, stats, Span()), stats)
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


def _counted(documents: Iterator[SourceDocument | Rejected], stats: ReadStats) -> Iterator[SourceDocument | Rejected]:
    for doc in documents:
        stats.documents += isinstance(doc, SourceDocument)
        yield doc


def _start_of_line(f: BinaryIO, offset: int) -> int:
    """Where the line holding byte offset - 1 starts: the first line a reader of a span from `offset` looks at."""
    if offset == 0:
        return 0
    end = offset - 1
    while end > 0:
        step = min(end, 1 << 16)
        f.seek(end - step)
        newline = f.read(step).rfind(b"\n")
        if newline >= 0:
            return end - step + newline + 1
        end -= step
    return 0


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
