"""Multistream index parsing, byte-range planning and range decoding, on real index and page samples."""

from __future__ import annotations

import bz2
import io
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest
from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, SZLWIKI_INDEX, build_multistream, flip_bytes, read_xml, split_dump

from transforms import wiki_multistream
from transforms.wiki_multistream import iter_range_pages, plan_byte_ranges, read_stream_offsets
from transforms.wiki_pages import Page, PageError, iter_pages, open_dump


@cache
def enwiki_pages() -> tuple[Page, ...]:
    with open_dump(ENWIKI_2014) as stream:
        return tuple(p for p in iter_pages(stream) if isinstance(p, Page))


@pytest.fixture(scope="module")
def multistream(tmp_path_factory) -> tuple[Path, Path]:
    return build_multistream(ENWIKI_2014, tmp_path_factory.mktemp("multistream"))


def read_ranges(dump: Path, ranges: list[tuple[int, int]]) -> list[Page | PageError]:
    items: list[Page | PageError] = []
    with open(dump, "rb") as fileobj:
        for start, end in ranges:
            items += iter_range_pages(fileobj, start, end)
    return items


# --- index ---------------------------------------------------------------------------------------------------------


def test_real_index_offsets():
    with open(SZLWIKI_INDEX, "rb") as index:
        offsets = read_stream_offsets(index)
    assert len(offsets) == 726
    assert offsets == sorted(set(offsets))
    assert offsets[:3] == [611, 94669, 104908]
    assert offsets[-1] == 16594417
    lines = bz2.decompress(SZLWIKI_INDEX.read_bytes())
    assert lines.count(b"\n") == 72546
    assert read_stream_offsets(io.BytesIO(lines)) == offsets  # plain text reads the same


def test_titles_with_colons_and_no_final_newline():
    index = b"600:1:Muster:Artikel: tydnia\n600:2:A\n1200:3:Kategoryjo:B:C"
    assert read_stream_offsets(io.BytesIO(index)) == [600, 1200]


def test_malformed_index_line_is_an_error():
    lines = bz2.decompress(SZLWIKI_INDEX.read_bytes()).split(b"\n")
    lines.insert(1000, b"<html>not an index</html>")
    with pytest.raises(ValueError, match="line 1001"):
        read_stream_offsets(io.BytesIO(b"\n".join(lines)))


# --- planning ------------------------------------------------------------------------------------------------------


def check_plan(ranges: list[tuple[int, int]], offsets: list[int], file_size: int) -> None:
    assert ranges[0][0] == offsets[0]
    assert ranges[-1][1] == file_size
    assert all(a[1] == b[0] for a, b in pairwise(ranges))  # contiguous
    assert all(start < end for start, end in ranges)
    assert {start for start, _ in ranges} <= set(offsets)  # whole streams only


def test_plan_byte_ranges_on_the_real_index():
    with open(SZLWIKI_INDEX, "rb") as index:
        offsets = read_stream_offsets(index)
    file_size = offsets[-1] + 40_000
    ranges = plan_byte_ranges(offsets, file_size, 1_000_000)
    check_plan(ranges, offsets, file_size)
    sizes = [end - start for start, end in ranges]
    assert all(size >= 1_000_000 for size in sizes)
    largest_stream = max(b - a for a, b in pairwise([*offsets, file_size]))
    assert all(size < 1_000_000 + largest_stream for size in sizes[:-1])
    assert 10 <= len(ranges) <= 17  # 16.6 MB of page streams
    # One range per stream when the target is tiny; one range for everything when it is huge.
    assert plan_byte_ranges(offsets, file_size, 1) == list(pairwise([*offsets, file_size]))
    assert plan_byte_ranges(offsets, file_size, 1 << 40) == [(611, file_size)]


def test_plan_byte_ranges_merges_a_small_remainder():
    assert plan_byte_ranges([100, 200, 300, 400], 420, 100) == [(100, 200), (200, 300), (300, 420)]
    assert plan_byte_ranges([100, 200, 300, 400], 460, 100) == [(100, 200), (200, 300), (300, 400), (400, 460)]


