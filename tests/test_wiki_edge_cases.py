"""extract-wiki on the inputs a bad-input sweep turned up, built from the real samples: elements under a namespace
prefix, xz, zstd and compressions that are not read, files of no bytes, runs that find no document (extract-books
too), and the pages that a lost bz2 block or a damaged multistream stream takes with it."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import re
import zipfile
from itertools import pairwise
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import zstandard

from bertcorpus.transforms.bz2_blocks import BLOCK_MAGIC, find_magic
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_multistream import iter_range_pages, read_stream_pages
from bertcorpus.transforms.wiki_page_items import Loss, Page, PageError
from bertcorpus.transforms.wiki_pages import iter_pages, read_siteinfo

from conftest import DATA, run_cli
from wiki_fixtures import ENWIKI_2014, ENWIKI_SMALL, build_multistream, flip_bytes, read_xml, split_dump

LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]


UNDER_PREFIX = re.compile(rb"<(/?)([a-z]+)")  # text holds no '<' (XML escapes it), so only tags match


def prefixed(xml: bytes) -> bytes:
    """The same dump with every element in the export namespace under the prefix mw: (<mw:page>, <mw:title>, ...)."""
    return UNDER_PREFIX.sub(rb"<\1mw:\2", xml).replace(b' xmlns="', b' xmlns:mw="', 1)


def pages_of(source) -> list[Page]:
    return [item for item in iter_pages(open_decompressed(source)) if isinstance(item, Page)]


def extract(out: Path, *inputs, expect: int = 0, extra=()) -> dict:
    assert run_cli("extract-wiki", "--input", *inputs, "--output", out, *extra, *LOCAL) == expect
    return json.loads((out / "manifest.json").read_text())


def documents(out: Path) -> list[dict]:
    return [row for f in sorted(out.glob("documents-*.parquet")) for row in pq.read_table(f).to_pylist()]


def errors(out: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(out.glob("errors-*.jsonl")) for line in f.read_text().splitlines()]


# --- elements under a namespace prefix ------------------------------------------------------------------------------


def test_a_dump_whose_elements_carry_a_prefix_reads_like_the_plain_one():
    xml = read_xml(ENWIKI_2014)
    assert b"<mw:page>" in prefixed(xml) and b"<page>" not in prefixed(xml)
    assert pages_of(io.BytesIO(prefixed(xml))) == pages_of(io.BytesIO(xml))
    site = read_siteinfo(io.BytesIO(prefixed(xml)))
    assert site is not None and site.dbname == "enwiki" and site.namespaces[4] == "Wikipedia"


def test_a_malformed_page_in_a_prefixed_dump_costs_that_page_only():
    # after the error a fresh parser takes the next page under a root that declares the prefix
    xml = prefixed(read_xml(ENWIKI_SMALL))
    damaged = xml.replace(b"</mw:title>", b"</mw:titel>", 1)
    items = list(iter_pages(io.BytesIO(damaged)))
    assert [type(i) for i in items] == [PageError, Page, Page]
    assert items[0].reason == "xml_error" and items[1:] == pages_of(io.BytesIO(xml))[1:]


def test_prefixed_pages_in_a_fragment_and_its_closing_tag_read_like_the_whole_document():
    _, pages, footer = split_dump(read_xml(ENWIKI_SMALL))
    fragment = prefixed(b"".join(pages) + footer)
    assert fragment.endswith(b"</mw:mediawiki>\n")
    assert list(iter_pages(io.BytesIO(fragment), fragment=True)) == pages_of(ENWIKI_SMALL)


def prefixed_multistream(source: Path, out: Path) -> tuple[Path, Path]:
    """A multistream dump of the sample under the prefix mw: (declared by the header's root element, so each later
    stream uses a prefix it does not declare), 100 pages per stream as Wikimedia lays them out, and its index."""
    header, pages, footer = split_dump(read_xml(source))
    streams, lines = [bz2.compress(prefixed(header))], []
    for first in range(0, len(pages), 100):
        offset = sum(map(len, streams))
        for page in pages[first : first + 100]:
            lines.append(
                b"%d:%s:%s\n"
                % (
                    offset,
                    re.search(rb"<id>(\d+)</id>", page).group(1),
                    re.search(rb"<title>(.*?)</title>", page).group(1),
                )
            )
        streams.append(bz2.compress(UNDER_PREFIX.sub(rb"<\1mw:\2", b"".join(pages[first : first + 100]))))
    streams.append(bz2.compress(UNDER_PREFIX.sub(rb"<\1mw:\2", footer)))
    dump, index = out / "enwiki-prefixed-multistream.xml.bz2", out / "enwiki-prefixed-multistream-index.txt"
    dump.write_bytes(b"".join(streams))
    index.write_bytes(b"".join(lines))
    return dump, index


def test_extract_wiki_reads_prefixed_dumps_single_stream_and_with_their_index(tmp_path):
    plain_out = tmp_path / "plain"
    extract(plain_out, ENWIKI_SMALL)
    single = tmp_path / "enwiki-prefixed.xml.bz2"
    single.write_bytes(bz2.compress(prefixed(read_xml(ENWIKI_SMALL))))
    manifest = extract(tmp_path / "single", single)
    assert manifest["documents"]["read"] == 3 and manifest["documents"]["kept"] == 2
    assert documents(tmp_path / "single") == documents(plain_out)  # ids from the siteinfo's dbname, URLs from its base
    dump, index = prefixed_multistream(ENWIKI_2014, tmp_path)
    manifest = extract(tmp_path / "ranges", dump, extra=["--index", index, "--range-mb", "0.5"])
    docs = manifest["documents"]
    assert (docs["read"], docs["errors"]) == (361, 0) and docs["kept"] == 198  # the complete sample, no cut
    assert "pages_lost" not in manifest["inputs"][0]


# --- runs that find no document -------------------------------------------------------------------------------------


def test_a_dump_without_pages_exits_1_in_one_line(tmp_path, capsys):
    header, _, footer = split_dump(read_xml(ENWIKI_SMALL))
    no_pages = tmp_path / "enwiki-no-pages.xml"
    no_pages.write_bytes(header + footer)  # well-formed: a siteinfo and no page
    manifest = extract(tmp_path / "out", no_pages, expect=1)
    assert manifest["documents"]["read"] == 0
    err = capsys.readouterr().err
    assert err == f"bertcorpus extract-wiki: no pages found in {len(header + footer):,} bytes of input\n"


def test_a_run_that_keeps_no_page_exits_1(tmp_path, capsys):
    extract(tmp_path / "out", ENWIKI_SMALL, expect=1, extra=["--min-chars", "1000000"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"bertcorpus extract-wiki: no documents kept from {ENWIKI_SMALL.stat().st_size:,} bytes of input (3 read: "
        "skipped redirect 1, too_short 2)"
    )


def test_extract_books_that_keeps_no_book_exits_1(tmp_path, capsys):
    book = DATA / "books" / "pg19_format" / "10006.txt"
    code = run_cli("extract-books", "--input", book, "--output", tmp_path / "out", "--min-chars", "100000000", *LOCAL)
    assert code == 1 and (tmp_path / "out" / "manifest.json").exists()
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"bertcorpus extract-books: no documents kept from {book.stat().st_size:,} bytes of input (1 read: "
        "skipped too_short 1)"
    )


# --- compressions ---------------------------------------------------------------------------------------------------


def compressed(xml: bytes) -> dict[str, bytes]:
    return {"xz": lzma.compress(xml), "zst": zstandard.ZstdCompressor().compress(xml), "bz2": bz2.compress(xml)}


def test_xz_and_zstd_dumps_read_like_bz2():
    xml = read_xml(ENWIKI_2014)
    expected = list(iter_pages(io.BytesIO(xml)))
    for suffix, data in compressed(xml).items():
        assert list(iter_pages(open_decompressed(io.BytesIO(data)))) == expected, suffix
    # several zstd frames one after another, as a parallel compressor writes them
    frames = b"".join(zstandard.ZstdCompressor().compress(xml[i : i + 1_000_000]) for i in range(0, len(xml), 10**6))
    assert list(iter_pages(open_decompressed(io.BytesIO(frames)))) == expected


@pytest.mark.parametrize("suffix", ["xz", "zst"])
def test_a_cut_xz_or_zstd_dump_keeps_its_pages_before_the_cut(suffix):
    xml = read_xml(ENWIKI_2014)
    data = compressed(xml)[suffix]
    items = list(iter_pages(open_decompressed(io.BytesIO(data[: len(data) // 2]))))
    pages, [error] = items[:-1], items[-1:]
    assert len(pages) > 150 and pages == list(iter_pages(io.BytesIO(xml)))[: len(pages)]
    assert error.reason == "truncated" and error.detail.startswith("EOFError: ")


def test_extract_wiki_reads_xz_and_zstd_and_names_a_compression_it_does_not_read(tmp_path, capsys):
    xml = read_xml(ENWIKI_SMALL)
    for suffix, data in compressed(xml).items():
        (tmp_path / f"enwiki-{suffix}.xml.{suffix}").write_bytes(data)
    manifest = extract(tmp_path / "out", *sorted(tmp_path.glob("enwiki-*")))
    # the same three pages in each: the copies are duplicates of the first
    assert manifest["documents"]["read"] == 9 and manifest["documents"]["errors"] == 0
    assert manifest["documents"]["skipped"]["duplicate_id"] == 4
    zipped = tmp_path / "enwiki-small.xml.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("enwiki-small.xml", xml)
    extract(tmp_path / "zip", zipped, expect=1)
    [error] = errors(tmp_path / "zip")
    assert error["reason"] == "unsupported_compression"
    assert error["detail"].startswith("the file is zip-compressed, which is not read: decompress it")
    assert "Traceback" not in capsys.readouterr().err


# --- files of no bytes ----------------------------------------------------------------------------------------------


def test_a_file_of_no_bytes_is_empty_whatever_its_suffix(tmp_path):
    for suffix in ("xml", "xml.bz2", "xml.gz", "xml.xz", "xml.zst"):
        (tmp_path / "in" / suffix).mkdir(parents=True)
        (tmp_path / "in" / suffix / f"enwiki-empty.{suffix}").write_bytes(b"")
    manifest = extract(tmp_path / "out", *sorted((tmp_path / "in").glob("*/*")), expect=1)
    assert manifest["documents"]["errors_by_reason"] == {"empty": 5}
    assert {e["detail"] for e in errors(tmp_path / "out")} == {"the input is empty (before any complete page)"}
    # a compressed file that holds no bytes is empty too; a cut one is not
    assert [e.reason for e in iter_pages(open_decompressed(io.BytesIO(gzip.compress(b""))))] == ["empty"]
    assert [e.reason for e in iter_pages(open_decompressed(io.BytesIO(bz2.compress(b"x" * 1000)[:20])))] == [
        "truncated"
    ]


# --- what damage costs in pages -------------------------------------------------------------------------------------


def test_a_lost_bz2_block_counts_the_pages_it_held_as_an_upper_bound(tmp_path, capsys):
    data = ENWIKI_2014.read_bytes()
    damaged = tmp_path / "enwiki-damaged.xml.bz2"
    damaged.write_bytes(flip_bytes(data, len(data) // 2, 200))
    # 2 error records in 346 read is under 5%; the block's pages (a tenth of the dump) are not
    manifest = extract(tmp_path / "out", damaged, expect=1, extra=["--max-error-rate", "0.05"])
    docs = manifest["documents"]
    pages_read = docs["read"] - docs["errors"]
    bound = manifest["inputs"][0]["pages_lost"]["at_most"]
    # 17 pages are not read, one of them the cut page that its error record stands for: 16 lost beyond the items
    assert 361 - pages_read == 17 and 16 <= bound <= 3 * 17
    out = capsys.readouterr()
    # the label column is as wide as the longest label, and which stages' times are listed varies with the load
    assert re.search(rf"\n  pages lost +at most {bound} by the page ids around the damage\n", out.out), out.out
    assert out.err.startswith(
        f"bertcorpus extract-wiki: 2 errors and {bound} pages lost, {bound} of them upper bounds, in "
        f"{docs['read'] + bound} read or lost"
    )
    [lost] = [e for e in errors(tmp_path / "out") if e["reason"] == "read_error"]
    assert f"at most {bound} pages lost (a bound: the pages on either side are " in lost["detail"]
    assert re.search(r"; bytes \d+-\d+ of the file could not be decompressed;", lost["detail"])
    extract(tmp_path / "tolerant", damaged, extra=["--max-error-rate", "0.2"])


def test_the_pages_each_lost_block_held_are_bound_from_above():
    # pages vary from a 1 kB redirect to 200 kB of article, so a block of 900 kB held 16 to 72 of the sample's pages;
    # the mean page size around a gap once gave 23 for 36 pages lost: every figure must be at least what was lost
    data = ENWIKI_2014.read_bytes()
    whole = len(pages_of(io.BytesIO(data)))
    blocks = [find_magic(data, BLOCK_MAGIC)]
    while (following := find_magic(data, BLOCK_MAGIC, blocks[-1] + 1)) is not None:
        blocks.append(following)
    assert len(blocks) == 12
    by_ids = []
    for first, second in pairwise(blocks):
        items = list(iter_pages(open_decompressed(io.BytesIO(flip_bytes(data, (first + second) // 16)))))
        unread = whole - sum(isinstance(i, Page) for i in items)
        [gap] = [i for i in items if isinstance(i, PageError) and i.lost is not None]
        cut = "the page there is cut" in gap.detail  # that page is an error record, not lost beyond the items
        assert gap.lost.pages >= unread - cut, (first, unread, gap.lost)
        if gap.lost.bound:
            by_ids.append((gap.lost.pages, unread))
        else:  # the first block: no page before it, so the bound is its bytes over the smallest page after it
            assert first == blocks[0] and "for the smallest page around them" in gap.detail
    assert len(by_ids) == 10 and sum(b for b, _ in by_ids) <= 3 * sum(u for _, u in by_ids)


def test_a_damaged_stream_counts_its_lost_pages_from_the_index(tmp_path):
    dump, index = build_multistream(ENWIKI_2014, tmp_path, pages_per_stream=100)
    listed = read_stream_pages(open_decompressed(index))
    starts = list(listed)
    damaged = flip_bytes(dump.read_bytes(), (starts[1] + starts[2]) // 2)
    items = list(iter_range_pages(io.BytesIO(damaged), 0, len(damaged), listed))
    pages = [i for i in items if isinstance(i, Page)]
    [error] = [i for i in items if isinstance(i, PageError)]
    assert error.lost == Loss(361 - len(pages)) and 0 < 361 - len(pages) < 100
    # the stream before it and the two after it are whole: 100 + 100 + 61 pages
    assert f"the index lists 100 pages in it, {len(pages) - 261} of them read" in error.detail
    # garbage between two streams holds no stream the index lists: nothing lost, and it says so
    garbage = bytes(range(256)) * 4
    spliced = dump.read_bytes()[: starts[2]] + garbage + dump.read_bytes()[starts[2] :]
    moved = {(o if o < starts[2] else o + len(garbage)): n for o, n in listed.items()}
    items = list(iter_range_pages(io.BytesIO(spliced), 0, len(spliced), moved))
    [error] = [i for i in items if isinstance(i, PageError)]
    assert error.lost == Loss(0) and "the index lists 0 pages in streams there" in error.detail
    assert sum(isinstance(i, Page) for i in items) == 361


def test_a_stream_that_is_not_bz2_past_a_ranges_end_is_not_counted_as_no_pages(tmp_path):
    """The range that ends where a stream ends reports the bytes after it, which are not bz2, though the index lists
    their stream for the next range (which skips them): it cannot tell their pages, and must not say none."""
    dump, index = build_multistream(ENWIKI_2014, tmp_path, pages_per_stream=100)
    listed = read_stream_pages(open_decompressed(index))
    starts = list(listed)
    data = dump.read_bytes()
    damaged = data[: starts[1]] + bytes(range(256)) * ((starts[2] - starts[1]) // 256 + 1)
    damaged = damaged[: starts[2]] + data[starts[2] :]
    items = []
    for start, end in ((0, starts[1]), (starts[1], len(damaged))):
        items += iter_range_pages(
            io.BytesIO(damaged), start, end, {o: n for o, n in listed.items() if start <= o < end}
        )
    [error] = [i for i in items if isinstance(i, PageError)]
    assert error.lost.pages is None and "cannot be told" in error.detail, error
    assert sum(isinstance(i, Page) for i in items) == 261
