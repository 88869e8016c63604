"""Input files for `create` and `vocab`: documents Parquet, reference-format text, and JSONL(.zst).

Every reader yields `SourceDocument`s and fills a `ReadStats` (replacement characters, fingerprint), and every
file boundary is a document boundary. Files are opened through Beam's FileSystems, so gs:// works on Dataflow.
"""
from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

from apache_beam.io.filesystems import FileSystems

INPUT_FORMATS = ("documents", "text", "jsonl")
_REPLACEMENT_BYTES = "\ufffd".encode()


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
    replaced_chars: int = 0   # U+FFFD substituted for invalid UTF-8
    skipped: dict[str, int] = field(default_factory=dict)


def guess_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".parquet"):
        return "documents"
    if name.endswith((".jsonl", ".jsonl.zst", ".jsonl.gz", ".json")):
        return "jsonl"
    return "text"


def decode_line(raw: bytes, stats: ReadStats) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        stats.replaced_chars += text.count("\ufffd") - raw.count(_REPLACEMENT_BYTES)
        return text


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


def _decompressed(raw: BinaryIO, path: str) -> BinaryIO:
    name = path.lower()
    if name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw)
    return raw


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".zst", ".gz", ".bz2", ".jsonl", ".json", ".parquet", ".txt"):
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
    return base


def read_text_documents(stream: BinaryIO, path: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """Reference format: one sentence per line, blank lines between documents; the file ends a document."""
    stem, index, sentences = _stem(path), 0, []
    for raw in io.BufferedReader(stream, 1 << 20):
        line = decode_line(raw, stats).strip()
        if line:
            sentences.append(line)
        elif sentences:
            yield SourceDocument(f"{stem}:{index}", sentences=sentences)
            index, sentences = index + 1, []
    if sentences:
        yield SourceDocument(f"{stem}:{index}", sentences=sentences)


def read_jsonl_documents(stream: BinaryIO, path: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """One {"id", "text"} object per line; a missing id falls back to file stem and line number."""
    stem = _stem(path)
    for number, raw in enumerate(io.BufferedReader(stream, 1 << 20)):
        line = decode_line(raw, stats).strip()
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
        yield SourceDocument(str(doc_id) if doc_id is not None else f"{stem}:{number}", text=text)


def read_parquet_documents(stream: BinaryIO, path: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """Documents Parquet (the extraction jobs' output): the id and text columns."""
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
    for batch in table.iter_batches(columns=["id", "text"], batch_size=1024):
        for doc_id, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            if text is None:
                stats.skipped["null_text"] = stats.skipped.get("null_text", 0) + 1
                continue
            yield SourceDocument(str(doc_id), text=text)


_READERS = {"text": read_text_documents, "jsonl": read_jsonl_documents, "documents": read_parquet_documents}


def read_documents(path: str, input_format: str, stats: ReadStats) -> Iterator[SourceDocument]:
    """All documents of one file, hashing the file as it streams past."""
    fmt = guess_format(path) if input_format == "auto" else input_format
    with FileSystems.open(path, compression_type="uncompressed") as raw:
        if fmt == "documents":
            for doc in read_parquet_documents(raw, path, stats):
                stats.documents += 1
                yield doc
            return
        hashed = _HashingReader(raw, stats)
        try:
            for doc in _READERS[fmt](_decompressed(hashed, path), path, stats):
                stats.documents += 1
                yield doc
        finally:
            hashed.close()


def match_inputs(patterns: list[str], allow_missing: bool = False) -> list[tuple[str, int]]:
    """(path, size) of every file the local patterns match; remote patterns are matched on the workers.

    Raises InputError when a local pattern matches nothing, before any output is touched (unless
    allow_missing: a dry run or a graph drawing only needs the job's shape).
    """
    found: list[tuple[str, int]] = []
    for pattern in patterns:
        if "://" in pattern:
            continue
        if os.path.isdir(pattern):
            pattern = os.path.join(pattern, "*")
        metadata = FileSystems.match([pattern])[0].metadata_list
        files = [(m.path, m.size_in_bytes) for m in metadata if not os.path.isdir(m.path)]
        if not files and not allow_missing:
            raise InputError(f"no input files match {pattern!r}")
        found.extend(files)
    return sorted(set(found))
