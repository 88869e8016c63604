"""Input files for `create` and `vocab`: documents Parquet, reference-format text, and JSONL(.zst).

Every reader yields `SourceDocument`s and fills a `ReadStats` (replacement characters, fingerprint), and every
file boundary is a document boundary. Files are opened through Beam's FileSystems, so gs:// works on Dataflow.

A large uncompressed text or JSONL file is shared between readers by byte spans (plan_reads): a document belongs
to the span that holds its first byte, so the spans together yield exactly the whole file's documents, and ids
that fall back to a position use the byte offset, which no split changes.
"""
from __future__ import annotations

import bisect
import bz2
import codecs
import errno
import fnmatch
import glob
import gzip
import hashlib
import io
import json
import math
import os
import re
import stat
import sys
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

import apache_beam as beam
import zstandard
from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems

from pipeline.documents import DOCUMENTS_GLOB
from pipeline.output import FILESYSTEM_ERRORS, filesystem_error_cause, is_remote

INPUT_FORMATS = ("documents", "text", "jsonl")
_REPLACEMENT_BYTES = "\ufffd".encode()


# What the decompressors raise for damaged data: a cut stream (EOFError), a bad gzip header or deflate stream, bad
# zstd frames. bz2 raises a bare OSError("Invalid data stream"), told apart from a filesystem's by its message.
DECOMPRESSION_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, zstandard.ZstdError, OSError)


def is_damaged_data(error: BaseException) -> bool:
    return not isinstance(error, OSError) or isinstance(error, gzip.BadGzipFile) or \
        str(error) == "Invalid data stream"


class InputError(ValueError):
    """Input the job cannot use; the message says which and why."""


@dataclass
class SourceDocument:
    id: str
    text: str | None = None              # paragraphs separated by blank lines, to be split into sentences
    sentences: list[str] | None = None   # already one sentence per entry (reference-format text)


@dataclass
class ReadStats:
    path: str
    size: int = 0
    sha256: str = ""
    documents: int = 0
    replaced_chars: int = 0   # U+FFFD substituted for invalid UTF-8 and for JSONL's lone surrogates
    skipped: dict[str, int] = field(default_factory=dict)


COMPRESSED_SUFFIXES = (".zst", ".gz", ".bz2")


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


class _HashingReader(io.RawIOBase):
    """Passes bytes through while hashing and counting them, so a file is read once."""

    def __init__(self, raw: BinaryIO, stats: ReadStats):
        self._raw, self._stats, self._sha = raw, stats, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._raw.read(len(buffer))
        buffer[:len(data)] = data
        self._sha.update(data)
        self._stats.size += len(data)
        return len(data)

    def close(self) -> None:
        self._stats.sha256 = self._sha.hexdigest()
        super().close()


# zstd input fed to the decompressor at a time: a piece inflates at most 32768-fold (run-length blocks), so what
# one call can return stays bounded however the file was made.
ZSTD_PIECE = 1024


