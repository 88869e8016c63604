"""Reading bz2 files that may be damaged, losing only the damaged blocks.

bz2 compresses independent blocks of up to 900 kB, each opened by a 48-bit magic number at any bit position, and ends
a stream with another magic number and a checksum. Python's decompressor stops for good at the first corrupt block,
which in a single-stream Wikipedia dump would lose everything after it. This reader decompresses streams as usual and,
at a corrupt block, finds the next block's magic number, decodes the blocks from there one by one (each rewritten as
a stream of its own), and goes back to plain decompression at the next stream. The file is read once, in order, so it
works on any readable stream; what is held is the undecoded part of one or two blocks. Each gap says which bytes of
the file it lost, and how many decompressed bytes they held, estimated from how much the rest expanded.
"""

from __future__ import annotations

import bz2
import dataclasses
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

READ_BYTES = 1 << 16
MAX_OUTPUT_BYTES = 1 << 22
# A block holds at most 900 kB after run-length coding, and its Huffman coding grows incompressible data by a few
# percent at most: anything longer between two magic numbers is not one block.
MAX_BLOCK_BYTES = 1 << 20

BLOCK_MAGIC = 0x314159265359
END_MAGIC = 0x177245385090
_MAGIC_BITS = 48
_CRC_BITS = 32


@dataclass(frozen=True)
class Damage:
    """A gap in a stream of decompressed chunks: the bytes on either side do not join, because what lay between
    could not be decompressed.

    What the gap held is told where it can be: `lost_pages` counted (from a multistream index), or `lost_bytes`, an
    estimate of the decompressed bytes lost (from the compressed bytes lost and how much the data around them
    expanded). Both None: it cannot be told, as for bytes that are not compressed data at all."""

    detail: str
    reason: str = "read_error"
    lost_pages: int | None = None
    lost_bytes: int | None = None


def _magic_patterns(magic: int) -> list[tuple[int, bytes, int, int, int, int]]:
    """For each bit shift s (the magic starting s bits into a byte): the 5 bytes it fully covers from the second byte
    on, and the masks and values of the bits it covers in its first and seventh byte."""
    patterns = []
    for shift in range(8):
        window = (magic << (8 - shift)).to_bytes(7, "big")
        mask = (((1 << _MAGIC_BITS) - 1) << (8 - shift)).to_bytes(7, "big")
        patterns.append((shift, window[1:6], mask[0], window[0], mask[6], window[6]))
    return patterns


_PATTERNS = {BLOCK_MAGIC: _magic_patterns(BLOCK_MAGIC), END_MAGIC: _magic_patterns(END_MAGIC)}


def find_magic(data: bytes, magic: int, from_bit: int = 0) -> int | None:
    """The first bit offset >= from_bit at which `magic` lies whole in data, or None."""
    best = None
    for shift, middle, first_mask, first, last_mask, last in _PATTERNS[magic]:
        at = from_bit // 8 + 1
        while True:
            found = data.find(middle, at)
            if found < 0 or (last_mask and found + 5 >= len(data)):  # none, or its last bits are not read yet
                break
            start = found - 1
            bit = start * 8 + shift
            if (
                bit >= from_bit
                and data[start] & first_mask == first
                and (last_mask == 0 or data[found + 5] & last_mask == last)
            ):
                if best is None or bit < best:
                    best = bit
                break
            at = found + 1
    return best


