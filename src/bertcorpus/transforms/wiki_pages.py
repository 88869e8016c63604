"""Streaming reader for MediaWiki pages-articles XML dumps.

Dumps are tens of GB, so pages are parsed incrementally with a pull parser and each finished page is detached
from the tree at once: memory stays bounded by the largest single page. Damaged input never raises, and costs only
what is damaged. The stream is cut at <page> and </page> before it is parsed, so a malformed page, bytes that do not
decode, or stray text between pages give one PageError at their offset and reading resumes at the next <page>. A
truncated file or a corrupt compressed stream yields every complete page before it, then one PageError. The PageError
of a stretch that could not be decompressed says how many pages it took, counted or estimated (`lost`).

Elements are known by their local names, so any export schema version reads, with or without a namespace prefix.
What it yields is defined in wiki_page_items.py; the pages a damaged stretch took are estimated in
wiki_lost_pages.py, and the document's encoding is found by xml_encoding.py.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import quote
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

from bertcorpus.transforms.bz2_blocks import Bz2Reader, Damage
from bertcorpus.transforms.compression import DECOMPRESSION_ERRORS, UnreadableCompression
from bertcorpus.transforms.wiki_lost_pages import LostPages
from bertcorpus.transforms.wiki_page_items import Loss, Page, PageError, local_name, page_from_element
from bertcorpus.transforms.xml_encoding import UNDECODABLE_MARK, UNDECODED, detect_encoding

# Large enough that the per-call overhead of feeding the parser vanishes, small enough to keep memory flat.
CHUNK_BYTES = 1 << 20
# A page longer than this (in bytes of UTF-8 XML, characters of other encodings) is damage, not an article: MediaWiki
# caps an article's wikitext at 2 MiB, and XML escaping at most quadruples that. The cap keeps memory bounded when a
# </page> and every later <page> are missing.
MAX_PAGE_SIZE = 1 << 26

# Errors a decompressing or network-backed reader raises on damaged data.
READ_ERRORS = (*DECOMPRESSION_ERRORS, ValueError)
_TITLE = re.compile(r"<(?:[\w.-]+:)?title>([^<]{0,200})")
# Elements are known by their local names: a dump may put them in a namespace under a prefix (<mw:page>).
_PREFIX = r"((?:[A-Za-z_][\w.-]*:)?)"
_SITEINFO_END = re.compile(r"</(?:[\w.-]+:)?siteinfo\s*>")
_PAGE_START = re.compile(r"<(?:[\w.-]+:)?page[\s>]")
# The namespace of a prefix that a synthetic root declares: any name will do, as only local names are read.
_SYNTHETIC_NAMESPACE = "urn:bertcorpus:local-names"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


@dataclass(frozen=True)
class SiteInfo:
    """The <siteinfo> header: dbname names the wiki (enwiki), base is its main-page URL, namespaces maps key→name,
    and lang is the content language the root element declares (xml:lang, a MediaWiki code such as en or zh)."""

    dbname: str | None
    base: str | None
    namespaces: dict[int, str]
    lang: str | None = None

    def page_url(self, title: str) -> str | None:
        """The article URL as MediaWiki writes it: base's /wiki/ prefix, then the title with '_' for spaces,
        percent-encoded except for the characters MediaWiki leaves readable."""
        if not self.base or "/wiki/" not in self.base:
            return None
        prefix = self.base[: self.base.index("/wiki/") + len("/wiki/")]
        return prefix + quote(title.replace(" ", "_"), safe=";@$!*(),/~:")


def iter_pages(stream: BinaryIO, *, fragment: bool = False) -> Iterator[Page | PageError]:
    """Yield every page of a pages-articles XML byte stream, and a PageError for each damaged stretch.

    `fragment=True` reads a bare sequence of <page> elements, as one multistream byte range decompresses to; a
    closing </mediawiki> at its end (the last stream of a dump carries one) is accepted.
    """
    if isinstance(stream, Bz2Reader):  # its chunks carry the damage it skipped
        return iter_pages_from_chunks(stream.chunks(), fragment=fragment)
    # read1 hands over what one step of decompression gives: read would gather a whole chunk first and lose it,
    # pages that were complete included, when a compressed file is cut.
    read = getattr(stream, "read1", stream.read)
    return iter_pages_from_chunks(iter(lambda: read(CHUNK_BYTES), b""), fragment=fragment)


def iter_pages_from_chunks(chunks: Iterable[bytes | Damage], *, fragment: bool = False) -> Iterator[Page | PageError]:
    """iter_pages over an iterable of byte chunks; a read error raised by the iterable ends the stream with a
    PageError (`truncated` for a compressed file cut short, `unsupported_compression`, else `read_error`), and a
    Damage item among the chunks gives one and resumes at the next <page>."""
    reader = _PageReader(fragment)
    source = iter(chunks)
    while True:
        try:
            chunk = next(source)
        except StopIteration:
            yield from reader.finish()
            return
        except UnreadableCompression as exc:
            yield from reader.fail(str(exc), "unsupported_compression")
            return
        except EOFError as exc:  # a compressed file cut short
            yield from reader.fail(f"{type(exc).__name__}: {exc}", "truncated")
            return
        except READ_ERRORS as exc:
            yield from reader.fail(f"{type(exc).__name__}: {exc}")
            return
        if isinstance(chunk, Damage):
            yield from reader.resume_after(chunk)
        else:
            yield from reader.feed(chunk)


# Where the reader is in the stream: between pages (the text there goes to the parser), inside a page (held until
# its </page>), inside a page too large to hold, or skipping the rest of a stretch that could not be parsed.
_BETWEEN, _PAGE, _OVERSIZE, _SKIP = "between", "page", "oversize", "skip"


class _PageReader:
    """Cuts the decoded stream at <page> and </page> and feeds it to a pull parser one page at a time.

    A page goes to the parser whole, so an error in it is known to be that page's: the parser is then replaced by a
    fresh one under a synthetic root and the next page parses as if nothing had happened. The text between pages
    (the root start tag, <siteinfo>, </mediawiki>) goes to the same parser, so damage there is found too.

    UTF-8 goes to expat as bytes (the fast path). Any other encoding is decoded here and fed as str, so every codec
    Python knows is accepted and a fragment's synthetic root element can be written in the same form as its data.
    """

    def __init__(self, fragment: bool) -> None:
        self.fragment = fragment
        self.decoder: codecs.IncrementalDecoder | None = None
        self.started = False
        self.bytes_read = 0
        self.last_page: str | None = None
        self.buffer: bytes | str = b""
        self.base = 0  # offset in the XML of buffer[0]: bytes of UTF-8, characters of a decoded encoding
        self.pos = 0  # buffer[:pos] is done with
        self.scanned = 0  # inside a page: buffer[pos:scanned] holds neither </page> nor another <page
        self.state = _BETWEEN
        self.pages_begun = False  # a <page> has been seen
        self.any_element = False
        self._use_tokens(str_data=False)
        self.parser = XMLPullParser()
        self.open: list[Element] = []  # the elements the parser has open, outermost first
        self.root_started = False
        self.root_prefix: bytes | str | None = None  # the prefix a synthetic root declares; None: the document's own
        self.lost = LostPages()  # damaged stretches waiting for the pages after them to be estimated

    def _use_tokens(self, str_data: bool) -> None:
        """The tokens the stream is cut at, in the form of the data: bytes or str. A page's tags may carry a
        namespace prefix; its end tag is looked for with the prefix its start tag had."""

        def form(pattern: str):
            return re.compile(pattern if str_data else pattern.encode())

        self.page_start = form(f"<{_PREFIX}page[\\s>]")
        self.root_end = form(r"</(?:[\w.-]+:)?mediawiki\s*>")
        self.prefix = "" if str_data else b""
        self.page_end = "</page>" if str_data else b"</page>"
        self.unit = "character" if str_data else "byte"

    def _synthetic_root(self) -> bytes | str:
        """A root start tag in the pages' prefix (declared), so that their elements and the document's own end tag
        parse under it."""
        prefix = self.prefix if isinstance(self.prefix, str) else self.prefix.decode("ascii")
        tag = f'<{prefix}mediawiki xmlns:{prefix[:-1]}="{_SYNTHETIC_NAMESPACE}">' if prefix else "<mediawiki>"
        return tag if isinstance(self.buffer, str) else tag.encode("ascii")

    # -- input

    def feed(self, chunk: bytes) -> Iterator[Page | PageError]:
        if not self.started:
            chunk = self._start(chunk)
        self.bytes_read += len(chunk)
        data = self.decoder.decode(chunk) if self.decoder is not None else chunk
        self.buffer = self.buffer[self.pos :] + data
        self.base += self.pos
        self.scanned = max(self.scanned - self.pos, 0)
        self.pos = 0
        yield from self._split()

    def _start(self, chunk: bytes) -> bytes:
        self.started = True
        encoding = detect_encoding(chunk[:256])
        if encoding == "utf-8-sig" and self.fragment:
            chunk = chunk[len(codecs.BOM_UTF8) :]
        elif encoding not in ("utf-8", "utf-8-sig"):
            codec = "utf-16" if encoding.endswith("-bom") else encoding
            self.decoder = codecs.getincrementaldecoder(codec)(UNDECODABLE_MARK)
            self.buffer = ""
            self._use_tokens(str_data=True)
        self._new_parser(synthetic_root=self.fragment)
        return chunk

    def finish(self) -> Iterator[Page | PageError]:
        """End of input: a complete document closes cleanly; an empty one is reported as empty (whatever its
        compression), anything else as truncated."""
        yield from self._estimate_gaps()
        if not self.started:
            # an empty fragment is an empty range; an empty document is one error, unless a damage report said why
            if not self.fragment and self.state != _SKIP:
                yield self._error(0, "empty", "the input is empty")
            return
        if self.decoder is not None:
            self.buffer = self.buffer[self.pos :] + self.decoder.decode(b"", final=True)
            self.base, self.pos = self.base + self.pos, 0
            yield from self._split()
        if self.state == _PAGE:
            yield self._error(self.base + self.pos, "truncated", "input ends inside a page", self._rest())
            return
        if self.state == _BETWEEN:
            yield from self._between(self.buffer[self.pos :], self.base + self.pos)
        if self.fragment or self.state == _SKIP or self._closed():
            return
        if not self.any_element:
            yield self._error(self.base + len(self.buffer), "xml_error", "the input holds no XML element")
        else:
            yield self._error(self.base + len(self.buffer), "truncated", "input ends before </mediawiki>")

    def fail(self, detail: str, reason: str = "read_error") -> Iterator[Page | PageError]:
        """A read error ends the stream: the page it cut is lost with it, and what followed, which is not known."""
        yield from self._estimate_gaps()
        lost = None if reason == "unsupported_compression" else Loss(None)
        yield PageError(f"byte {self.bytes_read}", reason, f"{detail} ({self._after()})", lost)

    def resume_after(self, damage: Damage) -> Iterator[Page | PageError]:
        """A gap in the input: the page it cuts is lost, and reading resumes at the next <page>. The error says how
        many pages the gap took: as the damage counted them, or estimated once the pages after it are seen."""
        yield from self._estimate_gaps()
        at = self.base + (self.pos if self.state == _PAGE else len(self.buffer))
        cut_page = self._rest()[:4096] if self.state == _PAGE else ""
        detail = damage.detail + ("; the page there is cut" if cut_page else "")
        if damage.lost_pages is not None:
            counted = f"; {damage.lost_pages:,} pages lost" if damage.lost_pages else ""
            yield self._error(at, damage.reason, detail + counted, cut_page, Loss(damage.lost_pages))
        elif damage.lost_bytes is not None:
            self.lost.add_gap(at, damage.reason, detail, cut_page, self._after(), damage.lost_bytes)
        else:
            yield self._error(
                at, damage.reason, f"{detail}; how many pages it held cannot be told", cut_page, Loss(None)
            )
        self.pos, self.state = len(self.buffer), _SKIP
        if self.decoder is not None:
            self.decoder.reset()
        self._new_parser(synthetic_root=True)

    # -- cutting the stream into pages

    def _split(self) -> Iterator[Page | PageError]:
        buffer = self.buffer
        while True:
            if self.state in (_BETWEEN, _SKIP):
                found = self.page_start.search(buffer, self.pos)
                # without a <page here, keep the last characters: they may begin one, or a </mediawiki>
                cut = found.start() if found else max(len(buffer) - len("</mediawiki"), self.pos)
                if self.state == _BETWEEN and cut > self.pos:
                    yield from self._between(buffer[self.pos : cut], self.base + self.pos)
                self.pos = cut
                if found is None:
                    return
                self.state, self.scanned, self.pages_begun = _PAGE, cut + 1, True
                self._page_prefix(found)
                yield from self._page_begins(self.base + cut)
                continue
            end = buffer.find(self.page_end, self.scanned)
            following = self.page_start.search(buffer, self.scanned, end if end >= 0 else len(buffer))
            if following is not None:
                if self.state == _PAGE:
                    yield self._error(
                        self.base + self.pos,
                        "xml_error",
                        "the page is not closed before the next <page>",
                        buffer[self.pos : following.start()],
                    )
                self.pos, self.scanned, self.state = following.start(), following.start() + 1, _PAGE
                self._page_prefix(following)
                yield from self._page_begins(self.base + following.start())
            elif end >= 0:
                stop = end + len(self.page_end)
                if self.state == _PAGE and stop - self.pos > MAX_PAGE_SIZE:
                    yield self._too_large(buffer[self.pos : stop])
                elif self.state == _PAGE:
                    yield from self._parse_page(buffer[self.pos : stop], self.base + self.pos)
                self.pos, self.state = stop, _BETWEEN
            else:
                self.scanned = max(len(buffer) - len("</page"), self.scanned)  # a token may straddle the chunks
                if self.state == _PAGE and len(buffer) - self.pos > MAX_PAGE_SIZE:
                    yield self._too_large(self._rest())
                    self.state = _OVERSIZE
                if self.state == _OVERSIZE:
                    self.pos = self.scanned
                return

    # -- estimating what a gap held

    def _page_begins(self, offset: int) -> Iterator[PageError]:
        if self.lost.page_begins(offset):
            yield from self._estimate_gaps()

    def _estimate_gaps(self) -> Iterator[PageError]:
        """The errors of the gaps seen so far, each with the pages it held (transforms/wiki_lost_pages.py)."""
        # offsets count characters where the XML is decoded here: sizes in bytes come through the ratio
        bytes_per_unit = self.bytes_read / max(self.base + len(self.buffer), 1) if self.decoder else 1.0
        for gap, detail, loss in self.lost.estimated(bytes_per_unit):
            yield self._error(gap.offset, gap.reason, detail, gap.cut_page, loss, gap.last_page)

    def _page_prefix(self, start) -> None:
        """Look for the end tag of the page just found with the prefix its start tag has."""
        prefix = start.group(1)
        if prefix != self.prefix:
            self.prefix = prefix
            self.page_end = "</" + prefix + "page>" if isinstance(prefix, str) else b"</" + prefix + b"page>"

    def _too_large(self, piece: bytes | str) -> PageError:
        return self._error(
            self.base + self.pos, "page_too_large", f"the page is longer than {MAX_PAGE_SIZE:,} {self.unit}s", piece
        )

    def _rest(self) -> str | bytes:
        return self.buffer[self.pos :]

    # -- parsing

    def _new_parser(self, synthetic_root: bool) -> None:
        """A fresh parser; under a synthetic root, pages parse as children of a <mediawiki> that is already open."""
        self.parser = XMLPullParser(events=("start", "end"))
        self.open = []
        self.root_started = False
        self.root_prefix = self.prefix if synthetic_root else None
        if synthetic_root:
            self.parser.feed(self._synthetic_root())
            self._track(self.parser.read_events())

    def _track(self, events) -> Element | None:
        """Follow the parser's events; returns the first element started."""
        first = None
        for event, elem in events:
            if event == "start":
                if first is None:
                    first = elem
                self.open.append(elem)
                self.root_started = self.any_element = True
            else:
                self.open.pop()
        return first

    def _closed(self) -> bool:
        return self.root_started and not self.open

    def _between(self, text: bytes | str, offset: int) -> Iterator[PageError]:
        """Feed the text between pages to the parser, a document's end tag and what follows it apart."""
        while text and self.state == _BETWEEN:
            end = self.root_end.search(text)
            part = text if end is None else text[: end.end()]
            yield from self._feed_between(part, offset)
            text, offset = text[len(part) :], offset + len(part)

    def _feed_between(self, text: bytes | str, offset: int) -> Iterator[PageError]:
        """Damage between pages is one error, and the rest of the stretch is skipped."""
        if self._closed() and text.strip():
            self._new_parser(synthetic_root=self.fragment)  # a second document follows the first
        problem = None
        if self.decoder is not None and UNDECODED.search(text):
            problem = ("decode_error", "bytes that are not valid in the document's encoding")
        else:
            try:
                self.parser.feed(text)
                self._track(self.parser.read_events())
                for elem in self.open:  # what ended here is not a page and need not be kept
                    del elem[:]
            except ParseError as exc:
                problem = ("xml_error", _without_position(exc))
            except (LookupError, UnicodeError) as exc:  # expat asks Python for an encoding it does not know itself
                problem = ("xml_error", f"the declared encoding cannot be used ({exc})")
        if problem is not None:
            place = "between pages" if self.pages_begun else "before the first <page>"
            yield self._error(offset, problem[0], f"{problem[1]}, {place}")
            self.state = _SKIP
            self._new_parser(synthetic_root=True)

    def _parse_page(self, piece: bytes | str, offset: int) -> Iterator[Page | PageError]:
        if self.decoder is not None and UNDECODED.search(piece):
            yield self._error(offset, "decode_error", "bytes that are not valid in the document's encoding", piece)
            return
        # No root is open (the document has none, or it was closed before this page), or a synthetic one that does
        # not declare this page's prefix.
        if not self.open or (self.root_prefix is not None and self.root_prefix != self.prefix):
            self._new_parser(synthetic_root=True)
        depth = len(self.open)
        try:
            self.parser.feed(piece)
            page = self._track(self.parser.read_events())
        except ParseError as exc:
            yield self._error(offset, *self._parse_problem(exc, piece), piece)
            self._new_parser(synthetic_root=True)
            return
        if page is None or len(self.open) != depth:  # </page> was inside a comment or CDATA
            yield self._error(offset, "xml_error", "the page is not closed", piece)
            self._new_parser(synthetic_root=True)
            return
        self.open[-1].remove(page)
        item = page_from_element(page)
        if isinstance(item, Page):
            self.last_page = str(item.page_id)
            self.lost.page_read(item.page_id)
        yield item

    def _parse_problem(self, exc: ParseError, piece: bytes | str) -> tuple[str, str]:
        """Expat calls bytes that are not UTF-8 an invalid token, like any other: tell them apart for the record."""
        if isinstance(piece, bytes):
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError as bad:
                return "decode_error", f"{bad.reason}: byte {bad.start} of the page is not UTF-8"
        return "xml_error", _without_position(exc)

    def _error(
        self,
        offset: int,
        reason: str,
        detail: str,
        piece: bytes | str = "",
        lost: Loss | None = None,
        after: str | None = None,
    ) -> PageError:
        """One PageError at an offset of the XML; the detail names the page's title where it can be found, and the
        last good page (`after`, where it was said before)."""
        head = piece[:4096]
        title = _TITLE.search(head if isinstance(head, str) else head.decode("utf-8", "replace"))
        named = f"page {title.group(1)!r}: " if title else ""
        return PageError(f"{self.unit} {offset}", reason, f"{named}{detail} ({after or self._after()})", lost)

    def _after(self) -> str:
        return f"after page {self.last_page}" if self.last_page else "before any complete page"


