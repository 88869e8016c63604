"""Builders for Wikipedia test inputs made from the real samples in tests/data/wiki (see DATA.md there)."""

from __future__ import annotations

import bz2
import html
import json
import re
from pathlib import Path

WIKI_DATA = Path(__file__).parent / "data" / "wiki"
ENWIKI_2014 = WIKI_DATA / "enwiki-2014-sample-truncated.xml.bz2"
ENWIKI_TABLES = WIKI_DATA / "enwiki-table-markup.xml.bz2"
ENWIKI_SMALL = WIKI_DATA / "enwiki-small-sample.xml.bz2"
BGWIKI_UTF16 = WIKI_DATA / "bgwiki-shortened-utf16.xml.bz2"
VIWIKI = WIKI_DATA / "viwiki-sample-truncated.xml"
SZLWIKI_INDEX = WIKI_DATA / "szlwiki-20260201-pages-articles-multistream-index.txt.bz2"
GOLDEN = WIKI_DATA / "golden"
# Long articles of five other Wikipedias (multilingual/DATA.md), by language.
MULTILINGUAL = {
    lang: WIKI_DATA / "multilingual" / f"{lang}wiki-sample.xml.bz2" for lang in ("ja", "vi", "el", "bn", "uk")
}

ALL_DUMPS = (ENWIKI_2014, ENWIKI_TABLES, ENWIKI_SMALL, BGWIKI_UTF16, VIWIKI)

_PAGE = re.compile(rb"[ \t]*<page>.*?</page>\n?", re.S)
_PAGE_ID = re.compile(rb"<id>(\d+)</id>")
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S)


def read_xml(path: Path) -> bytes:
    """The XML bytes of a sample, decompressed when it is a .bz2 file."""
    data = path.read_bytes()
    return bz2.decompress(data) if path.suffix == ".bz2" else data


def split_dump(xml: bytes) -> tuple[bytes, list[bytes], bytes]:
    """Cut a UTF-8 dump into its header (root start tag and siteinfo), its <page> elements and the closing tag.

    A truncated dump has no closing tag; the footer is then the one a complete dump would have.
    """
    pages = [m.group() for m in _PAGE.finditer(xml)]
    if not pages:
        raise ValueError("no <page> element found")
    first = xml.index(pages[0])
    last_end = xml.rindex(pages[-1]) + len(pages[-1])
    footer = xml[last_end:] if b"</mediawiki>" in xml[last_end:] else b"</mediawiki>\n"
    return xml[:first], pages, footer


def build_multistream(
    pages_xml_path_or_bytes: Path | str | bytes, out_dir: Path | str, pages_per_stream: int = 100
) -> tuple[Path, Path]:
    """Write a multistream dump and its bz2 index the way Wikimedia lays them out.

    Stream 1 is the header (<mediawiki ...><siteinfo>...</siteinfo>), then every `pages_per_stream` pages form one
    bz2 stream, and a last stream holds </mediawiki>. The index has one `offset:page_id:title` line per page, the
    offset being where that page's stream starts. Returns (dump_path, index_path).
    """
    if isinstance(pages_xml_path_or_bytes, bytes):
        xml = pages_xml_path_or_bytes
        stem = "sample"
    else:
        source = Path(pages_xml_path_or_bytes)
        xml = read_xml(source)
        stem = source.name.split(".")[0]
    header, pages, footer = split_dump(xml)
    out = Path(out_dir)
    dump_path = out / f"{stem}-multistream.xml.bz2"
    index_path = out / f"{stem}-multistream-index.txt.bz2"
    index_lines: list[bytes] = []
    with open(dump_path, "wb") as dump:
        dump.write(bz2.compress(header))
        for first in range(0, len(pages), pages_per_stream):
            offset = dump.tell()
            group = pages[first : first + pages_per_stream]
            for page in group:
                page_id = _PAGE_ID.search(page).group(1)  # type: ignore[union-attr]
                title = html.unescape(_TITLE.search(page).group(1).decode())  # type: ignore[union-attr]
                index_lines.append(b"%d:%s:%s\n" % (offset, page_id, title.encode()))
            dump.write(bz2.compress(b"".join(group)))
        dump.write(bz2.compress(footer))
    index_path.write_bytes(bz2.compress(b"".join(index_lines)))
    return dump_path, index_path


def flip_bytes(data: bytes, at: int, count: int = 16) -> bytes:
    """A copy of data with `count` bytes inverted from offset `at`: corruption that a checksum must catch."""
    damaged = bytes(b ^ 0xFF for b in data[at : at + count])
    return data[:at] + damaged + data[at + count :]


def wiki_articles(path: Path, min_chars: int = 100) -> list[tuple[str, str]]:
    """(title, clean text) of every article of a sample that extract-wiki would keep, as its cleaner makes it."""
    from bertcorpus.pipeline.extract.wiki_job import select_article
    from bertcorpus.transforms.wiki_pages import Page, iter_pages

    with bz2.open(path) if path.suffix == ".bz2" else open(path, "rb") as f:
        pages = [p for p in iter_pages(f) if isinstance(p, Page)]
    articles = [(p.title, select_article(p, min_chars)[0]) for p in pages]
    return [(title, text) for title, text in articles if text]


# Articles per language of tests/data/wiki/multilingual, in very different amounts: p runs from about 0.6 (ja) down
# to a few hundredths (uk).
LANGUAGE_ARTICLES = {"ja": 30, "vi": 12, "el": 6, "bn": 3, "uk": 2}


def write_language_articles(path: Path) -> Path:
    """LANGUAGE_ARTICLES's articles as JSONL documents (`id`, `text`, `language`), at `path`."""
    with path.open("w", encoding="utf-8") as f:
        for lang, count in LANGUAGE_ARTICLES.items():
            for number, (_, text) in enumerate(wiki_articles(MULTILINGUAL[lang])[:count]):
                f.write(json.dumps({"id": f"{lang}:{number}", "text": text, "language": lang}, ensure_ascii=False))
                f.write("\n")
    return path


def mixed_script_articles() -> list[tuple[str, str, str]]:
    """(id, text, language) of real articles of several scripts: 60 English ones, four each in Japanese, Vietnamese,
    Greek and Ukrainian, and a Chinese one that mixes both of its scripts."""
    docs = [(f"en:{n}", text, "en") for n, (_, text) in enumerate(wiki_articles(ENWIKI_2014)[:60])]
    for lang in ("ja", "vi", "el", "uk"):
        docs += [(f"{lang}:{n}", text, lang) for n, (_, text) in enumerate(wiki_articles(MULTILINGUAL[lang])[:4])]
    chinese = Path(__file__).parent / "data" / "zh" / "zhwiki-hanyu-plain.txt"
    docs.append(("zh:0", chinese.read_text(encoding="utf-8"), "zh"))
    return docs


def write_articles(path: Path, articles: list[tuple[str, str, str]]) -> Path:
    """Articles as JSONL documents (`id`, `text`, `language`)."""
    with path.open("w", encoding="utf-8") as f:
        for doc_id, text, language in articles:
            f.write(json.dumps({"id": doc_id, "text": text, "language": language}, ensure_ascii=False) + "\n")
    return path
