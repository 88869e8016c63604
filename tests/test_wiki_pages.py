"""The streaming pages-articles reader, on the real dump samples in tests/data/wiki."""

from __future__ import annotations

import bz2
import gzip
import io
import re
import tracemalloc
from functools import cache

import pytest

from bertcorpus.transforms import wiki_pages, xml_encoding
from bertcorpus.transforms.compression import open_decompressed
from bertcorpus.transforms.wiki_page_items import Page, PageError
from bertcorpus.transforms.wiki_pages import iter_pages, read_siteinfo

from wiki_fixtures import (
    BGWIKI_UTF16,
    ENWIKI_2014,
    ENWIKI_SMALL,
    ENWIKI_TABLES,
    VIWIKI,
    flip_bytes,
    read_xml,
    split_dump,
)


def read_all(source) -> list[Page | PageError]:
    with open_decompressed(source) as stream:
        return list(iter_pages(stream))


@cache
def enwiki_2014_items() -> tuple[Page | PageError, ...]:
    return tuple(read_all(ENWIKI_2014))


def pages_and_errors(items) -> tuple[list[Page], list[PageError]]:
    items = list(items)
    pages = [item for item in items if isinstance(item, Page)]
    errors = [item for item in items if isinstance(item, PageError)]
    return pages, errors


def test_enwiki_2014_truncated_sample_yields_every_page_then_one_error():
    items = enwiki_2014_items()
    pages, errors = pages_and_errors(items)
    assert len(pages) == 361
    assert sum(p.ns == 0 for p in pages) == 360
    assert [p.title for p in pages if p.ns != 0] == ["Wikipedia:Adding Wikipedia articles to Nupedia"]
    assert sum(p.redirect for p in pages) == 146
    assert len({p.page_id for p in pages}) == 361
    # The file ends after a </page>: the damage is reported once, last, after the last good page.
    assert len(errors) == 1 and items[-1] is errors[0]
    assert errors[0].reason == "truncated"
    assert errors[0].where == f"byte {len(read_xml(ENWIKI_2014))}"
    assert "after page 1010" in errors[0].detail


def test_enwiki_2014_page_fields():
    pages, _ = pages_and_errors(enwiki_2014_items())
    first = pages[0]
    assert first == Page(
        page_id=10,
        ns=0,
        title="AccessibleComputing",
        revision_id=631144794,
        timestamp="2014-10-26T04:50:23Z",
        redirect=True,
        text="#REDIRECT [[Computer accessibility]]\n\n{{Redr|move|from CamelCase|up}}",
    )
    anarchism = pages[1]
    assert (anarchism.page_id, anarchism.title, anarchism.redirect) == (12, "Anarchism", False)
    assert anarchism.text.startswith("{{Redirect2|Anarchist|")
    # Entities of the XML layer are decoded once; wikitext's own entities stay for the cleaner.
    assert "&lt;ref" not in anarchism.text and "<ref>" in anarchism.text


def test_table_markup_sample_without_siteinfo():
    pages, errors = pages_and_errors(read_all(ENWIKI_TABLES))
    assert errors == []
    assert [p.title for p in pages] == [
        "Constructive vote of no confidence",
        "List of Prison Break characters",
        "Academy Award for Best Production Design",
        "Economy of Estonia",
        "Brahui language",
    ]
    assert all(p.ns == 0 and not p.redirect for p in pages)
    assert all("{|" in p.text for p in pages[1:4])


def test_small_sample_is_complete():
    pages, errors = pages_and_errors(read_all(ENWIKI_SMALL))
    assert errors == []
    assert [(p.page_id, p.redirect) for p in pages] == [(10, True), (411964, False), (302109, False)]


def test_utf16_bulgarian_sample_is_decoded():
    raw = BGWIKI_UTF16.read_bytes()
    assert bz2.decompress(raw)[:2] == b"\xff\xfe"  # really UTF-16LE with a BOM
    pages, errors = pages_and_errors(read_all(BGWIKI_UTF16))
    assert errors == []
    assert pages[0].title == "Григориански календар"
    assert [p.ns for p in pages] == [0, 4, 4]
    assert "Григорианският календар" in pages[0].text


def test_truncated_vietnamese_sample():
    items = read_all(VIWIKI)
    pages, errors = pages_and_errors(items)
    assert len(pages) == 10
    assert sum(p.redirect for p in pages) == 3
    assert "Thụy Điển" in [p.title for p in pages]
    assert len(errors) == 1 and items[-1] == errors[0] and errors[0].reason == "truncated"


