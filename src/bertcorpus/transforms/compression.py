"""Compressed byte streams: which compression a file's first bytes name, and readers that decompress in bounded
memory and keep everything that precedes damage.

Two ways in. open_decompressed trusts the content (a dump that was renamed, or has no suffix, still reads);
decompressed_by_suffix trusts the name (the documents and line formats, where `.jsonl.zst` names the format and the
compression together). Both give the same readers:

    bzip2   the reader of bz2_blocks.py (a corrupt block costs that block) or Python's bz2
    gzip    Python's gzip           xz   Python's lzma          zstd   ZstdFrames, below
    7z, zip, lz4, rar               named, not read: UnreadableCompression says which
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import zlib
from typing import BinaryIO

import zstandard

from bertcorpus.transforms.bz2_blocks import Bz2Reader

MIB = 2**20
COMPRESSED_SUFFIXES = (".zst", ".gz", ".bz2")
# Signatures at the start of a file, and the compression each names. bzip2's header ("BZh" and a level) is followed
# by a block's magic, or by the end-of-stream magic in a stream that holds nothing.
SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"(\xb5/\xfd", "zstd"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"Rar!\x1a\x07", "rar"),
)
_BZIP2 = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
HEAD_BYTES = 10  # enough of a file's start for every signature above
# zstd input fed to the decompressor at a time: a piece inflates at most 32768-fold (run-length blocks), so what
# one call can return stays bounded however the file was made.
ZSTD_PIECE = 1024
# What the decompressors raise for damaged data: a cut stream (EOFError), a bad gzip header or deflate stream, bad
# xz or zstd frames. bz2 raises a bare OSError("Invalid data stream"), told apart from a filesystem's by its message.
DECOMPRESSION_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, lzma.LZMAError, zstandard.ZstdError, OSError)


def compression_of(head: bytes) -> str | None:
    """The compression (a name of SIGNATURES, or "bzip2") whose signature the bytes start with, or None."""
    if _BZIP2.match(head):
        return "bzip2"
    return next((name for signature, name in SIGNATURES if head.startswith(signature)), None)


def is_damaged_data(error: BaseException) -> bool:
    """Whether an error of DECOMPRESSION_ERRORS is damage in the data rather than trouble reading the file."""
    return not isinstance(error, OSError) or isinstance(error, gzip.BadGzipFile) or str(error) == "Invalid data stream"


def open_decompressed(path_or_fileobj: str | os.PathLike | BinaryIO) -> BinaryIO:
    """A file's bytes, decompressed as its first bytes say: bzip2 (single or multistream), gzip, xz or zstd, or
    the bytes as they are. A compression that is not read gives a reader that raises UnreadableCompression on its
    first read, naming it. A zstd file cut inside a frame raises EOFError once everything before the cut has been
    read, as the gzip, bz2 and xz readers do. The caller closes the reader."""
    if isinstance(path_or_fileobj, (str, os.PathLike)):
        raw: BinaryIO = open(path_or_fileobj, "rb")
    else:
        raw = path_or_fileobj
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    compression = compression_of(raw.peek(HEAD_BYTES)[:HEAD_BYTES])  # type: ignore[attr-defined]
    if compression == "bzip2":
        return Bz2Reader(raw, close_raw=isinstance(path_or_fileobj, (str, os.PathLike)))  # type: ignore[return-value]
    if compression == "gzip":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if compression == "xz":
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    if compression == "zstd":
        return ZstdFrames(raw, raise_at_cut=True)  # type: ignore[return-value]
    if compression is not None:
        return _Unreadable(compression)  # type: ignore[return-value]
    return raw


def decompressed_by_suffix(raw: BinaryIO, path: str) -> BinaryIO:
    """The bytes of a .zst, .gz or .bz2 file decompressed up to the first damage (is_cut then says so); any other
    file's bytes as they are."""
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
    """Whether a stream from decompressed_by_suffix stopped at damage."""
    return getattr(getattr(stream, "raw", None), "cut", False)


class UnreadableCompression(OSError):
    """The file is compressed in a format that is not read; the message names it."""


class _Unreadable(io.RawIOBase):
    """A reader of a file whose compression is not read: its first read raises, naming the compression."""

    def __init__(self, compression: str):
        self.compression = compression

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        raise UnreadableCompression(
            f"the file is {self.compression}-compressed, which is not read: decompress it, "
            "or recompress it as .bz2, .gz, .xz or .zst"
        )


class ZstdFrames(io.RawIOBase):
    """The frames of a zstd stream, one after another, in bounded memory. zstandard's own reader stops quietly
    where a cut file ends; this one says so once everything before the cut has been read: it raises EOFError
    (raise_at_cut), or notes it in `cut`, for a buffered reader above, which would drop what it had gathered if
    its read raised."""

    def __init__(self, raw: BinaryIO, raise_at_cut: bool = False):
        self.raw, self.raise_at_cut, self.new_frame = raw, raise_at_cut, zstandard.ZstdDecompressor().decompressobj
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
                    if self.cut and self.raise_at_cut:
                        raise EOFError("the file ends inside a zstd frame")
                    return 0
            piece = self.input[self.at : self.at + ZSTD_PIECE]
            self.at += len(piece)
            self.fed = True
            self.output = self.frame.decompress(piece)
            if self.frame.eof:  # what followed the frame's end starts the next frame
                self.input, self.at = memoryview(self.frame.unused_data + bytes(self.input[self.at :])), 0
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
        buffer[: len(data)] = data
        return len(data)
