"""Streaming reader for MediaWiki pages-articles XML dumps.

Dumps are tens of GB, so pages are parsed incrementally with a pull parser and each finished page is detached
from the tree at once: memory stays bounded by the largest single page. Damaged input (a truncated file, a corrupt
compressed stream, malformed XML) never raises: every complete page before the damage is yielded, followed by
exactly one PageError, so a pipeline can record the damage as a dead letter and carry on.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import quote
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

# Large enough that the per-call overhead of feeding the parser vanishes, small enough to keep memory flat.
CHUNK_BYTES = 1 << 20

# Errors a decompressing or network-backed reader raises on damaged data.
_READ_ERRORS = (OSError, EOFError, ValueError, zlib.error)


@dataclass(frozen=True)
class Page:
    """One <page> of a dump; text is None when the revision text was deleted (<text deleted="deleted"/>)."""

    page_id: int
    ns: int
    title: str
    revision_id: int | None
    timestamp: str | None
    redirect: bool
    text: str | None


@dataclass(frozen=True)
class PageError:
    """A page or a stretch of input that could not be read; `where` is a byte offset or a page id/title."""

    where: str
    reason: str
    detail: str


@dataclass(frozen=True)
class SiteInfo:
    """The <siteinfo> header: dbname names the wiki (enwiki), base is its main-page URL, namespaces maps key→name."""

    dbname: str | None
    base: str | None
    namespaces: dict[int, str]

    def page_url(self, title: str) -> str | None:
        """The article URL as MediaWiki writes it: base's /wiki/ prefix, then the title with '_' for spaces,
        percent-encoded except for the characters MediaWiki leaves readable."""
        if not self.base or "/wiki/" not in self.base:
            return None
        prefix = self.base[: self.base.index("/wiki/") + len("/wiki/")]
        return prefix + quote(title.replace(" ", "_"), safe=";@$!*(),/~:")


def detect_encoding(head: bytes) -> str:
    """The document's encoding from its byte-order mark or XML declaration; UTF-8 when neither says otherwise."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    if head.startswith(codecs.BOM_UTF16_LE):
        return "utf-16-le-bom"
    if head.startswith(codecs.BOM_UTF16_BE):
        return "utf-16-be-bom"
    if len(head) >= 2 and head[0] and not head[1]:  # "<" or a space, then a zero byte
        return "utf-16-le"
    if len(head) >= 2 and not head[0] and head[1]:
        return "utf-16-be"
    if head.startswith(b"<?xml"):
        declaration = head[: head.find(b"?>")]
        for mark in (b'"', b"'"):
            at = declaration.find(b"encoding=" + mark)
            if at >= 0:
                name = declaration[at + len(b"encoding=") + 1 :].split(mark, 1)[0].decode("ascii", "replace")
                return codecs.lookup(name).name
    return "utf-8"


def iter_pages(stream: BinaryIO, *, fragment: bool = False) -> Iterator[Page | PageError]:
    """Yield every page of a pages-articles XML byte stream, then at most one PageError for damage.

    `fragment=True` reads a bare sequence of <page> elements, as one multistream byte range decompresses to; a
    closing </mediawiki> at its end (the last stream of a dump carries one) is accepted.
    """
    return iter_pages_from_chunks(iter(lambda: stream.read(CHUNK_BYTES), b""), fragment=fragment)


def iter_pages_from_chunks(chunks: Iterable[bytes], *, fragment: bool = False) -> Iterator[Page | PageError]:
    """iter_pages over an iterable of byte chunks; a read error raised by the iterable becomes the PageError."""
    reader = _PageReader(fragment)
    source = iter(chunks)
    while not reader.failed:
        try:
            chunk = next(source)
        except StopIteration:
            yield from reader.finish()
            return
        except _READ_ERRORS as exc:
            yield from reader.fail("read_error", f"{type(exc).__name__}: {exc}")
            return
        yield from reader.feed(chunk)


