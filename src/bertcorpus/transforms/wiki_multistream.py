"""Random access into Wikimedia multistream dumps.

A pages-articles-multistream dump is a concatenation of independent bz2 streams: the first holds the
<mediawiki><siteinfo> header, each later one 100 <page> elements, and the last the closing </mediawiki>. Its index
lists `offset:page_id:title` for every page, the offset being where that page's stream starts. Cutting the file at
stream offsets gives byte ranges that workers decompress and parse independently, so one large dump is read in
parallel instead of by a single reader.
"""

from __future__ import annotations

import bz2
import dataclasses
import io
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import BinaryIO

from bertcorpus.transforms.bz2_blocks import Damage
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_page_items import Page, PageError
from bertcorpus.transforms.wiki_pages import READ_ERRORS, iter_pages_from_chunks

# Compressed bytes read per step, and the most decompressed bytes produced per step: bz2 expands XML about 5x, but
# a crafted stream can expand far more, so the output is capped rather than trusted.
READ_BYTES = 1 << 18
MAX_OUTPUT_BYTES = 1 << 22

_INDEX_BLOCK_BYTES = 1 << 22
# Lines are matched by their leading newline (each block gets one prepended): a literal first character lets the
# regex engine skip ahead, where "^" with re.M would be tried at every byte of a gigabyte index.
_INDEX_OFFSET = re.compile(rb"\n(\d+):\d+:")
_BAD_INDEX_LINE = re.compile(rb"\n(?!\d+:\d+:)[^\n]+")


# A bz2 stream starts with "BZh", the block size digit, then a block's magic number or, for an empty stream, the
# end-of-stream magic; streams of a multistream dump are byte-aligned.
_STREAM_START = re.compile(rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)")
_STREAM_START_BYTES = 10
# The end of a dump, its root element's end tag, which may carry a namespace prefix.
_DUMP_END = re.compile(rb"</(?:[\w.-]+:)?mediawiki\s*>\s*$")


def read_stream_offsets(index_stream: BinaryIO) -> list[int]:
    """The sorted distinct stream offsets of a multistream index (bz2-compressed or plain); see read_stream_pages."""
    return sorted(read_stream_pages(index_stream))


def read_stream_pages(index_stream: BinaryIO) -> dict[int, int]:
    """The stream offsets of a multistream index (bz2-compressed or plain), in order, each with the number of pages
    the index lists there.

    Lines are `offset:page_id:title`, and titles may contain ':'. Raises ValueError on any other line, because a
    wrong index would silently lose or duplicate pages.
    """
    reader = open_decompressed(index_stream)
    offsets: Counter[bytes] = Counter()
    pending = b""
    lines_before = 0
    while True:
        try:
            chunk = reader.read(_INDEX_BLOCK_BYTES)
        except READ_ERRORS as exc:
            raise ValueError(f"the file is damaged ({type(exc).__name__}: {exc})") from None
        data = pending + chunk
        cut = data.rfind(b"\n") + 1 if chunk else len(data)
        block, pending = b"\n" + data[:cut], data[cut:]
        bad = _BAD_INDEX_LINE.search(block)
        if bad is not None:
            line = lines_before + block.count(b"\n", 0, bad.start() + 1)
            raise ValueError(f"line {line} is not `offset:page_id:title`: {bad.group()[1:81]!r}")
        offsets.update(_INDEX_OFFSET.findall(block))  # bytes, so the ~100 lines per stream are counted before int()
        lines_before += block.count(b"\n") - 1
        if not chunk:
            return dict(sorted((int(offset), pages) for offset, pages in offsets.items()))