def test_cut_mid_page_yields_pages_before_the_cut_then_one_error():
    xml = read_xml(ENWIKI_SMALL)
    second_page = xml.index(b"<page>", xml.index(b"</page>"))
    cut = xml[: second_page + 5000]
    items = list(iter_pages(io.BytesIO(cut)))
    assert [type(i) for i in items] == [Page, PageError]
    assert items[0].page_id == 10
    assert items[1].reason == "truncated" and "inside a page" in items[1].detail


def page_spans(xml: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of every <page> element of a well-formed sample."""
    return [m.span() for m in re.finditer(rb"<page>.*?</page>", xml, re.S)]


def damage_page(xml: bytes, number: int, old: bytes, new: bytes) -> tuple[bytes, int]:
    """xml with the first `old` inside page `number` replaced by `new`, and that page's offset."""
    start, end = page_spans(xml)[number]
    at = xml.index(old, start, end)
    return xml[:at] + new + xml[at + len(old) :], start


def without(pages: list[Page], number: int) -> list[Page]:
    return pages[:number] + pages[number + 1 :]


def test_a_malformed_page_costs_that_page_only():
    xml = read_xml(ENWIKI_2014)
    good, _ = pages_and_errors(enwiki_2014_items())
    broken, offset = damage_page(xml, 180, b"</title>", b"</titel>")
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(broken)))
    assert pages == without(good, 180)
    assert errors[0] == PageError(
        f"byte {offset}", "xml_error", f"page {good[180].title!r}: mismatched tag (after page {good[179].page_id})"
    )
    assert [e.reason for e in errors[1:]] == ["truncated"]  # the sample's own missing </mediawiki>


def test_a_malformed_page_in_a_fragment_costs_that_page_only():
    _, page_elements, footer = split_dump(read_xml(ENWIKI_SMALL))
    expected = read_all(ENWIKI_SMALL)
    page_elements[1] = page_elements[1].replace(b"<ns>", b"<ns", 1)
    items = list(iter_pages(io.BytesIO(b"".join(page_elements) + footer), fragment=True))
    assert [items[0], items[2]] == [expected[0], expected[2]]
    assert items[1].reason == "xml_error" and "'Computer accessibility'" in items[1].detail


def test_a_page_without_its_end_tag_costs_that_page_only():
    xml = read_xml(ENWIKI_SMALL)
    expected = read_all(ENWIKI_SMALL)
    broken, offset = damage_page(xml, 1, b"</page>", b"")
    items = list(iter_pages(io.BytesIO(broken)))
    assert [items[0], items[2]] == [expected[0], expected[2]] and len(items) == 3
    assert items[1].where == f"byte {offset}"
    assert "the page is not closed before the next <page>" in items[1].detail


def test_a_page_nested_in_another_keeps_the_inner_page():
    xml = read_xml(ENWIKI_SMALL)
    expected = read_all(ENWIKI_SMALL)
    spans = page_spans(xml)
    inner = xml[spans[2][0] : spans[2][1]]
    revision = xml.index(b"<revision>", *spans[1])
    nested = xml[:revision] + inner + xml[revision : spans[2][0]] + xml[spans[2][1] :]
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(nested)))
    assert pages == [expected[0], expected[2]]
    # the outer page is cut at the inner <page>, and what follows the inner page up to </page> is stray
    assert [e.reason for e in errors] == ["xml_error", "xml_error"]
    assert "not closed before the next <page>" in errors[0].detail and "between pages" in errors[1].detail


def test_stray_text_between_pages_is_one_error_and_no_page_is_lost():
    xml = read_xml(ENWIKI_SMALL)
    expected = read_all(ENWIKI_SMALL)
    end_of_first = page_spans(xml)[0][1]
    garbage = bytes(range(1, 256)) * 40
    items = list(iter_pages(io.BytesIO(xml[:end_of_first] + garbage + xml[end_of_first:])))
    pages, errors = pages_and_errors(items)
    assert pages == expected
    assert len(errors) == 1 and errors[0].where == f"byte {end_of_first}" and "between pages" in errors[0].detail


def test_bad_utf8_in_a_page_costs_that_page_only():
    xml = read_xml(ENWIKI_2014)
    good, _ = pages_and_errors(enwiki_2014_items())
    broken, offset = damage_page(xml, 7, b"<text", b"\xff\xfe<text")
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(broken)))
    assert pages == without(good, 7)
    assert errors[0].where == f"byte {offset}" and errors[0].reason == "decode_error"
    assert "invalid start byte" in errors[0].detail and good[7].title in errors[0].detail


