"""The pages of a Parquet column chunk, from their headers: how large each one is once decompressed, found without
reading a page itself. A reader holds a whole page (and each value in it twice more, as Arrow's and as Python's), so
a page too large to hold, which a single long value makes (a few kilobytes of zstd can say 1.5 GB of text), is
refused before pyarrow reads it.

A page header is a Thrift struct in the compact protocol (the Parquet format's parquet.thrift): its field 2 is the
page's uncompressed size, field 3 its compressed size, and the page's bytes follow the header.
"""

from __future__ import annotations

from typing import BinaryIO

_READ = 256  # bytes read at a time from a header, which is small but for the statistics it may hold
# Thrift compact types: the width of the fixed-size ones; varints, binaries, containers and structs are read.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)
_MAX_NESTING = 32


class _Header:
    """A page header's bytes, read from the file as the parse needs them."""

    def __init__(self, stream: BinaryIO, at: int):
        self.stream, self.at, self.data, self.pos = stream, at, b"", 0

    def byte(self) -> int:
        if self.pos == len(self.data):
            self.stream.seek(self.at + len(self.data))
            more = self.stream.read(_READ)
            if not more:
                raise ValueError(f"a page header at byte {self.at:,} runs past the end of the file")
            self.data += more
        self.pos += 1
        return self.data[self.pos - 1]

    def skip(self, n: int) -> None:
        for _ in range(n):
            self.byte()

    def varint(self) -> int:
        shift = value = 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError(f"a page header at byte {self.at:,} holds a number of more than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)


def page_sizes(stream: BinaryIO, at: int) -> tuple[int, int, int]:
    """(uncompressed size, compressed size, header length) of the page whose header starts at byte `at`."""
    header = _Header(stream, at)
    found = _struct(header, 0, {2, 3})
    if 2 not in found or 3 not in found or found[2] < 0 or found[3] < 0:
        raise ValueError(f"the page header at byte {at:,} gives no page sizes")
    return found[2], found[3], header.pos


def largest_page(stream: BinaryIO, start: int, size: int) -> int:
    """The largest uncompressed size of the pages of a column chunk that takes `size` bytes from byte `start`."""
    largest, at, end = 0, start, start + size
    while at < end:
        uncompressed, compressed, length = page_sizes(stream, at)
        largest = max(largest, uncompressed)
        at += length + compressed
    return largest


def _struct(header: _Header, depth: int, wanted: set[int] = frozenset()) -> dict[int, int]:
    """Read a struct through its stop byte; the i32 fields whose ids are `wanted`, by id."""
    if depth > _MAX_NESTING:
        raise ValueError(f"a page header at byte {header.at:,} nests structs more than {_MAX_NESTING} deep")
    found, field_id = {}, 0
    while (b := header.byte()) != 0:
        kind, delta = b & 0x0F, b >> 4
        field_id = field_id + delta if delta else header.zigzag()
        if kind == _I32 and field_id in wanted:
            found[field_id] = header.zigzag()
        else:
            _skip(header, kind, depth)
    return found


def _skip(header: _Header, kind: int, depth: int) -> None:
    if kind in (_BOOL_TRUE, _BOOL_FALSE):
        return
    if kind == _BYTE:
        header.skip(1)
    elif kind in (_I16, _I32, _I64):
        header.varint()
    elif kind == _DOUBLE:
        header.skip(8)
    elif kind == _BINARY:
        header.skip(header.varint())
    elif kind in (_LIST, _SET):
        b = header.byte()
        count, element = b >> 4, b & 0x0F
        if count == 15:
            count = header.varint()
        for _ in range(count):
            _element(header, element, depth)
    elif kind == _MAP:
        count = header.varint()
        if count:
            b = header.byte()
            for _ in range(count):
                _element(header, b >> 4, depth)
                _element(header, b & 0x0F, depth)
    elif kind == _STRUCT:
        _struct(header, depth + 1)
    else:
        raise ValueError(f"a page header at byte {header.at:,} holds a field of no Thrift type ({kind})")


def _element(header: _Header, kind: int, depth: int) -> None:
    """A container's element: a bool takes a byte of its own there."""
    if kind in (_BOOL_TRUE, _BOOL_FALSE):
        header.skip(1)
    else:
        _skip(header, kind, depth)
