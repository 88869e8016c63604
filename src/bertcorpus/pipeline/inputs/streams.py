"""The byte streams under create's and vocab's readers: a fingerprint (size, sha256) taken as a file streams past,
the progress of its reading, and the text a file is estimated to hold. Its lines are long_lines.py's;
decompression is transforms/compression.py's."""

from __future__ import annotations

import hashlib
import io
from typing import BinaryIO

from bertcorpus.pipeline import tally
from bertcorpus.transforms.byte_coverage import SpanCoverage
from bertcorpus.transforms.compression import MIB

# Bytes of text per stored byte of a compressed file, measured on the bundled books and Wikipedia articles
# (docs/dataflow.md): jobs size their buckets and shards by the text they will hold, not by the bytes holding it.
TEXT_PER_STORED_BYTE = {".parquet": 2.5, ".zst": 2.7, ".gz": 2.6, ".bz2": 3.5, ".xz": 3.5}


def estimated_text_bytes(path: str, size: int) -> float:
    """How much text a file of `size` bytes holds, from its name alone: sizes come from the filesystem's
    listing, the same for a local and a remote copy of the file, and no file is opened at launch."""
    name = path.lower()
    return size * next((factor for suffix, factor in TEXT_PER_STORED_BYTE.items() if name.endswith(suffix)), 1.0)


class HashingReader(io.RawIOBase):
    """Passes bytes through while hashing and counting them, so a file is read once: `stats` (a file's ReadStats)
    gets the bytes read so far as its size, and the sha256 when the reader closes."""

    def __init__(self, raw: BinaryIO, stats):
        self._raw, self._stats, self._sha = raw, stats, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        self._sha.update(data)
        self._stats.size += len(data)
        return len(data)

    def close(self) -> None:
        self._stats.sha256 = self._sha.hexdigest()
        super().close()


class ReadProgress(io.RawIOBase):
    """Passes a file's bytes through (seeks too), counting toward the run's progress (tally.progress "bytes_read"),
    a MiB at a time, each byte of the reader's span [start, stop) once (stop None: to the file's end), however
    often it is read: what other readers read of the file is theirs to count, and a read again is no progress. A
    reader that finishes counts what it passed over of its span (a Parquet reader skips the columns it does not
    need), so the count of a run's readers ends at the size of its inputs."""

    def __init__(self, raw: BinaryIO, start: int = 0, stop: int | None = None):
        self._raw, self._pending = raw, 0
        self._coverage = SpanCoverage(start, stop)
        self._position = raw.tell() if raw.seekable() else 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._position = self._raw.seek(offset, whence)
        return self._position

    def tell(self) -> int:
        return self._raw.tell()

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._count(self._coverage.add(self._position, self._position + len(data)))
        self._position += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _count(self, n: int) -> None:
        self._pending += n
        if self._pending >= MIB:
            tally.progress("bytes_read", self._pending)
            self._pending = 0

    def __exit__(self, error_type, *rest):
        if error_type is None and not self.closed:  # the reader is done with its span: what it passed over counts
            coverage = self._coverage
            stop = coverage.stop
            if stop is None and self._raw.seekable():
                stop = self._raw.seek(0, io.SEEK_END)
            if stop is not None:
                self._pending += max(stop - coverage.start - coverage.covered, 0)
        return super().__exit__(error_type, *rest)

    def close(self) -> None:
        if not self.closed:
            tally.progress("bytes_read", self._pending)
            self._pending = 0
        super().close()


def hashed_to_the_end(hashed: HashingReader) -> None:
    """Read whatever a reader left of the file (a parser stops at damage, a span at its end) so the fingerprint
    covers the whole file, then finish it."""
    while hashed.read(MIB):
        pass
    hashed.close()