def test_plan_byte_ranges_rejects_bad_input():
    assert plan_byte_ranges([], 1000, 10) == []
    with pytest.raises(ValueError):
        plan_byte_ranges([100, 2000], 1000, 10)
    with pytest.raises(ValueError):
        plan_byte_ranges([100], 1000, 0)


# --- decoding ranges -----------------------------------------------------------------------------------------------


def test_built_multistream_is_laid_out_like_wikimedia(multistream):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    assert len(offsets) == 4  # 361 pages, 100 per stream
    data = dump.read_bytes()
    header = bz2.BZ2Decompressor().decompress(data[: offsets[0]])
    assert header.startswith(b"<mediawiki ") and header.rstrip().endswith(b"</siteinfo>")
    assert bz2.decompress(data[offsets[0] : offsets[1]]).count(b"<page>") == 100
    lines = bz2.decompress(index.read_bytes()).decode().splitlines()
    assert len(lines) == 361 and lines[1] == f"{offsets[0]}:12:Anarchism"
    # The whole file is still one valid dump, with its closing tag.
    with open_dump(dump) as stream:
        assert list(iter_pages(stream)) == list(enwiki_pages())


@pytest.mark.parametrize("target_bytes", [1, 1_500_000, 1 << 40])
def test_ranges_yield_exactly_the_pages_of_the_single_stream_file(multistream, target_bytes):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    ranges = plan_byte_ranges(offsets, dump.stat().st_size, target_bytes)
    check_plan(ranges, offsets, dump.stat().st_size)
    assert read_ranges(dump, ranges) == list(enwiki_pages())


def test_range_output_is_streamed_in_bounded_chunks(multistream, monkeypatch):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    monkeypatch.setattr(wiki_multistream, "MAX_OUTPUT_BYTES", 1 << 16)
    monkeypatch.setattr(wiki_multistream, "READ_BYTES", 1 << 14)
    with open(dump, "rb") as fileobj:
        chunks = list(wiki_multistream._decompressed_chunks(fileobj, offsets[0], dump.stat().st_size))
    assert max(len(c) for c in chunks) <= 1 << 16
    _, pages, footer = split_dump(read_xml(ENWIKI_2014))
    assert b"".join(chunks) == b"".join(pages) + footer


def test_range_not_starting_on_a_stream_is_one_error(multistream):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    items = read_ranges(dump, [(offsets[1] + 7, offsets[2])])
    assert len(items) == 1 and isinstance(items[0], PageError)
    assert items[0].reason == "read_error" and items[0].where.startswith(f"bytes {offsets[1] + 7}-{offsets[2]}")


def test_range_cut_inside_a_stream_yields_the_complete_pages_then_one_error(multistream):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    items = read_ranges(dump, [(offsets[0], offsets[2] - 1000)])
    pages, error = items[:-1], items[-1]
    assert 100 < len(pages) < 200  # the first stream, and the part of the second that decompressed
    assert pages == list(enwiki_pages()[: len(pages)])
    assert isinstance(error, PageError) and "cut off" in error.detail


def test_corrupt_stream_in_a_range_yields_pages_before_it_then_one_error(tmp_path):
    dump, index = build_multistream(ENWIKI_SMALL, tmp_path, pages_per_stream=1)
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    data = dump.read_bytes()
    damaged = tmp_path / "damaged.xml.bz2"
    damaged.write_bytes(flip_bytes(data, (offsets[1] + offsets[2]) // 2))
    with open_dump(ENWIKI_SMALL) as stream:
        expected = [p for p in iter_pages(stream) if isinstance(p, Page)]
    items = read_ranges(damaged, [(offsets[0], len(data))])
    assert items[:1] == expected[:1]
    assert len(items) == 2 and isinstance(items[1], PageError)
    assert read_ranges(damaged, [(offsets[2], len(data))]) == expected[2:]  # other ranges are unaffected


def test_range_past_the_end_of_the_file_is_one_error(multistream):
    dump, index = multistream
    size = dump.stat().st_size
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    items = read_ranges(dump, [(offsets[-1], size + 100)])
    assert [type(i) for i in items] == [Page] * 61 + [PageError]
    assert "file ends" in items[-1].detail
