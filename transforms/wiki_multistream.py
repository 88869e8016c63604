"""Random access into Wikimedia multistream dumps.

A pages-articles-multistream dump is a concatenation of independent bz2 streams: the first holds the
<mediawiki><siteinfo> header, each later one 100 <page> elements, and the last the closing </mediawiki>. Its index
lists `offset:page_id:title` for every page, the offset being where that page's stream starts. Cutting the file at
stream offsets gives byte ranges that workers decompress and parse independently, so one large dump is read in
parallel instead of by a single reader.
"""

from __future__ import annotations

import bz2
import re
from collections.abc import Iterator
from typing import BinaryIO

from transforms.wiki_pages import Page, PageError, iter_pages_from_chunks, open_dump

# Compressed bytes read per step, and the most decompressed bytes produced per step: bz2 expands XML about 5x, but
# a crafted stream can expand far more, so the output is capped rather than trusted.
READ_BYTES = 1 << 18
MAX_OUTPUT_BYTES = 1 << 22

_INDEX_BLOCK_BYTES = 1 << 22
# Lines are matched by their leading newline (each block gets one prepended): a literal first character lets the
# regex engine skip ahead, where "^" with re.M would be tried at every byte of a gigabyte index.
_INDEX_OFFSET = re.compile(rb"\n(\d+):\d+:")
_BAD_INDEX_LINE = re.compile(rb"\n(?!\d+:\d+:)[^\n]+")


class StreamRangeError(OSError):
    """A byte range that does not decompress as a sequence of whole bz2 streams."""


def read_stream_offsets(index_stream: BinaryIO) -> list[int]:
    """The sorted distinct stream offsets of a multistream index (bz2-compressed or plain).

    Lines are `offset:page_id:title`, and titles may contain ':'. Raises ValueError on any other line, because a
    wrong index would silently lose or duplicate pages.
    """
    reader = open_dump(index_stream)
    offsets: set[bytes] = set()
    pending = b""
    lines_before = 0
    while True:
        chunk = reader.read(_INDEX_BLOCK_BYTES)
        data = pending + chunk
        cut = data.rfind(b"\n") + 1 if chunk else len(data)
        block, pending = b"\n" + data[:cut], data[cut:]
        bad = _BAD_INDEX_LINE.search(block)
        if bad is not None:
            line = lines_before + block.count(b"\n", 0, bad.start() + 1)
            raise ValueError(f"line {line} is not `offset:page_id:title`: {bad.group()[1:81]!r}")
        offsets.update(_INDEX_OFFSET.findall(block))  # bytes, so the ~100 lines per stream dedupe before int()
        lines_before += block.count(b"\n") - 1
        if not chunk:
            return sorted(int(offset) for offset in offsets)


def plan_byte_ranges(offsets: list[int], file_size: int, target_bytes: int) -> list[tuple[int, int]]:
    """Cover [first page-stream offset, file_size) with contiguous ranges of whole streams of about target_bytes.

    The header stream before offsets[0] holds no pages and is left out. A range ends at the first stream boundary
    that makes it target_bytes or more; the last range runs to the end of the file so that it takes the closing
    stream too, and absorbs a remainder shorter than half a target rather than leaving a tiny range.
    """
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, not {target_bytes}")
    starts = sorted(set(offsets))
    if not starts:
        return []
    if starts[0] < 0 or starts[-1] >= file_size:
        raise ValueError(f"stream offsets {starts[0]}..{starts[-1]} do not fit in a file of {file_size} bytes")
    ranges: list[tuple[int, int]] = []
    begin = starts[0]
    for boundary in starts[1:]:
        if boundary - begin >= target_bytes:
            ranges.append((begin, boundary))
            begin = boundary
    if ranges and file_size - begin < target_bytes // 2:
        begin = ranges.pop()[0]
    ranges.append((begin, file_size))
    return ranges


def iter_range_pages(fileobj: BinaryIO, start: int, end: int) -> Iterator[Page | PageError]:
    """Yield the pages of the whole bz2 streams in bytes [start, end) of a multistream dump, in bounded memory.

    Damage (a range that does not start on a stream, a corrupt or cut stream) ends the range with one PageError
    after the pages read before it, as iter_pages does; its `where` names the range.
    """
    for item in iter_pages_from_chunks(_decompressed_chunks(fileobj, start, end), fragment=True):
        if isinstance(item, PageError):
            item = PageError(f"bytes {start}-{end}, {item.where} of their XML", item.reason, item.detail)
        yield item


def _decompressed_chunks(fileobj: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    """Decompress the streams in [start, end) one after another, restarting at each stream end."""
    fileobj.seek(start)
    position = start
    decompressor = bz2.BZ2Decompressor()
    mid_stream = False  # the current decompressor has taken bytes of a stream that has not ended yet
    while position < end:
        data = fileobj.read(min(READ_BYTES, end - position))
        if not data:
            raise StreamRangeError(f"the file ends at byte {position}, before the range end {end}")
        position += len(data)
        while data:
            if decompressor.eof:
                decompressor = bz2.BZ2Decompressor()
            try:
                yield from _decompress(decompressor, data)
            except OSError as exc:
                raise StreamRangeError(f"bad bz2 data before byte {position}: {exc}") from exc
            mid_stream = not decompressor.eof
            data = decompressor.unused_data if decompressor.eof else b""
    if mid_stream:
        raise StreamRangeError(f"the bz2 stream running into byte {end} is cut off by the range end")


def _decompress(decompressor: bz2.BZ2Decompressor, data: bytes) -> Iterator[bytes]:
    """Feed data and yield all the output it releases, at most MAX_OUTPUT_BYTES at a time."""
    output = decompressor.decompress(data, MAX_OUTPUT_BYTES)
    while True:
        if output:
            yield output
        if decompressor.eof or decompressor.needs_input:
            return
        output = decompressor.decompress(b"", MAX_OUTPUT_BYTES)