def test_bad_utf16_in_a_page_costs_that_page_only():
    text = read_xml(BGWIKI_UTF16).decode("utf-16")
    expected = read_all(BGWIKI_UTF16)
    second = text.index("<page>", text.index("</page>"))
    at = text.index("<text", second)
    data = text[:at].encode("utf-16") + "\ud800".encode("utf-16-le", "surrogatepass") + text[at:].encode("utf-16-le")
    items = list(iter_pages(io.BytesIO(data)))
    assert [items[0], items[2]] == [expected[0], expected[2]] and len(items) == 3
    assert items[1].reason == "decode_error" and items[1].where == f"character {second}"


def test_an_undecodable_byte_between_pages_in_utf16_is_one_error():
    text = read_xml(BGWIKI_UTF16).decode("utf-16")
    expected = read_all(BGWIKI_UTF16)
    end_of_first = text.index("</page>") + len("</page>")
    data = (
        text[:end_of_first].encode("utf-16")
        + "\udc00".encode("utf-16-le", "surrogatepass")
        + text[end_of_first:].encode("utf-16-le")
    )
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(data)))
    assert pages == expected
    assert [e.reason for e in errors] == ["decode_error"] and "between pages" in errors[0].detail


def test_a_page_too_large_is_one_error_and_reading_goes_on(monkeypatch):
    # the cached reading is made with the default cap: taken under the small one, it would lack the large pages
    good, _ = pages_and_errors(enwiki_2014_items())
    monkeypatch.setattr(wiki_pages, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(wiki_pages, "MAX_PAGE_SIZE", 150_000)
    xml = read_xml(ENWIKI_2014)
    spans = page_spans(xml)
    large = [n for n, (start, end) in enumerate(spans) if end - start > 150_000]
    assert len(large) == 9
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(xml)))
    assert pages == [page for n, page in enumerate(good) if n not in large]
    assert [e.where for e in errors[:-1]] == [f"byte {spans[n][0]}" for n in large]
    assert {e.reason for e in errors[:-1]} == {"page_too_large"}


