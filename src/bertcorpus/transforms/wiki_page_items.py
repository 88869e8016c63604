"""What a dump's reader yields: a Page, built from its complete <page> element, or a PageError for a page or a
stretch of input that could not be read, with the Loss of pages that a damaged stretch took (transforms/wiki_pages.py
reads the stream; transforms/wiki_lost_pages.py estimates the losses).

Elements are known by their local names, so any export schema version reads, with or without a namespace prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.etree.ElementTree import Element


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
class Loss:
    """The pages a damaged stretch took with it, beyond the items read: counted, at most (bound by the ids of the
    pages on either side), estimated, or None where that cannot be told."""

    pages: int | None
    estimated: bool = False
    bound: bool = False  # pages is at least what was lost (the page ids on either side of the gap bound it)


@dataclass(frozen=True)
class PageError:
    """A page or a stretch of input that could not be read; `where` is an offset or a page id/title. `lost` is set
    for a stretch of input that could not be decompressed or read, and says how many pages went with it."""

    where: str
    reason: str
    detail: str
    lost: Loss | None = None


class TextTooLarge(ValueError):
    """A page whose clean or converted text would be longer than the page cap: the page is one error
    (`page_too_large`), and the text is never built. A few hundred bytes of rules or {{PAGENAME}} can otherwise
    multiply into gigabytes of text."""


def local_name(tag: str) -> str:
    """An element's name without its namespace."""
    return tag.rpartition("}")[2]


def page_from_element(page: Element) -> Page | PageError:
    """Build a Page from a complete <page> element; a page without <text> or a title, or with bad ids, is a
    PageError."""
    title = ns = page_id = None
    redirect = False
    revision: Element | None = None
    for child in page:
        name = local_name(child.tag)
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
    if not title:
        return PageError(where, "bad_page_header", "page has no title")
    revision_id = timestamp = None
    text_elem = None
    if revision is not None:
        for child in revision:
            name = local_name(child.tag)
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