class ZstdFrames(io.RawIOBase):
    """The frames of a zstd stream, one after another, in bounded memory. zstandard's own reader stops quietly
    where a cut file ends; this one notes it (`cut`) once everything before the cut has been read. Raising there
    instead would make a buffered reader above it drop what it had gathered."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.new_frame = raw, zstandard.ZstdDecompressor().decompressobj
        self.frame, self.input, self.at, self.output = self.new_frame(), memoryview(b""), 0, b""
        self.fed = self.cut = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.output:
            if self.at == len(self.input):
                self.input, self.at = memoryview(self.raw.read(1 << 16)), 0
                if not self.input:
                    self.cut = self.fed and not self.frame.eof
                    return 0
            piece = self.input[self.at:self.at + ZSTD_PIECE]
            self.at += len(piece)
            self.fed = True
            self.output = self.frame.decompress(piece)
            if self.frame.eof:  # what followed the frame's end starts the next frame
                self.input, self.at = memoryview(self.frame.unused_data + bytes(self.input[self.at:])), 0
                self.frame, self.fed = self.new_frame(), False
        size = min(len(buffer), len(self.output))
        buffer[:size] = self.output[:size]
        self.output = self.output[size:]
        return size


class UpToDamage(io.RawIOBase):
    """A decompressing reader's bytes up to the first damage (a cut, a bad header or block), taken one piece at a
    time, so that a buffered reader above keeps everything before the damage; `cut` then says the rest is lost.
    gzip's and bz2's own read(n) would drop the up to n bytes they had gathered when the damage stops them."""

    def __init__(self, decompressing: BinaryIO):
        self.decompressing, self.damaged = decompressing, False
        # read1 returns what one step gives; a raw reader's read is one step already.
        self._read = getattr(decompressing, "read1", decompressing.read)

    @property
    def cut(self) -> bool:
        return self.damaged or getattr(self.decompressing, "cut", False)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.damaged:
            return 0
        try:
            data = self._read(len(buffer))
        except DECOMPRESSION_ERRORS as e:
            if not is_damaged_data(e):
                raise
            self.damaged = True
            return 0
        buffer[:len(data)] = data
        return len(data)


def _decompressed(raw: BinaryIO, path: str) -> BinaryIO:
    name = path.lower()
    if name.endswith(".zst"):
        decompressing = ZstdFrames(raw)
    elif name.endswith(".gz"):
        decompressing = gzip.GzipFile(fileobj=raw)
    elif name.endswith(".bz2"):
        decompressing = bz2.BZ2File(raw)
    else:
        return raw
    return io.BufferedReader(UpToDamage(decompressing), MIB)


def _is_cut(stream: BinaryIO) -> bool:
    """Whether the stream (from _decompressed) stopped at damage."""
    return getattr(getattr(stream, "raw", None), "cut", False)


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines. A line that the damage of a compressed file cut short is part of the damage, not a line."""
    for raw in io.BufferedReader(stream, 1 << 20):
        if not raw.endswith(b"\n") and _is_cut(stream):
            return
        yield raw


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
    for raw in _lines(stream):
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