def decode_block(data: bytes, start_bit: int, end_bit: int) -> bytes:
    """Decompress the one block in bits [start_bit, end_bit) of data by rewriting it as a stream of its own: the
    header (with the largest block size, which fits a block of any size), the block, the end magic and, as the
    stream's checksum, the block's own (the two are equal for a stream of one block). Raises OSError when the block
    is corrupt."""
    length = end_bit - start_bit
    if length <= _MAGIC_BITS + _CRC_BITS:
        raise OSError("no room for a block between two magic numbers")
    first, last = start_bit // 8, (end_bit + 7) // 8
    bits = int.from_bytes(data[first:last], "big")
    block = (bits >> (last * 8 - end_bit)) & ((1 << length) - 1)
    crc = (block >> (length - _MAGIC_BITS - _CRC_BITS)) & ((1 << _CRC_BITS) - 1)
    stream = (((block << _MAGIC_BITS) | END_MAGIC) << _CRC_BITS) | crc
    size = length + _MAGIC_BITS + _CRC_BITS
    padded = stream << (-size % 8)
    decompressor = bz2.BZ2Decompressor()
    output = decompressor.decompress(b"BZh9" + padded.to_bytes((size + 7) // 8, "big"))
    if not decompressor.eof:
        raise OSError("the block does not end where the next one starts")
    return output


class Bz2Reader(io.RawIOBase):
    """A readable bz2 file whose chunks() yields the decompressed bytes with a Damage where blocks were lost.

    read() raises OSError at the first damage instead, as a plain bz2 reader would, for readers that cannot skip."""

    def __init__(self, raw: BinaryIO, close_raw: bool = False):
        self._raw, self._close_raw = raw, close_raw
        self._chunks: Iterator[bytes | Damage] | None = None
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if self._close_raw:
            self._raw.close()
        super().close()

    def chunks(self) -> Iterator[bytes | Damage]:
        yield from _Bz2Chunks(self._raw).chunks()  # a generator of this reader's, so it stays open while it runs

    def readinto(self, buffer) -> int:
        if self._chunks is None:
            self._chunks = self.chunks()
        while not self._pending:
            item = next(self._chunks, b"")
            if isinstance(item, Damage):
                raise OSError(item.detail)
            if not item:
                return 0
            self._pending = memoryview(item)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


class _Bz2Chunks:
    """The decompression of one file: plain stream by stream, block by block after damage until the stream ends."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.data = b""  # compressed bytes read and not yet decoded
        self.offset = 0  # file offset of data[0]
        self.decoded_to = 0  # the blocks that end before this file offset have been decompressed
        # Bytes out and compressed bits in of what was decompressed, for the estimate of what a gap held.
        self.output_bytes = 0
        self.decoded_bits = 0

    def chunks(self) -> Iterator[bytes | Damage]:
        while self.data or self._read():
            if self.data[:3] == b"BZh" and self.data[3:4].isdigit() and self.data[3:4] != b"0":
                yield from self._stream()
            else:
                self.decoded_to = self.offset
                yield from self._blocks_after_damage(
                    Damage(f"the bytes at {self.offset} are not a bz2 stream"), compressed=False
                )

    def _read(self) -> bool:
        more = self.raw.read(READ_BYTES)
        self.data += more
        return bool(more)

    def _drop(self, count: int) -> None:
        self.data, self.offset = self.data[count:], self.offset + count

    def _stream(self) -> Iterator[bytes | Damage]:
        """Decompress the stream at the start of data; at damage, go on block by block."""
        decompressor = bz2.BZ2Decompressor()
        # The pieces fed since the one in which output last came: the block in progress starts in them.
        window: list[bytes] = []
        window_offset = position = stream_start = self.offset
        self.decoded_to = self.offset + len(b"BZh9")  # where the first block starts
        piece, self.data = self.data, b""
        while True:
            piece = piece or self.raw.read(READ_BYTES)
            if not piece:
                self.decoded_bits += (self.decoded_to - stream_start) * 8
                self.data, self.offset = b"".join(window), window_offset
                yield from self._blocks_after_damage(
                    Damage(f"the file ends at byte {position}, inside a bz2 stream", "truncated")
                )
                return
            try:
                produced = yield from self._decompress(decompressor, piece)
            except OSError as exc:
                self.decoded_bits += (self.decoded_to - stream_start) * 8
                self.data, self.offset = b"".join([*window, piece]), window_offset
                yield from self._blocks_after_damage(Damage(f"bad bz2 data after byte {window_offset}: {exc}"))
                return
            if produced:
                window, window_offset, self.decoded_to = [piece], position, position + len(piece)
            else:
                window.append(piece)
            position += len(piece)
            if decompressor.eof:
                self.data, self.offset = decompressor.unused_data, position - len(decompressor.unused_data)
                self.decoded_bits += (self.offset - stream_start) * 8
                return
            piece = b""

    def _decompress(self, decompressor: bz2.BZ2Decompressor, piece: bytes):
        """Feed a piece and yield its output, at most MAX_OUTPUT_BYTES at a time; returns whether there was any."""
        output = decompressor.decompress(piece, MAX_OUTPUT_BYTES)
        produced = False
        while output:
            produced = True
            self.output_bytes += len(output)
            yield output
            if decompressor.eof or decompressor.needs_input:
                break
            output = decompressor.decompress(b"", MAX_OUTPUT_BYTES)
        return produced

    def _blocks_after_damage(self, damage: Damage, compressed: bool = True) -> Iterator[bytes | Damage]:
        """Decode block by block from the first block magic in data to the stream's end, yielding `damage` where
        the first block is lost, and one more Damage for each later run of lost blocks.

        Data starts where the block in progress when decompression failed may start: the blocks that end before
        `decoded_to` were decompressed already and are left out, and a first block that starts after it means that
        one was lost before it. When every block decodes (the damage was in the stream's checksum), nothing was
        lost and nothing is reported. A Damage is yielded where its run of lost blocks ends, so that it can say how
        many compressed bytes were lost; `compressed=False` says that the first run is bytes that are not bz2 data,
        whose content cannot be estimated."""
        pending: Damage | None = damage  # reported with the first lost block, if any is lost
        gap: tuple[Damage, int, bool] | None = None  # a run of lost blocks: its Damage, start bit, whether estimable
        at, is_end = self._find_marker()
        last_end = self.decoded_to * 8  # the file bit where the last block decoded ends
        if at is None or self._bit(at) > last_end:
            gap, pending = (damage, last_end, compressed), None
        while at is not None and not is_end:
            end, end_is_end = self._marker_after_block(at)
            lost = None
            if end is None:  # the block never ends: the file ends, or garbage follows it
                lost = Damage(f"the bz2 block at byte {self.offset + at // 8} does not end", "truncated")
            else:
                try:
                    output = decode_block(self.data, at, end)
                except OSError as exc:
                    lost = Damage(f"bad bz2 block at byte {self.offset + at // 8}: {exc}")
            if lost is not None:
                if gap is None:
                    gap = (pending or lost, self._bit(at), True)
                pending = None
            else:
                last_end = self._bit(end)
                if last_end > self.decoded_to * 8:
                    self.output_bytes += len(output)
                    self.decoded_bits += end - at
                    if gap is not None:
                        yield self._gap(*gap, self._bit(at))
                        gap = None
                    yield output
            if end is None:
                self._drop(at // 8 + 1)
                at, is_end = self._find_marker()
            else:
                self._drop(at // 8)
                at, is_end = end - at // 8 * 8, end_is_end
        if at is None:  # the file ended
            if gap is None and pending is not None:  # after whole blocks, without the stream's end
                gap = (pending, last_end, True)
            if gap is not None:
                yield self._gap(*gap, self._bit(len(self.data) * 8))
            self._drop(len(self.data))
        else:
            if gap is not None:
                yield self._gap(*gap, self._bit(at))
            self._drop_through_end(at)

    def _bit(self, bit_in_data: int) -> int:
        return self.offset * 8 + bit_in_data

    def _gap(self, damage: Damage, start_bit: int, estimable: bool, end_bit: int) -> Damage:
        """The Damage of a run of lost compressed bits, with the decompressed bytes it held estimated from how much
        the data decompressed so far expanded."""
        start, end = start_bit // 8, (end_bit + 7) // 8
        lost_bytes = None
        if estimable and self.output_bytes:  # else there is nothing to compare with
            lost_bytes = round((end_bit - start_bit) * self.output_bytes / self.decoded_bits)
        detail = f"{damage.detail}; bytes {start}-{end} of the file could not be decompressed"
        return dataclasses.replace(damage, detail=detail, lost_bytes=lost_bytes)

    def _find_marker(self) -> tuple[int | None, bool]:
        """The first block or end magic in data, reading on and dropping what holds none: (its bit, whether it is
        the end magic), or (None, False) at the end of the file."""
        while True:
            found = self._first_marker(0)
            if found[0] is not None:
                return found
            self._drop(max(len(self.data) - _MAGIC_BITS // 8, 0))  # a magic may begin in the last bytes
            if not self._read():
                return None, False

    def _marker_after_block(self, at: int) -> tuple[int | None, bool]:
        """Where the block at bit `at` ends: the next block or end magic, reading on; (None, False) when the file
        ends first or the block would be longer than any bz2 block."""
        while True:
            found = self._first_marker(at + _MAGIC_BITS)
            if found[0] is not None:
                return found
            if len(self.data) - at // 8 > MAX_BLOCK_BYTES or not self._read():
                return None, False

    def _first_marker(self, from_bit: int) -> tuple[int | None, bool]:
        block = find_magic(self.data, BLOCK_MAGIC, from_bit)
        end = find_magic(self.data, END_MAGIC, from_bit)
        if end is not None and (block is None or end < block):
            return end, True
        return block, False

    def _drop_through_end(self, end_bit: int) -> None:
        """Drop the stream up to its end: the end magic, the checksum, the padding to a byte."""
        stream_end = (end_bit + _MAGIC_BITS + _CRC_BITS + 7) // 8
        while len(self.data) < stream_end and self._read():
            pass
        self._drop(min(stream_end, len(self.data)))
