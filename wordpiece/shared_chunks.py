"""Learned chunks shared between the worker processes of one local run, through append-only files.

Every worker's WordPieceTokenizer learns the chunks it has not seen through one HF call per document, and on
natural text most of that learning is the same in every worker: each meets the frequent words and most of the
rare ones. Learning costs a few microseconds per chunk, reading what another worker learned well under one.
So the workers of a local run keep one file each in a shared directory, append to it what their tokenizer
learned since the last time, and take in what the others appended. A chunk's ids are a pure function of the
chunk, so what a worker takes in, and when, never changes a result, only how much it learns itself.

A file is a series of records, each written by one append:
    int64 chunk count, int64 id count, int64 text bytes, int64 CRC-32 of the three sizes and of the rest; the
    chunks' UTF-8 joined by newlines (chunks never hold whitespace); int32 id count per chunk; int32 ids.
A reader takes only whole records, so a record still being appended is read on a later visit. A record that
fails its checksum or does not add up ends the reading of its file for good: the ids must be right, and a worker
can always learn a chunk itself.

A worker takes chunks in only while its table is less than half full, so that what the others learned never
crowds out its own learning: a full table is cleared and starts again (wordpiece/tokenizer.py).
"""
from __future__ import annotations

import os
import secrets
import zlib

import numpy as np

from wordpiece.tokenizer import WordPieceTokenizer

_HEADER = 4 * 8


class ChunkExchange:
    """One worker's side of the exchange in `directory`, for one tokenizer."""

    def __init__(self, directory: str, tokenizer: WordPieceTokenizer):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.tokenizer = tokenizer
        self.own_name = f"{os.getpid()}-{secrets.token_hex(6)}.chunks"
        self.read_to: dict[str, int] = {}  # another worker's file → the bytes of it already taken in
        self.damaged: set[str] = set()      # files with a record that failed its checksum
        self.shared_upto = (tokenizer.generation, 0)  # (table generation, rows) already in the own file

    def take_in(self) -> int:
        """Add to the tokenizer what the other workers appended since the last visit; the chunks added."""
        added = 0
        for name in sorted(os.listdir(self.directory)):
            if name == self.own_name or not name.endswith(".chunks") or name in self.damaged:
                continue
            with open(os.path.join(self.directory, name), "rb") as f:
                f.seek(self.read_to.get(name, 0))
                data = f.read()
            used = 0
            try:
                for record, size in _whole_records(data):
                    if self.tokenizer.known_chunks() < self.tokenizer.cache_limit // 2:
                        added += self.tokenizer.absorb(*record)
                    used += size
            except ValueError:
                self.damaged.add(name)
            self.read_to[name] = self.read_to.get(name, 0) + used
        # What was taken in is no news to the others: it is not appended again.
        generation, rows = self.shared_upto
        if generation == self.tokenizer.generation and rows + added == self.tokenizer.known_chunks():
            self.shared_upto = (generation, self.tokenizer.known_chunks())
        return added

    def share(self) -> None:
        """Append what the tokenizer learned since the last call."""
        generation, rows = self.shared_upto
        if generation != self.tokenizer.generation:  # the table was cleared: its rows are all new
            rows = 0
        if rows < self.tokenizer.known_chunks():
            record = _record(*self.tokenizer.learned(rows))
            fd = os.open(os.path.join(self.directory, self.own_name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(record)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        self.shared_upto = (self.tokenizer.generation, self.tokenizer.known_chunks())


def _record(chunks: list[str], counts: np.ndarray, ids: np.ndarray) -> bytes:
    text = "\n".join(chunks).encode("utf-8", "surrogatepass")
    sizes = np.array([len(chunks), len(ids), len(text)], np.int64).tobytes()
    body = b"".join([text, counts.astype(np.int32).tobytes(), ids.astype(np.int32).tobytes()])
    return sizes + np.int64(zlib.crc32(body, zlib.crc32(sizes))).tobytes() + body


def _whole_records(data: bytes):
    """((chunks, counts, ids), record size) for each whole record at the start of data; ValueError at a record
    that fails its checksum or does not add up."""
    offset = 0
    view = memoryview(data)
    while len(data) - offset >= _HEADER:
        chunks, ids, text, crc = (int(x) for x in np.frombuffer(data, np.int64, 4, offset))
        if min(chunks, ids, text) < 0:
            raise ValueError("a shared-chunks record with negative sizes")
        size = _HEADER + text + 4 * (chunks + ids)
        if len(data) - offset < size:
            return
        at = offset + _HEADER
        if zlib.crc32(view[at:offset + size], zlib.crc32(view[offset:offset + 24])) != crc:
            raise ValueError("a shared-chunks record failed its checksum")
        names = data[at:at + text].decode("utf-8", "surrogatepass").split("\n") if chunks else []
        at += text
        counts = np.frombuffer(data, np.int32, chunks, at).astype(np.int64)
        values = np.frombuffer(data, np.int32, ids, at + 4 * chunks)
        if len(names) != chunks or (counts < 0).any() or counts.sum() != ids:
            raise ValueError("a shared-chunks record whose parts do not add up")
        yield (names, counts, values), size
        offset += size
