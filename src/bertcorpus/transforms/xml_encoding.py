"""The encoding of an XML document from its first bytes, and the mark of bytes that are invalid in it.

A decoder given UNDECODABLE_MARK as its error handler turns each byte it cannot decode into a lone surrogate
(UNDECODED finds them), which no valid decoding yields: the page holding them is then found and rejected while the
rest of the stream decodes on (transforms/wiki_pages.py).
"""

from __future__ import annotations

import codecs
import re

UNDECODABLE_MARK = "wiki_pages.mark_undecodable"  # the error handler's registered name
UNDECODED = re.compile("[\ud800-\udfff]")


def _mark_undecodable(error: UnicodeError) -> tuple[str, int]:
    """Decode bytes that are invalid in the document's encoding to lone surrogates, which no valid decoding yields:
    the page holding them is then found and rejected while the rest of the stream decodes on."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    return "".join(chr(0xDC00 | byte) for byte in error.object[error.start : error.end]), error.end


codecs.register_error(UNDECODABLE_MARK, _mark_undecodable)


def detect_encoding(head: bytes) -> str:
    """The document's encoding from its byte-order mark or XML declaration; UTF-8 when neither says otherwise.

    A declared encoding that Python does not know, or cannot use here (one that is not ASCII-compatible, as the
    declaration was read, or that cannot mark the bytes it fails on), also gives UTF-8: the parser then reports the
    declaration, and the pages, most likely UTF-8 anyway, are still read."""
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
                try:  # a text encoding, ASCII-compatible, that can mark the bytes it cannot decode
                    readable = "<?xml".encode(name) == b"<?xml" and b"<?xml\xff\xfe".decode(
                        name, UNDECODABLE_MARK
                    ).startswith("<?xml")
                except (LookupError, UnicodeError):
                    readable = False
                return codecs.lookup(name).name if readable else "utf-8"
    return "utf-8"