class _PageReader:
    """Feeds bytes to a pull parser and turns its events into Pages, detaching each finished page at once.

    UTF-8 goes to expat as bytes (the fast path). Any other encoding is decoded here and fed as str, so every codec
    Python knows is accepted and a fragment's synthetic root element can be written in the same form as its data.
    """

    def __init__(self, fragment: bool) -> None:
        self.fragment = fragment
        self.parser = XMLPullParser(events=("start", "end"))
        self.decoder: codecs.IncrementalDecoder | None = None
        self.started = False
        self.root: Element | None = None
        self.depth = 0
        self.closed = False
        self.failed = False
        self.bytes_read = 0
        self.last_page: str | None = None

    def feed(self, chunk: bytes) -> Iterator[Page | PageError]:
        if not self.started:
            self.started = True
            encoding = detect_encoding(chunk[:256])
            if encoding == "utf-8-sig" and self.fragment:
                chunk = chunk[len(codecs.BOM_UTF8) :]
            elif encoding not in ("utf-8", "utf-8-sig"):
                codec = "utf-16" if encoding.endswith("-bom") else encoding
                self.decoder = codecs.getincrementaldecoder(codec)("strict")
            if self.fragment:
                self.parser.feed("<mediawiki>" if self.decoder else b"<mediawiki>")
        self.bytes_read += len(chunk)
        if self.decoder is not None:
            try:
                data: str | bytes = self.decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                yield from self.fail("decode_error", str(exc))
                return
        else:
            data = chunk
        self.parser.feed(data)
        yield from self.drain()

    def finish(self) -> Iterator[Page | PageError]:
        """End of input: a complete document closes cleanly; anything else is reported as truncated."""
        if not self.started:
            if not self.fragment:  # an empty fragment is an empty range; an empty document is damage
                yield from self.fail("truncated", "input is empty")
            return
        if self.decoder is not None:
            try:
                self.parser.feed(self.decoder.decode(b"", final=True))
            except UnicodeDecodeError as exc:
                yield from self.fail("decode_error", str(exc))
                return
            yield from self.drain()
        if self.failed or self.closed:
            return
        if self.fragment and self.depth <= 1:
            self.parser.feed("</mediawiki>" if self.decoder else b"</mediawiki>")
            yield from self.drain()
            return
        if self.root is None:
            yield from self.fail("xml_error", "the input holds no XML element")
        else:
            yield from self.fail(
                "truncated", "input ends " + ("inside a page" if self.depth > 1 else "before </mediawiki>")
            )

    def fail(self, reason: str, detail: str, where: str | None = None) -> Iterator[Page | PageError]:
        """Yield the pages already parsed, then the one PageError that ends the stream."""
        yield from self.drain()
        if not self.failed:
            self.failed = True
            after = f"after page {self.last_page}" if self.last_page else "before any complete page"
            yield PageError(where or f"byte {self.bytes_read}", reason, f"{detail} ({after})")

    def drain(self) -> Iterator[Page | PageError]:
        if self.failed:
            return
        try:
            for event, elem in self.parser.read_events():
                if event == "start":
                    if self.root is None:
                        self.root = elem
                    self.depth += 1
                    continue
                self.depth -= 1
                if self.depth == 0:
                    self.closed = True
                elif self.depth == 1 and _local(elem.tag) == "page":
                    item = _page_from_element(elem)
                    if isinstance(item, Page):
                        self.last_page = str(item.page_id)
                    assert self.root is not None
                    self.root.clear()
                    yield item
        except ParseError as exc:
            line, column = exc.position
            yield from self.fail("xml_error", str(exc), f"line {line} column {column}")


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _page_from_element(page: Element) -> Page | PageError:
    """Build a Page from a complete <page> element; a page without <text> or with bad ids is a PageError."""
    title = ns = page_id = None
    redirect = False
    revision: Element | None = None
    for child in page:
        name = _local(child.tag)
        if name == "title":
            title = child.text or ""
        elif name == "ns":
            ns = child.text
        elif name == "id":
            page_id = child.text
        elif name == "redirect":
            redirect = True
        elif name == "revision":
            revision = child  # a full-history dump lists revisions oldest first: keep the newest
    where = f"page {page_id} {title!r}" if page_id else f"page {title!r}"
    try:
        pid = int(page_id or "")
        nsn = int(ns) if ns is not None else 0
    except ValueError:
        return PageError(where, "bad_page_header", f"page id {page_id!r}, namespace {ns!r}")
    revision_id = timestamp = None
    text_elem = None
    if revision is not None:
        for child in revision:
            name = _local(child.tag)
            if name == "id":
                revision_id = child.text
            elif name == "timestamp":
                timestamp = child.text
            elif name == "text":
                text_elem = child
    if text_elem is None:
        return PageError(where, "no_text", "page has no <text> element")
    text = None if text_elem.get("deleted") is not None else (text_elem.text or "")
    try:
        rid = int(revision_id) if revision_id else None
    except ValueError:
        rid = None
    return Page(pid, nsn, title or "", rid, timestamp, redirect, text)


def read_siteinfo(stream: BinaryIO, *, max_bytes: int = 1 << 22) -> SiteInfo | None:
    """Parse the <siteinfo> header, reading only the head of the stream; None when there is no header."""
    head = b""
    text = ""
    while len(head) < max_bytes and "</siteinfo>" not in text and "<page" not in text:
        try:
            chunk = stream.read(1 << 16)
        except _READ_ERRORS:
            return None
        if not chunk:
            break
        head += chunk
        codec = detect_encoding(head[:256])
        text = head.decode("utf-16" if codec.endswith("-bom") else codec, errors="ignore")
    end = text.find("</siteinfo>")
    if end < 0:
        return None
    parser = XMLPullParser(events=("end",))
    parser.feed(text[: end + len("</siteinfo>")] + "</mediawiki>")
    dbname = base = None
    namespaces: dict[int, str] = {}
    try:
        parser.close()
        for _, elem in parser.read_events():
            name = _local(elem.tag)
            if name == "dbname":
                dbname = elem.text
            elif name == "base":
                base = elem.text
            elif name == "namespace" and elem.get("key", "").lstrip("-").isdigit():
                namespaces[int(elem.get("key", ""))] = elem.text or ""
    except ParseError:
        return None
    return SiteInfo(dbname, base, namespaces)


def open_dump(path_or_fileobj: str | os.PathLike | BinaryIO) -> BinaryIO:
    """Open a dump for reading, decompressing .bz2 (single or multistream) and .gz by their magic bytes.

    Sniffing the content rather than the suffix also handles renamed or suffix-less files. The caller closes it.
    """
    if isinstance(path_or_fileobj, (str, os.PathLike)):
        raw: BinaryIO = open(path_or_fileobj, "rb")  # noqa: SIM115 - returned to the caller
    else:
        raw = path_or_fileobj
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    magic = raw.peek(3)[:3]  # type: ignore[attr-defined]
    if magic == b"BZh":
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    return raw