def _without_position(exc: ParseError) -> str:
    """Expat's message without its line and column, which count from the last reset, not from the file's start."""
    return str(exc).split(": line ", 1)[0]


def read_siteinfo(stream: BinaryIO, *, max_bytes: int = 1 << 22) -> SiteInfo | None:
    """Parse the <siteinfo> header, reading only the head of the stream; None when there is no header."""
    head = b""
    text = ""
    while len(head) < max_bytes and not _SITEINFO_END.search(text) and not _PAGE_START.search(text):
        try:
            chunk = stream.read(1 << 16)
        except READ_ERRORS:
            return None
        if not chunk:
            break
        head += chunk
        codec = detect_encoding(head[:256])
        text = head.decode("utf-16" if codec.endswith("-bom") else codec, errors="ignore")
    end = _SITEINFO_END.search(text)
    if end is None:
        return None
    # Up to the end of <siteinfo>: the root stays open, and the elements that ended are what is read.
    parser = XMLPullParser(events=("start", "end"))
    dbname = base = lang = None
    namespaces: dict[int, str] = {}
    try:
        parser.feed(text[: end.end()])
        for event, elem in parser.read_events():
            name = local_name(elem.tag)
            if event == "start":
                if name == "mediawiki":
                    lang = elem.get(_XML_LANG)
            elif name == "dbname":
                dbname = elem.text
            elif name == "base":
                base = elem.text
            elif name == "namespace" and elem.get("key", "").lstrip("-").isdigit():
                namespaces[int(elem.get("key", ""))] = elem.text or ""
    except ParseError:
        return None
    return SiteInfo(dbname, base, namespaces, lang)