def plan_byte_ranges(offsets: list[int], file_size: int, target_bytes: int) -> list[tuple[int, int]]:
    """Cover the whole file, [0, file_size), with contiguous ranges cut at stream offsets, of about target_bytes.

    The first range starts at byte 0, so streams that the index does not list are read too. A range ends at the
    first stream boundary that makes it target_bytes or more; the last range runs to the end of the file, and
    absorbs a remainder shorter than half a target rather than leaving a tiny range. Offsets at or beyond the end
    of the file are left out (the caller reports them: the file is cut, or the index is not its own).
    """
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, not {target_bytes}")
    if file_size <= 0:
        return []
    starts = sorted(offset for offset in set(offsets) if offset < file_size)
    ranges: list[tuple[int, int]] = []
    begin = 0
    for boundary in starts:
        if boundary - begin >= target_bytes:
            ranges.append((begin, boundary))
            begin = boundary
    if ranges and file_size - begin < target_bytes // 2:
        begin = ranges.pop()[0]
    ranges.append((begin, file_size))
    return ranges


def iter_range_pages(
    fileobj: BinaryIO, start: int, end: int, listed: Mapping[int, int] | None = None
) -> Iterator[Page | PageError]:
    """Yield the pages of the bz2 streams that start in bytes [start, end) of a multistream dump, in bounded memory.

    A range owns the streams that start in it, and reads the last one to its end even past `end`; a range that
    does not start on a stream begins at the first stream start in it. So ranges cut at any offsets read every
    stream exactly once, and an index that is wrong about some offsets loses nothing. A corrupt stream costs that
    stream: one PageError (its `where` names the range), and reading goes on at the next stream. The stream that
    ends the file must end with </mediawiki>, so a dump cut between two streams is found too.

    `listed` maps the index's stream offsets in the range to the number of pages it lists there: a damaged stream
    that the index lists then says how many pages it lost, counted (listed minus read).
    """
    streams = _StreamPages(listed, end)
    for item in iter_pages_from_chunks(_decompressed_chunks(fileobj, start, end, streams), fragment=True):
        if isinstance(item, PageError):
            item = PageError(f"bytes {start}-{end}, {item.where} of their XML", item.reason, item.detail, item.lost)
        if isinstance(item, Page) or item.lost is None:  # a page, or the error of one
            streams.read[streams.current] += 1
        yield item


class _StreamPages:
    """The pages read from each stream, as the chunks of the stream in progress are parsed, against the pages the
    index lists for it."""

    def __init__(self, listed: Mapping[int, int] | None, end: int = 0):
        self.listed = listed
        self.end = end  # the range's end: `listed` holds the index's streams before it, and none after
        self.read: Counter[int] = Counter()
        self.current = -1  # the stream whose chunks are being parsed

    def lost_in_stream(self, at: int) -> tuple[int | None, str]:
        """The pages the stream at `at` lost, counted where the index lists it, and what says so."""
        if not self.listed or at not in self.listed:
            return None, ""
        lost = max(self.listed[at] - self.read[at], 0)
        return lost, f"; the index lists {self.listed[at]:,} pages in it, {self.read[at]:,} of them read"

    def lost_between(self, first: int, last: int) -> tuple[int | None, str]:
        """The pages of the streams the index lists in bytes [first, last), which are not bz2 data; not told where
        the bytes run past the range's end, into streams the index lists for other ranges, which skip them."""
        if not self.listed or last > self.end:
            return None, ""
        lost = sum(pages for offset, pages in self.listed.items() if first <= offset < last)
        return lost, f"; the index lists {lost:,} pages in streams there"


