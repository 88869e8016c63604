"""The byte streams under create's and vocab's readers: decompression that keeps what precedes damage, and a
fingerprint (size, sha256) taken as a file streams past."""
from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import zlib
from typing import BinaryIO, Iterator

import zstandard

MIB = 2**20
COMPRESSED_SUFFIXES = (".zst", ".gz", ".bz2")
# Bytes of text per stored byte of a compressed file, measured on the bundled books and Wikipedia articles
# (docs/dataflow.md): jobs size their buckets and shards by the text they will hold, not by the bytes holding it.
TEXT_PER_STORED_BYTE = {".parquet": 2.5, ".zst": 2.7, ".gz": 2.6, ".bz2": 3.5, ".xz": 3.5}


def estimated_text_bytes(path: str, size: int) -> float:
    """How much text a file of `size` bytes holds, from its name alone: sizes come from the filesystem's
    listing, the same for a local and a remote copy of the file, and no file is opened at launch."""
    name = path.lower()
    return size * next((factor for suffix, factor in TEXT_PER_STORED_BYTE.items() if name.endswith(suffix)), 1.0)


# What the decompressors raise for damaged data: a cut stream (EOFError), a bad gzip header or deflate stream, bad
# zstd frames. bz2 raises a bare OSError("Invalid data stream"), told apart from a filesystem's by its message.
DECOMPRESSION_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, zstandard.ZstdError, OSError)


def is_damaged_data(error: BaseException) -> bool:
    return not isinstance(error, OSError) or isinstance(error, gzip.BadGzipFile) or \
        str(error) == "Invalid data stream"


class HashingReader(io.RawIOBase):
    """Passes bytes through while hashing and counting them, so a file is read once: `stats` (a file's ReadStats)
    gets the bytes read so far as its size, and the sha256 when the reader closes."""

    def __init__(self, raw: BinaryIO, stats):
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


def decompressed(raw: BinaryIO, path: str) -> BinaryIO:
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


def is_cut(stream: BinaryIO) -> bool:
    """Whether the stream (from _decompressed) stopped at damage."""
    return getattr(getattr(stream, "raw", None), "cut", False)


def lines_of(stream: BinaryIO) -> Iterator[bytes]:
    """The stream's lines. A line that the damage of a compressed file cut short is part of the damage, not a line."""
    for raw in io.BufferedReader(stream, 1 << 20):
        if not raw.endswith(b"\n") and is_cut(stream):
            return
        yield raw


def hashed_to_the_end(hashed: HashingReader) -> None:
    """Read whatever a reader left of the file (a parser stops at damage, a span at its end) so the fingerprint
    covers the whole file, then finish it."""
    while hashed.read(MIB):
        pass
    hashed.close()


