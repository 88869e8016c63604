"""Multistream index parsing, byte-range planning and range decoding, on real index and page samples."""

from __future__ import annotations

import bz2
import io
from functools import cache
from itertools import pairwise
from pathlib import Path

import pytest

from bertcorpus.transforms import wiki_multistream
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_multistream import iter_range_pages, plan_byte_ranges, read_stream_offsets
from bertcorpus.transforms.wiki_page_items import Page, PageError
from bertcorpus.transforms.wiki_pages import iter_pages

from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, SZLWIKI_INDEX, build_multistream, flip_bytes, read_xml, split_dump


@cache
def enwiki_pages() -> tuple[Page, ...]:
    with open_decompressed(ENWIKI_2014) as stream:
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


def test_a_cut_index_is_an_error():
    data = SZLWIKI_INDEX.read_bytes()
    with pytest.raises(ValueError, match=r"the file is damaged \(OSError: the file ends at byte 304544"):
        read_stream_offsets(io.BytesIO(data[: len(data) // 2]))


# --- planning ------------------------------------------------------------------------------------------------------


def check_plan(ranges: list[tuple[int, int]], offsets: list[int], file_size: int) -> None:
    assert ranges[0][0] == 0  # the header stream and any stream the index leaves out are read too
    assert ranges[-1][1] == file_size
    assert all(a[1] == b[0] for a, b in pairwise(ranges))  # contiguous
    assert all(start < end for start, end in ranges)
    assert {start for start, _ in ranges[1:]} <= set(offsets)  # whole streams only


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
    assert plan_byte_ranges(offsets, file_size, 1) == list(pairwise([0, *offsets, file_size]))
    assert plan_byte_ranges(offsets, file_size, 1 << 40) == [(0, file_size)]


def test_plan_byte_ranges_merges_a_small_remainder():
    assert plan_byte_ranges([100, 200, 300, 400], 420, 100) == [(0, 100), (100, 200), (200, 300), (300, 420)]
    assert plan_byte_ranges([100, 200, 300, 400], 460, 100) == [
        (0, 100),
        (100, 200),
        (200, 300),
        (300, 400),
        (400, 460),
    ]


def test_plan_byte_ranges_covers_the_file_whatever_the_index_says():
    assert plan_byte_ranges([], 1000, 10) == [(0, 1000)]
    assert plan_byte_ranges([100, 2000, 5000], 1000, 10) == [(0, 100), (100, 1000)]  # offsets beyond are left out
    assert plan_byte_ranges([100], 0, 10) == []
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
    with open_decompressed(dump) as stream:
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


def test_ranges_cut_at_any_offset_read_every_stream_exactly_once(multistream):
    # An index whose offsets are off by a few bytes, or no index at all: a range owns the streams that start in it.
    dump, index = multistream
    size = dump.stat().st_size
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    shifted = [(0, offsets[1] + 7), (offsets[1] + 7, offsets[2] - 3), (offsets[2] - 3, size)]
    assert read_ranges(dump, shifted) == list(enwiki_pages())
    every_300_kb = list(pairwise([*range(0, size, 300_000), size]))
    assert read_ranges(dump, every_300_kb) == list(enwiki_pages())
    assert read_ranges(dump, [(offsets[1] + 7, offsets[2])]) == []  # no stream starts there


def test_index_without_the_first_page_stream_loses_nothing(multistream):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    ranges = plan_byte_ranges(offsets[1:], dump.stat().st_size, 1)
    assert ranges[0] == (0, offsets[1])
    assert read_ranges(dump, ranges) == list(enwiki_pages())


def test_file_cut_inside_a_stream_yields_the_complete_streams_then_one_error(multistream, tmp_path):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(dump.read_bytes()[: offsets[2] + 1000])
    items = read_ranges(cut, [(0, offsets[2] + 1000)])
    assert items[:-1] == list(enwiki_pages()[:200])
    assert isinstance(items[-1], PageError) and items[-1].reason == "truncated"
    assert f"the file ends at byte {offsets[2] + 1000}, inside the bz2 stream that starts at byte {offsets[2]}" in (
        items[-1].detail
    )


def test_a_dump_cut_between_two_streams_is_found_by_its_missing_end_tag(multistream, tmp_path):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(dump.read_bytes()[: offsets[2]])
    items = read_ranges(cut, plan_byte_ranges(offsets, offsets[2], 1))
    assert items[:-1] == list(enwiki_pages()[:200])
    assert items[-1].reason == "truncated" and f"the dump ends at byte {offsets[2]} without </mediawiki>" in (
        items[-1].detail
    )


def test_corrupt_stream_costs_that_stream_only(tmp_path):
    dump, index = build_multistream(ENWIKI_SMALL, tmp_path, pages_per_stream=1)
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    data = dump.read_bytes()
    damaged = tmp_path / "damaged.xml.bz2"
    damaged.write_bytes(flip_bytes(data, (offsets[1] + offsets[2]) // 2))
    with open_decompressed(ENWIKI_SMALL) as stream:
        expected = [p for p in iter_pages(stream) if isinstance(p, Page)]
    items = read_ranges(damaged, [(0, len(data))])
    assert [items[0], items[2]] == [expected[0], expected[2]]
    assert len(items) == 3 and isinstance(items[1], PageError) and items[1].reason == "read_error"
    assert f"bad bz2 data in the stream that starts at byte {offsets[1]}" in items[1].detail


def test_garbage_between_streams_is_one_error_and_no_page_is_lost(multistream, tmp_path):
    dump, index = multistream
    with open(index, "rb") as fileobj:
        offsets = read_stream_offsets(fileobj)
    data = dump.read_bytes()
    garbage = bytes(range(256)) * 4
    spliced = tmp_path / "spliced.xml.bz2"
    spliced.write_bytes(data[: offsets[2]] + garbage + data[offsets[2] :])
    moved = [*offsets[:2], *(offset + len(garbage) for offset in offsets[2:])]
    items = read_ranges(spliced, plan_byte_ranges(moved, len(data) + len(garbage), 1))
    pages, errors = [i for i in items if isinstance(i, Page)], [i for i in items if isinstance(i, PageError)]
    assert pages == list(enwiki_pages())
    last_before = enwiki_pages()[199].page_id
    assert [e.detail for e in errors] == [
        f"bytes {offsets[2]}-{offsets[2] + len(garbage)} are not a bz2 stream; "
        "how many pages it held cannot be told "
        f"(after page {last_before})"
    ]


def test_garbage_before_the_first_stream_is_one_error(multistream, tmp_path):
    dump, _ = multistream
    prefixed = tmp_path / "prefixed.xml.bz2"
    prefixed.write_bytes(b"<html>not bz2</html>" + dump.read_bytes())
    items = read_ranges(prefixed, [(0, 500_000), (500_000, prefixed.stat().st_size)])
    assert items[1:] == list(enwiki_pages())
    assert items[0].reason == "read_error" and "bytes 0-20 are not a bz2 stream" in items[0].detail


def test_a_file_that_is_not_bz2_is_one_error(tmp_path):
    plain = tmp_path / "plain.xml"
    plain.write_bytes(read_xml(ENWIKI_SMALL))
    items = read_ranges(plain, [(0, 5000), (5000, plain.stat().st_size)])
    assert len(items) == 1 and items[0].reason == "read_error"
    assert "the file does not start with a bz2 stream" in items[0].detail