def _decompressed_chunks(
    fileobj: BinaryIO, start: int, end: int, streams: _StreamPages | None = None
) -> Iterator[bytes | Damage]:
    """The XML of the streams that start in [start, end), one stream after another; damage as Damage items, with
    the pages lost where `streams` can count them."""
    streams = streams or _StreamPages(None)
    file_size = fileobj.seek(0, io.SEEK_END)

    def not_bz2(first: int, last: int | None, detail: str) -> Damage:
        lost, said = streams.lost_between(first, file_size if last is None else last)
        return Damage(detail + said, lost_pages=lost)

    at = start if _starts_stream(fileobj, start) else _next_stream_start(fileobj, start, end)
    if start == 0 and at is None:  # no range before this one reads these bytes
        yield not_bz2(0, end, "the file does not start with a bz2 stream")
    elif start == 0 and at:
        yield not_bz2(0, at, f"bytes 0-{at} are not a bz2 stream")
    while at is not None and at < end:
        tail = bytearray()
        streams.current = at
        stream_end, damage = yield from _keeping_the_tail(_decompress_stream(fileobj, at), tail)
        if damage is not None:
            lost, said = streams.lost_in_stream(at)
            yield dataclasses.replace(damage, detail=damage.detail + said, lost_pages=lost)
            if stream_end is None:
                return
            at = _next_stream_start(fileobj, at + 1, end)
            continue
        if stream_end >= file_size:
            if not _DUMP_END.search(tail):
                # The streams an index lists beyond the end are counted where the index is read.
                counted = "; the pages the index lists beyond it are counted with the index" if streams.listed else ""
                yield Damage(
                    f"the dump ends at byte {file_size} without </mediawiki>: it is cut{counted}",
                    "truncated",
                    lost_pages=0 if streams.listed else None,
                )
            return
        at = stream_end if _starts_stream(fileobj, stream_end) else _next_stream_start(fileobj, stream_end, file_size)
        if at != stream_end:  # the bytes after this range's stream are not bz2: nothing else will read them
            yield not_bz2(stream_end, at, f"bytes {stream_end}-{file_size if at is None else at} are not a bz2 stream")


def _keeping_the_tail(chunks, tail: bytearray):
    """Pass the chunks on, keeping their last bytes in `tail`; returns what the chunk generator returns."""
    while True:
        try:
            chunk = next(chunks)
        except StopIteration as stop:
            return stop.value
        tail[:] = (tail + chunk[-64:])[-64:]
        yield chunk


def _decompress_stream(fileobj: BinaryIO, start: int):
    """Yield the XML of the bz2 stream at `start`; returns (where it ends, None), or (where the damage stops the
    decompression, the Damage) with None for where when the file ends inside it."""
    fileobj.seek(start)
    position = start
    decompressor = bz2.BZ2Decompressor()
    while True:
        data = fileobj.read(READ_BYTES)
        if not data:
            return None, Damage(
                f"the file ends at byte {position}, inside the bz2 stream that starts at byte {start}", "truncated"
            )
        position += len(data)
        try:
            yield from _decompress(decompressor, data)
        except OSError as exc:
            return position, Damage(
                f"bad bz2 data in the stream that starts at byte {start}, before byte {position}: {exc}"
            )
        if decompressor.eof:
            return position - len(decompressor.unused_data), None


def _starts_stream(fileobj: BinaryIO, at: int) -> bool:
    fileobj.seek(at)
    return _STREAM_START.match(fileobj.read(_STREAM_START_BYTES)) is not None


def _next_stream_start(fileobj: BinaryIO, start: int, end: int) -> int | None:
    """The first offset in [start, end) where a bz2 stream starts, or None."""
    fileobj.seek(start)
    position, tail = start, b""
    while position < end:
        data = fileobj.read(min(READ_BYTES, end - position))
        if not data:
            return None
        block = tail + data
        found = _STREAM_START.search(block)
        if found is not None:
            return position - len(tail) + found.start()
        position += len(data)
        tail = block[-(_STREAM_START_BYTES - 1) :]
    # a stream that starts just before `end` is matched only with its bytes after `end`
    fileobj.seek(position)
    found = _STREAM_START.search(tail + fileobj.read(_STREAM_START_BYTES - 1))
    if found is not None and position - len(tail) + found.start() < end:
        return position - len(tail) + found.start()
    return None


def _decompress(decompressor: bz2.BZ2Decompressor, data: bytes) -> Iterator[bytes]:
    """Feed data and yield all the output it releases, at most MAX_OUTPUT_BYTES at a time."""
    output = decompressor.decompress(data, MAX_OUTPUT_BYTES)
    while True:
        if output:
            yield output
        if decompressor.eof or decompressor.needs_input:
            return
        output = decompressor.decompress(b"", MAX_OUTPUT_BYTES)