def read_jsonl_documents(stream: BinaryIO, path: str, stats: ReadStats, span: Span) -> Iterator[SourceDocument]:
    """One {"id", "text"} object per line, belonging to the span that holds its first byte; a missing id falls
    back to the file stem and the line's offset."""
    stem, pos = _stem(path), span.line_start
    for raw in _lines(stream):
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
            text = record["text"]
        except (ValueError, KeyError, TypeError):
            stats.skipped["bad_jsonl_line"] = stats.skipped.get("bad_jsonl_line", 0) + 1
            continue
        if not isinstance(text, str):
            stats.skipped["bad_jsonl_line"] = stats.skipped.get("bad_jsonl_line", 0) + 1
            continue
        doc_id = record.get("id")
        doc_id = str(doc_id) if doc_id is not None else f"{stem}:{at}"
        if "\\u" in line:  # only a \uXXXX escape can leave half a surrogate pair, which is no text at all
            (text, bad_text), (doc_id, bad_id) = _lone_surrogates_replaced(text), _lone_surrogates_replaced(doc_id)
            stats.replaced_chars += bad_text + bad_id
        yield SourceDocument(doc_id, text=text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogates_replaced(text: str) -> tuple[str, int]:
    """text with U+FFFD for every lone surrogate (json.loads makes them from unpaired escapes), and their count.
    Two ids that differ only there become equal; a bucket orders its documents by id and then text, so that
    stays reproducible."""
    return _LONE_SURROGATE.subn("\ufffd", text)


def read_parquet_documents(stream: BinaryIO, path: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """Documents Parquet (the extraction jobs' output): the id and text columns. Row groups are read one by one,
    so that a damaged one costs its own rows only (counted as damaged_parquet_row). A null id falls back to the
    file stem and the row's number in the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = stream.read()
    stats.size, stats.sha256 = len(data), hashlib.sha256(data).hexdigest()
    try:
        table = pq.ParquetFile(io.BytesIO(data))
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise InputError(f"{path} is not a readable Parquet file: {e}") from None
    names = set(table.schema_arrow.names)
    if not {"id", "text"} <= names:
        raise InputError(f"{path} lacks the id/text columns of a documents file (has {sorted(names)})")
    text_type = table.schema_arrow.field("text").type
    if not _holds_strings(text_type):
        raise InputError(f"{path} is not a documents file: its text column holds {text_type}, not strings")
    stem, first_row = _stem(path), 0
    for group in range(table.num_row_groups):
        rows, done = table.metadata.row_group(group).num_rows, 0
        batches = table.iter_batches(columns=["id", "text"], batch_size=1024, row_groups=[group])
        while True:
            try:
                batch = next(batches, None)
            except (OSError, pa.ArrowInvalid):  # what a damaged page, header or compressed block raises
                stats.skipped["damaged_parquet_row"] = stats.skipped.get("damaged_parquet_row", 0) + rows - done
                break
            if batch is None:
                break
            ids, texts = _values(batch.column(0), stats), _values(batch.column(1), stats)
            for row, (doc_id, text) in enumerate(zip(ids, texts), first_row + done):
                if text is None:
                    stats.skipped["null_text"] = stats.skipped.get("null_text", 0) + 1
                    continue
                yield SourceDocument(str(doc_id) if doc_id is not None else f"{stem}:row{row}", text=text)
            done += batch.num_rows
        first_row += rows


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


_READERS = {"text": read_text_documents, "jsonl": read_jsonl_documents}  # the line formats; Parquet is read whole

MIB = 2**20
MIN_RANGE_MB, MAX_RANGE_MB = 1, 32  # the bounds of auto_range_bytes


def auto_range_bytes(file_size: int) -> int:
    """The byte range one reader takes of a large file: a 64th of it, so that even a small file gives every local
    worker many ranges to even out their cost, but at least MIN_RANGE_MB and at most MAX_RANGE_MB (the unit of
    work on Dataflow)."""
    return int(min(MAX_RANGE_MB * MIB, max(MIN_RANGE_MB * MIB, file_size / 64)))


def is_splittable(path: str, input_format: str) -> bool:
    """Whether readers can share the file by byte spans: uncompressed text and JSONL."""
    fmt = guess_format(path) if input_format == "auto" else input_format
    return fmt in ("text", "jsonl") and not path.lower().endswith(COMPRESSED_SUFFIXES)


def plan_reads(path: str, size: int, input_format: str) -> list[tuple[str, int, int]]:
    """(path, start, stop) per reader of the file: byte spans of auto_range_bytes for a splittable file larger than
    one span, else one reader (0, -1) for the whole file."""
    span = auto_range_bytes(size)
    if not is_splittable(path, input_format) or size <= span:
        return [(path, 0, -1)]
    count = math.ceil(size / span)
    bounds = [size * i // count for i in range(count + 1)]
    return [(path, start, stop) for start, stop in zip(bounds, bounds[1:])]


def read_documents(path: str, input_format: str, stats: ReadStats, start: int = 0,
                   stop: int = -1) -> Iterator[SourceDocument]:
    """The documents of one file, or of its byte span [start, stop) (plan_reads), and the file's fingerprint.

    A whole file is hashed as it streams past; of a file read in spans, the reader of the first span hashes it."""
    try:
        yield from _read_documents(path, input_format, stats, start, stop)
    except OSError as e:
        if e.filename is None and e.strerror:  # a read that fails (a disk's I/O error) names no file by itself
            raise OSError(e.errno, e.strerror, path) from None
        raise


def _read_documents(path: str, input_format: str, stats: ReadStats, start: int,
                    stop: int) -> Iterator[SourceDocument]:
    fmt = guess_format(path) if input_format == "auto" else input_format
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        if fmt == "documents":
            yield from _counted(read_parquet_documents(raw, path, stats), stats)
            return
        if stop >= 0:
            span = Span(start, stop, _start_of_line(raw, start))
            raw.seek(span.line_start)
            yield from _counted(_READERS[fmt](raw, path, stats, span), stats)
            if start == 0:
                _fingerprint(path, stats)
            return
        hashed = _HashingReader(raw, stats)
        stream = _decompressed(hashed, path)
        try:
            yield from _counted(_READERS[fmt](stream, path, stats, Span()), stats)
            if _is_cut(stream):
                # What the file held before the damage was read; the rest is lost, and counted as one damaged file.
                # A file of no bytes is empty whatever its suffix (bz2 alone calls it cut), as in extract-books.
                hashed_to_the_end(hashed)
                if stats.size:
                    stats.skipped["damaged_compressed_file"] = stats.skipped.get("damaged_compressed_file", 0) + 1
        finally:
            hashed.close()


def _counted(documents: Iterator[SourceDocument], stats: ReadStats) -> Iterator[SourceDocument]:
    for doc in documents:
        stats.documents += 1
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
        hashed_to_the_end(_HashingReader(raw, stats))


def hashed_to_the_end(hashed: _HashingReader) -> None:
    """Read whatever a reader left of the file (a parser stops at damage, a span at its end) so the fingerprint
    covers the whole file, then finish it."""
    while hashed.read(MIB):
        pass
    hashed.close()


def merge_file_stats(parts: list[dict]) -> list[dict]:
    """Per-reader file stats (one per span) → one entry per file: counts summed, the fingerprint kept."""
    merged: dict[str, dict] = {}
    for part in sorted(parts, key=lambda p: p["path"]):
        entry = merged.setdefault(part["path"], {"path": part["path"], "size": 0, "sha256": "", "documents": 0,
                                                 "replaced_chars": 0, "skipped": {}})
        if part["sha256"]:
            entry["size"], entry["sha256"] = part["size"], part["sha256"]
        entry["documents"] += part["documents"]
        entry["replaced_chars"] += part["replaced_chars"]
        for reason, n in part["skipped"].items():
            entry["skipped"][reason] = entry["skipped"].get(reason, 0) + n
    return list(merged.values())


def match_on_worker(pattern: str) -> Iterator[tuple[str, int]]:
    """A file as matched at launch → (its path, size); a remote pattern, as a dry run leaves it, is matched now.
    An existing object is taken by its name before that name is read as a pattern, as find_inputs does."""
    if not is_remote(pattern):
        yield pattern, os.path.getsize(pattern)
        return
    literal = remote_file(pattern) if _has_glob(pattern) else None
    if literal is not None:
        yield literal
        return
    for m in FileSystems.match([pattern])[0].metadata_list:
        yield m.path, m.size_in_bytes


class PlanReads(beam.PTransform):
    """Input files (match_inputs) → (file path, start, stop) per reader, spread over the workers: a large text
    or JSONL file is read in byte spans (plan_reads), by several workers."""

    def __init__(self, inputs: list[str], input_format: str):
        super().__init__()
        self.inputs, self.input_format = inputs, input_format

    def expand(self, pbegin):
        # → (file path, size) → (file path, start, stop)
        return (pbegin
                | "list inputs" >> beam.Create(self.inputs)
                | "match inputs" >> beam.FlatMap(match_on_worker)
                | "plan spans" >> beam.FlatMap(lambda file, fmt: plan_reads(*file, fmt), self.input_format)
                | "spread reads" >> beam.Reshuffle())


# Paths that input discovery meets but does not read, by reason: (one, several, why), for the note and the manifest.
SKIPPED = {
    "folder": ("folder", "folders", "folders are not searched: name one to read the files directly in it"),
    "broken_symlink": ("broken symbolic link", "broken symbolic links", "the file it names does not exist"),
}
_SHOWN = 5  # paths a note names for each reason before it says how many more
_SPECIAL_FILES = {stat.S_IFIFO: "named pipe (FIFO)", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
                  stat.S_IFBLK: "block device"}


@dataclass
class FoundInputs:
    """Every input file once, with its size from the filesystem's metadata; the names that were dropped because
    they named a file already listed; and the paths met on the way that are not read, with why."""
    files: list[tuple[str, int]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)   # a name that was dropped → the path kept for its file
    skipped: dict[str, str] = field(default_factory=dict)   # a path not read → its reason, a key of SKIPPED

    def skipped_counts(self) -> dict[str, int]:
        """The paths left out by reason, every reason named (0 included), as a manifest records them."""
        counts = dict.fromkeys(SKIPPED, 0)
        for reason in self.skipped.values():
            counts[reason] += 1
        return counts

    def note(self) -> str | None:
        """One line for the user when an input file was named more than once or a path was left out, else None."""
        parts = []
        if self.aliases:
            named = ", ".join(f"{alias} (= {kept})" for alias, kept in sorted(self.aliases.items()))
            parts.append(f"{len(self.aliases)} input path(s) name a file already listed and were left out: {named}")
        for reason, (one, several, why) in SKIPPED.items():
            paths = sorted(path for path, r in self.skipped.items() if r == reason)
            if paths:
                more = f", and {len(paths) - _SHOWN:,} more" if len(paths) > _SHOWN else ""
                parts.append(f"left out {len(paths):,} {one if len(paths) == 1 else several} ({why}): "
                             f"{', '.join(paths[:_SHOWN])}{more}")
        return "; ".join(parts) or None


def find_inputs(patterns: list[str], allow_missing: bool = False) -> FoundInputs:
    """(path, size) of every file the patterns match, local or remote, sorted by path, each file once, and the
    paths met but not read.

    A name that exists is taken as it is, before it is read as a pattern, so that data[1].txt names that file.
    Patterns follow Beam's syntax (`*` and `?` within a name, `**` across folders). Sizes come from the
    filesystem's metadata, for gs://, s3:// and local paths alike, so the same bytes size a job the same way
    wherever they lie. A folder stands for the files directly in it, and so does a remote name that matches no
    object (object stores have no directories); the folders inside it, and broken symbolic links, are left out
    and listed in `skipped`. A local file named by several paths (relative, with '..', through a symlink) is
    listed once, under the first of its absolute paths in sorted order; its name is kept rather than the
    symlink's target, as ids and the input format come from the name.

    Raises InputError, before any output is touched, when a pattern matches no file or cannot be listed, and for
    a path that can never be read to its end: a FIFO, a socket or a device, and a broken symbolic link named
    itself. With allow_missing (a dry run or a graph drawing, which only need the job's shape and must work
    offline) local patterns may match nothing and remote ones are not listed.
    """
    by_identity: dict[object, list[tuple[str, int]]] = {}
    found = FoundInputs()
    for pattern in patterns:
        if is_remote(pattern) and allow_missing:
            continue
        files, skipped = _match_remote(pattern) if is_remote(pattern) else _match_local(pattern)
        if not files and not allow_missing:
            why = FoundInputs(skipped=skipped).note()
            raise InputError(f"no input files match {pattern!r}" + (f"; {why}" if why else ""))
        for path, size in files:
            by_identity.setdefault(_identity(path), []).append((path, size))
        found.skipped.update(skipped)
    for names in by_identity.values():
        kept = min(names)
        found.files.append(kept)
        found.aliases.update({path: kept[0] for path, _ in names if path != kept[0]})
    found.files.sort()
    # A folder left out by one pattern may be read through another (DIR and DIR/sub/*.txt).
    paths = [path for path, _ in found.files]
    found.skipped = {path: reason for path, reason in found.skipped.items()
                     if not _holds_one_of(path, paths)}
    return found


def _holds_one_of(folder: str, sorted_paths: list[str]) -> bool:
    at = bisect.bisect_left(sorted_paths, folder + "/")
    return at < len(sorted_paths) and sorted_paths[at].startswith(folder + "/")


def match_inputs(patterns: list[str], allow_missing: bool = False) -> list[tuple[str, int]]:
    """find_inputs' files, for a job that matches them again on its workers with Beam's matching (extract-wiki):
    (a pattern that matches exactly that file, size), the file's path with any glob character bracketed
    (data[1].xml → data[[]1].xml). What find_inputs left out is said in a note on stderr."""
    found = find_inputs(patterns, allow_missing)
    note = found.note()
    if note:
        print(f"note: {note}", file=sys.stderr)
    return [(glob.escape(path), size) for path, size in found.files]


def _has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def local_kind(path: str) -> str:
    """What a local path is: "file" (a regular file, or a link to one), "folder" (or a link to one),
    "broken_symlink", or the kind of special file it is (a FIFO, a socket, a device)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if os.path.islink(path) and e.errno != errno.EACCES:  # its target is missing, or a loop of links
            return "broken_symlink"
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return _SPECIAL_FILES.get(stat.S_IFMT(mode), "special file")


def refuse_unreadable(path: str, kind: str) -> None:
    """Raise InputError for a path of this kind (local_kind) that cannot be read as a file: reading a FIFO or a
    device would wait for bytes forever, and a broken symbolic link has nothing to read."""
    if kind == "broken_symlink":
        raise InputError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist")
    if kind not in ("file", "folder"):
        raise InputError(f"{path} is a {kind}, not a regular file; inputs are read from regular files only")


def local_glob(pattern: str) -> list[tuple[str, str]]:
    """(path, local_kind) of every local path an absolute pattern matches, sorted: files and other entries, and
    folders where the pattern has no `**` (with `**` folders are searched, except links to folders, which are
    matched like files). `*`, `?` and `[...]` stay within a name, as in a shell; `**` spans folders, as in Beam."""
    cut = min(i for i in (pattern.find(c) for c in "*?[") if i >= 0)
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    return _walk(pattern[:pattern.rfind("/", 0, cut)] or "/", matches, "**" in pattern, pattern.count("/"))


def local_tree(folder: str) -> list[tuple[str, str]]:
    """(path, local_kind) of everything below a local folder, at every depth, sorted; links to folders are
    listed, not searched."""
    return _walk(folder, None, True, 0)


def _walk(base: str, matches, deep: bool, depth: int) -> list[tuple[str, str]]:
    """What local_glob and local_tree list: the entries below base that `matches` (all, for None); with `deep`
    at every depth, else down to `depth` slashes."""
    def refuse(error: OSError):
        if not (isinstance(error, FileNotFoundError) and error.filename == base):  # no base: nothing matches
            raise InputError(f"cannot list {error.filename}: {error.strerror}")

    found = []
    for folder, folders, names in os.walk(base, onerror=refuse):
        for name in folders + names:
            path = os.path.join(folder, name)
            if matches is None or matches(path):
                kind = local_kind(path)
                if kind != "folder" or not deep or os.path.islink(path):
                    found.append((path, kind))
        if not deep:  # only folders above the pattern's depth can hold what it matches
            folders[:] = [name for name in folders if os.path.join(folder, name).count("/") < depth]
    return sorted(found)


def _match_local(pattern: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(files, paths left out → why) of a local name or pattern."""
    path = os.path.abspath(pattern)
    if os.path.lexists(path):
        kind = local_kind(path)
        if kind == "folder":
            return _local_folder(path)
        refuse_unreadable(path, kind)
        return [(path, os.path.getsize(path))], {}
    if not _has_glob(path):
        return [], {}
    return _classified(local_glob(path))


def _local_folder(folder: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    try:
        with os.scandir(folder) as entries:
            paths = sorted(entry.path for entry in entries)
    except OSError as e:
        raise InputError(f"cannot list {folder}: {e.strerror}") from None
    return _folder_files(folder, *_classified((path, local_kind(path)) for path in paths))


def _classified(entries) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(path, local_kind) → (files with sizes, the folders and broken links to leave out); a special file is
    refused."""
    files, skipped = [], {}
    for path, kind in entries:
        if kind == "file":
            files.append((path, os.path.getsize(path)))
        elif kind in SKIPPED:
            skipped[path] = kind
        else:
            refuse_unreadable(path, kind)
    return files, skipped


def _match_remote(pattern: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(files, paths left out → why) of a remote name or pattern; an object's name is taken as it is first."""
    if _has_glob(pattern):
        literal = remote_file(pattern)
        return ([literal] if literal else _listed(pattern)), {}
    files = [] if pattern.endswith("/") else _listed(pattern)
    if files:
        return files, {}
    folder = pattern.rstrip("/")
    direct, below = [], {}
    for path, size in _listed(glob.escape(folder) + "/**"):
        inside = path[len(folder) + 1:]
        if "/" in inside:
            below[f"{folder}/{inside.split('/')[0]}"] = "folder"
        else:
            direct.append((path, size))
    return _folder_files(folder, direct, below)


def remote_file(path: str) -> tuple[str, int] | None:
    """(path, size) of the object named exactly path, glob characters and all, or None when there is none."""
    try:
        if not FileSystems.exists(path):
            return None
        return path, FileSystems.get_filesystem(path).metadata(path).size_in_bytes
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot list {path}: {filesystem_error_cause(e)}") from None


def _folder_files(folder: str, files: list[tuple[str, int]],
                  skipped: dict[str, str]) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """What a folder named as input stands for, given the files directly in it and what was left out there: where
    it is an extraction's output, the documents its manifest lists (not the errors, the manifest, or anything else
    there); else every file, and what was left out."""
    sizes = dict(files)
    manifest = FileSystems.join(folder, "manifest.json")
    documents = _documents_listed_in(manifest) if manifest in sizes else None
    if documents is None:
        if manifest not in sizes and any(fnmatch.fnmatchcase(FileSystems.split(path)[1], DOCUMENTS_GLOB)
                                         for path in sizes):
            raise InputError(f"{folder} holds documents files but no manifest.json, so the extraction that wrote "
                             f"them did not finish: rerun it, or name the files to read them as they are")
        return files, skipped
    listed = []
    for entry in documents:
        path = FileSystems.join(folder, entry["path"])
        if path not in sizes:
            raise InputError(f"{manifest} lists {entry['path']}, which is not in {folder}")
        if sizes[path] != entry["bytes"]:
            raise InputError(f"{path} has {sizes[path]:,} bytes, not the {entry['bytes']:,} that {manifest} "
                             f"lists: it changed after the extraction wrote it")
        listed.append((path, sizes[path]))
    return listed, {}


def _documents_listed_in(manifest: str) -> list[dict] | None:
    """The documents files (path relative to the folder, bytes) in an extraction's manifest; None for a file
    named manifest.json that is not one."""
    try:
        with FileSystems.open(manifest, compression_type="uncompressed") as f:
            content = json.load(f)
        documents = content["outputs"]["documents"] if content.get("tool") == "bertcorpus" else None
        if not isinstance(documents, list):
            return None
        return [{"path": str(d["path"]), "bytes": int(d["bytes"])} for d in documents]
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot read {manifest}: {filesystem_error_cause(e)}") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _listed(pattern: str) -> list[tuple[str, int]]:
    try:
        metadata = FileSystems.match([pattern])[0].metadata_list
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot list {pattern}: {filesystem_error_cause(e)}") from None
    return [(m.path, m.size_in_bytes) for m in metadata if not m.path.endswith("/")]


def _identity(path: str) -> object:
    """What tells files apart: a local file's device and inode (one file under several names), else the path."""
    if is_remote(path):
        return path
    status = os.stat(path)
    return status.st_dev, status.st_ino