def test_a_page_that_never_ends_is_held_only_up_to_the_cap(monkeypatch):
    monkeypatch.setattr(wiki_pages, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(wiki_pages, "MAX_PAGE_SIZE", 1 << 20)
    xml = read_xml(ENWIKI_SMALL)
    endless = xml[: page_spans(xml)[1][0]] + b"<page><title>Endless</title><text>" + b"a" * (16 << 20)
    tracemalloc.start()
    try:
        items = list(iter_pages(io.BytesIO(endless)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [type(i) for i in items] == [Page, PageError, PageError]
    assert items[1].reason == "page_too_large" and "'Endless'" in items[1].detail
    assert items[2].reason == "truncated"
    assert peak < len(endless) + (4 << 20)  # the input itself, and about one capped page


def test_well_formed_elements_between_pages_are_not_kept(monkeypatch):
    monkeypatch.setattr(wiki_pages, "CHUNK_BYTES", 1 << 16)
    xml = read_xml(ENWIKI_SMALL)
    end_of_first = page_spans(xml)[0][1]
    stuffed = io.BytesIO(xml[:end_of_first] + b"<junk>x</junk>" * 1_000_000 + xml[end_of_first:])
    tracemalloc.start()
    try:
        items = list(iter_pages(stuffed))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert items == read_all(ENWIKI_SMALL)
    assert peak < 2_000_000  # a million elements would take over 100 MB


def test_a_page_without_a_title_is_an_error():
    xml = read_xml(ENWIKI_SMALL)
    broken, _ = damage_page(xml, 2, b"<title>Accessibility</title>", b"")
    items = list(iter_pages(io.BytesIO(broken)))
    assert [type(i) for i in items] == [Page, Page, PageError]
    assert items[2] == PageError("page 302109 None", "bad_page_header", "page has no title")


@pytest.mark.parametrize(
    ("codec", "complaint"),
    [
        ("no-such-codec", "the declared encoding cannot be used (unknown encoding: no-such-codec)"),
        ("base64", "the declared encoding cannot be used ('base64' is not a text encoding"),
        ("UTF-16", "encoding specified in XML declaration is incorrect"),
        ("undefined", "the declared encoding cannot be used (decoding with 'undefined' codec failed"),
        ("idna", "the declared encoding cannot be used ("),
    ],
)
def test_an_unusable_declared_encoding_is_one_error_and_the_pages_are_read(codec, complaint):
    xml = read_xml(ENWIKI_SMALL)
    declared = f'<?xml version="1.0" encoding="{codec}"?>\n'.encode() + xml
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(declared)))
    assert pages == read_all(ENWIKI_SMALL)
    assert [e.reason for e in errors] == ["xml_error"] and complaint in errors[0].detail


def test_two_documents_one_after_the_other_are_both_read():
    first, second = read_xml(ENWIKI_SMALL), read_xml(ENWIKI_TABLES)
    items = list(iter_pages(io.BytesIO(first + second)))
    assert items == read_all(ENWIKI_SMALL) + read_all(ENWIKI_TABLES)


@pytest.mark.parametrize("data", [bytes(range(256)) * 100, b"\x00" * 5000, b"   \n", b"just text"])
def test_input_that_is_not_xml_is_one_error(data):
    items = list(iter_pages(io.BytesIO(data)))
    assert len(items) == 1 and items[0].reason in ("xml_error", "decode_error")


def test_a_corrupt_bz2_block_costs_the_pages_of_that_block_only(tmp_path):
    good, _ = pages_and_errors(enwiki_2014_items())
    data = ENWIKI_2014.read_bytes()
    damaged = tmp_path / "damaged.xml.bz2"
    damaged.write_bytes(flip_bytes(data, len(data) // 2))
    pages, errors = pages_and_errors(read_all(damaged))
    first_lost = next(n for n, (read, whole) in enumerate(zip(pages, good)) if read != whole)
    last_lost = len(good) - len(pages) + first_lost
    assert pages == good[:first_lost] + good[last_lost:]
    spans = page_spans(read_xml(ENWIKI_2014))
    assert spans[last_lost - 1][1] - spans[first_lost][0] < 1_100_000  # about one 900 kB block of XML
    assert [e.reason for e in errors] == ["read_error", "truncated"]
    assert "bad bz2 data after byte " in errors[0].detail and errors[0].detail.endswith(
        f"(after page {good[first_lost - 1].page_id})"
    )


def test_cut_bz2_yields_a_prefix_of_the_real_pages_then_one_error(tmp_path):
    good_pages, _ = pages_and_errors(enwiki_2014_items())
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(ENWIKI_2014.read_bytes()[:1_000_000])
    items = read_all(cut)
    pages, errors = pages_and_errors(items)
    assert len(errors) == 1 and items[-1] is errors[0]
    assert errors[0].reason == "truncated" and "the file ends at byte 1000000, inside a bz2 stream" in (
        errors[0].detail
    )
    assert 0 < len(pages) < len(good_pages)
    assert pages == good_pages[: len(pages)]


def test_a_cut_bz2_keeps_every_complete_page_before_the_cut(tmp_path):
    good, _ = pages_and_errors(enwiki_2014_items())
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(ENWIKI_2014.read_bytes()[:400_000])
    # bz2 restores whole blocks only: the pages that end in the blocks before the cut are the complete ones
    recoverable = len(bz2.BZ2Decompressor().decompress(cut.read_bytes()))
    complete = sum(end <= recoverable for _, end in page_spans(read_xml(ENWIKI_2014)))
    assert complete == 71
    items = read_all(cut)
    assert items[:-1] == good[:complete]
    assert items[-1].reason == "truncated" and "the file ends at byte 400000" in items[-1].detail
    assert items[-1].detail.endswith(f"(after page {good[complete - 1].page_id})")


def test_page_without_text_is_an_error_and_reading_goes_on():
    xml = read_xml(ENWIKI_SMALL)
    second = xml.index(b"<page>", xml.index(b"</page>"))
    text_start = xml.index(b"<text", second)
    text_end = xml.index(b"</text>", text_start) + len(b"</text>")
    items = list(iter_pages(io.BytesIO(xml[:text_start] + xml[text_end:])))
    assert [type(i) for i in items] == [Page, PageError, Page]
    assert items[1].reason == "no_text"
    assert items[1].where == "page 411964 'Computer accessibility'"


def test_deleted_revision_text_gives_a_page_without_text():
    xml = read_xml(ENWIKI_SMALL)
    second = xml.index(b"<page>", xml.index(b"</page>"))
    text_start = xml.index(b"<text", second)
    text_end = xml.index(b"</text>", text_start) + len(b"</text>")
    xml = xml[:text_start] + b'<text deleted="deleted" />' + xml[text_end:]
    pages, errors = pages_and_errors(iter_pages(io.BytesIO(xml)))
    assert errors == [] and pages[1].text is None and pages[2].text


def test_open_decompressed_reads_plain_gzip_and_bz2_alike(tmp_path):
    xml = read_xml(ENWIKI_SMALL)
    (tmp_path / "plain.xml").write_bytes(xml)
    (tmp_path / "dump.gz").write_bytes(gzip.compress(xml))
    expected = read_all(ENWIKI_SMALL)
    assert len(expected) == 3
    assert read_all(tmp_path / "plain.xml") == expected
    assert read_all(tmp_path / "dump.gz") == expected
    assert read_all(io.BytesIO(bz2.compress(xml))) == expected  # a file object without peek()


def test_fragment_of_pages_reads_like_the_whole_document():
    xml = read_xml(ENWIKI_SMALL)
    _, pages, footer = split_dump(xml)
    expected = list(iter_pages(io.BytesIO(xml)))
    assert list(iter_pages(io.BytesIO(b"".join(pages)), fragment=True)) == expected
    # The last stream of a multistream dump carries the closing tag.
    assert list(iter_pages(io.BytesIO(b"".join(pages) + footer), fragment=True)) == expected


def test_utf16_fragment_reads_like_the_whole_document():
    text = read_xml(BGWIKI_UTF16).decode("utf-16")
    fragment = "".join(re.findall(r"[ \t]*<page>.*?</page>\r?\n", text, re.S))
    expected = read_all(BGWIKI_UTF16)
    assert len(expected) == 3
    assert list(iter_pages(io.BytesIO(fragment.encode("utf-16")), fragment=True)) == expected


def test_memory_stays_bounded_by_one_page(monkeypatch):
    monkeypatch.setattr(wiki_pages, "CHUNK_BYTES", 1 << 16)
    xml = read_xml(ENWIKI_2014)
    stream = io.BytesIO(xml)
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        count = sum(1 for _ in iter_pages(stream))
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert count == 362
    # The largest page holds 0.2 MB of wikitext; keeping parsed pages in the tree would cost over 10 MB.
    assert peak < 3_000_000, peak


def test_read_siteinfo():
    with open_decompressed(ENWIKI_2014) as stream:
        site = read_siteinfo(stream)
    assert site is not None
    assert site.dbname == "enwiki"
    assert site.namespaces[6] == "File" and site.namespaces[14] == "Category"
    assert site.page_url("Abraham Lincoln") == "http://en.wikipedia.org/wiki/Abraham_Lincoln"
    with open_decompressed(BGWIKI_UTF16) as stream:
        bg = read_siteinfo(stream)
    assert bg is not None and bg.dbname == "bgwiki" and bg.namespaces[14] == "Категория"
    assert bg.page_url("Григориански календар") == (
        "https://bg.wikipedia.org/wiki/%D0%93%D1%80%D0%B8%D0%B3%D0%BE%D1%80%D0%B8%D0%B0%D0%BD%D1%81%D0%BA%D0%B8_"
        "%D0%BA%D0%B0%D0%BB%D0%B5%D0%BD%D0%B4%D0%B0%D1%80"
    )
    with open_decompressed(ENWIKI_TABLES) as stream:
        assert read_siteinfo(stream) is None


@pytest.mark.parametrize(
    ("head", "encoding"),
    [
        (b"\xef\xbb\xbf<mediawiki>", "utf-8-sig"),
        (b"\xff\xfe<\x00m\x00", "utf-16-le-bom"),
        (b"\xfe\xff\x00<\x00m", "utf-16-be-bom"),
        (b'<?xml version="1.0" encoding="ISO-8859-1"?><mediawiki>', "iso8859-1"),
        (b"<mediawiki>", "utf-8"),
    ],
)
def test_detect_encoding(head, encoding):
    assert xml_encoding.detect_encoding(head) == encoding


def test_latin1_declared_document_is_decoded():
    xml = read_xml(ENWIKI_SMALL).decode()
    page = re.search(r"[ \t]*<page>.*?</page>\n", xml, re.S).group()
    latin = f'<?xml version="1.0" encoding="ISO-8859-1"?>\n<mediawiki>\n{page}</mediawiki>\n'
    latin = latin.replace("AccessibleComputing", "Accessible Café")
    (item,) = iter_pages(io.BytesIO(latin.encode("latin-1")))
    assert item.title == "Accessible Café"
