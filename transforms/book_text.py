"""Book files to clean running text: decoding, boilerplate removal, paragraph rebuilding and dedup keys.

The functions here are pure (no Beam) so that the extract-books job, the tests and the benchmark all run the
same code. Everything works on whole strings with compiled regular expressions; Python-level loops run per
paragraph block, never per character, which keeps a single core well above 10 MB/s of raw input.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "BookRejection",
    "CleanBook",
    "DecodedBook",
    "clean_book",
    "decode_book",
    "dedup_key",
    "jaccard_estimate",
    "looks_sentence_per_line",
    "minhash_signature",
    "read_hf_bookcorpus_lines",
]


@dataclass(frozen=True, slots=True)
class DecodedBook:
    """Text of a book file with LF line endings, the encoding it was read as, and how much was patched.

    ``replaced`` counts U+FFFD characters introduced for undecodable bytes; ``mojibake_fixed`` counts
    double-encoded sequences (``â€™`` and the like) turned back into the characters they stood for.
    """

    text: str
    encoding: str
    replaced: int = 0
    mojibake_fixed: int = 0


@dataclass(frozen=True, slots=True)
class BookRejection:
    """Why a file yields no text: ``empty``, ``binary`` or ``undecodable``, with a human-readable detail."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class CleanBook:
    """Running text (paragraphs separated by one blank line), the title from a PG header, and line counts
    of what was dropped, by kind, so that the job can report where the bytes went."""

    text: str
    title: str | None
    removed: dict[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------------

# Signatures of container and image formats that are sometimes mislabelled as .txt.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"(\xb5/\xfd", "zstd"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "rar"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2 (doc)"),
)
_BZIP2 = re.compile(rb"BZh[1-9]1AY&SY")

_UTF8_BOM = b"\xef\xbb\xbf"
# UTF-32 BOMs first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_WIDE_BOMS: tuple[tuple[bytes, str], ...] = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
_REPLACEMENT_BYTES = {
    "utf-8": b"\xef\xbf\xbd",
    "utf-16-le": b"\xfd\xff",
    "utf-16-be": b"\xff\xfd",
    "utf-32-le": b"\xfd\xff\x00\x00",
    "utf-32-be": b"\x00\x00\xff\xfd",
}

# C0 controls that never occur in text files (tab, LF, FF, CR and the DOS end-of-file mark are allowed).
_BINARY_CONTROLS = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 26)) + b"\x7f"
_FF_TO_LF = bytes.maketrans(b"\x0c", b"\n")
_DROP_BYTES = _BINARY_CONTROLS + b"\x1a"
_HIGH_BYTES = bytes(range(128, 256))
_C1_BYTE = re.compile(rb"[\x80-\x9f]")
_TEXT_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_MAX_CONTROL_SHARE = 0.01
_MAX_REPLACED_SHARE = 0.01
# A Western single-byte text has a few per cent of non-ASCII bytes; far more means another script
# (KOI8-R, GBK, ...) that cp1252 would silently turn into nonsense.
_MAX_LEGACY_HIGH_SHARE = 0.25

# Mojibake: UTF-8 bytes that were once decoded as cp1252 and re-encoded. Only lead characters that are
# (almost) never followed by a continuation-range character in real text are repaired.


def _cp1252_upper_half() -> dict[str, int]:
    """Character -> byte for 0x80-0xFF in cp1252; its five undefined bytes stand for themselves (as C1
    controls), which is how most tools pass them through."""
    table = {}
    for byte in range(0x80, 0x100):
        try:
            table[bytes([byte]).decode("cp1252")] = byte
        except UnicodeDecodeError:
            table[chr(byte)] = byte
    return table


_CP1252_UPPER = _cp1252_upper_half()
_CONT_CLASS = "".join(re.escape(c) for c, b in _CP1252_UPPER.items() if b < 0xC0)
_MOJIBAKE = re.compile(f"[\u00c2\u00c3\u00c5][{_CONT_CLASS}]|\u00e2[{_CONT_CLASS}]{{2}}")
_MOJIBAKE_HINTS = ("\u00e2\u20ac", "\u00c3", "\u00c2", "\u00c5")


def _magic_kind(raw: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if raw.startswith(magic):
            return kind
    if raw.startswith(b"PK\x03\x04") or raw.startswith(b"PK\x05\x06"):
        return "epub" if raw[30:58] == b"mimetypeapplication/epub+zip" else "zip"
    if raw[60:68] == b"BOOKMOBI":
        return "mobi"
    if _BZIP2.match(raw):
        return "bzip2"
    return None


def _sniff_utf16(raw: bytes) -> str | None:
    """BOM-less UTF-16 of mostly Latin text has a NUL in nearly every other byte, on one side only."""
    sample = raw[:65536]
    half = len(sample) // 2
    if half < 2:
        return None
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if odd >= 0.3 * half and even <= 0.05 * half:
        return "utf-16-le"
    if even >= 0.3 * half and odd <= 0.05 * half:
        return "utf-16-be"
    return None


def _repair_mojibake(text: str) -> tuple[str, int]:
    fixed = 0

    def _fix(match: re.Match[str]) -> str:
        nonlocal fixed
        seq = match.group()
        try:
            out = bytes(_CP1252_UPPER[c] for c in seq).decode("utf-8")
        except UnicodeDecodeError:
            return seq
        fixed += 1
        return out

    return _MOJIBAKE.sub(_fix, text), fixed


def _finish(text: str, encoding: str, replaced: int) -> DecodedBook | BookRejection:
    """Shared tail of every decoding path: line endings, stray BOMs, mojibake, final sanity checks."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\u2028" in text or "\u2029" in text:
        text = text.replace("\u2028", "\n").replace("\u2029", "\n\n")
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return BookRejection("empty", f"only whitespace after decoding as {encoding}")
    if replaced > 16 and replaced > _MAX_REPLACED_SHARE * len(text):
        return BookRejection("undecodable", f"{replaced} of {len(text)} characters undecodable as {encoding}")
    fixed = 0
    if any(hint in text for hint in _MOJIBAKE_HINTS):
        text, fixed = _repair_mojibake(text)
    return DecodedBook(text, encoding, replaced, fixed)


def _decode_counting(raw: bytes, codec: str) -> tuple[str, int]:
    """Decode with U+FFFD for bad input; the count excludes U+FFFD characters already in the file."""
    try:
        return raw.decode(codec), 0
    except UnicodeDecodeError:
        text = raw.decode(codec, errors="replace")
        marker = _REPLACEMENT_BYTES.get(codec)
        before = raw.count(marker) if marker else 0
        return text, max(text.count("\ufffd") - before, 0)


def _decode_wide(raw: bytes, codec: str) -> DecodedBook | BookRejection:
    """UTF-16/32: the control-character check can only be made after decoding."""
    text, replaced = _decode_counting(raw, codec)
    text, controls = _TEXT_CONTROLS.subn("", text)
    if controls > _MAX_CONTROL_SHARE * max(len(text), 1):
        return BookRejection("binary", f"{controls} control characters after decoding as {codec}")
    return _finish(text.replace("\x0c", "\n"), codec, replaced)


def decode_book(raw: bytes) -> DecodedBook | BookRejection:
    """Detect the encoding of a book file and decode it to LF-terminated text, or say why it cannot be.

    Order of evidence: emptiness, file signatures, BOMs, NUL-byte patterns (UTF-16), control-byte share,
    strict UTF-8, then a single-byte fallback (cp1252, which is Latin-1 plus curly quotes and dashes in
    0x80-0x9F). A file that is UTF-8 except for a few bad bytes stays UTF-8 with counted replacements.
    Never raises on any input.
    """
    if not raw.strip():
        return BookRejection("empty", f"{len(raw)} bytes, no text")
    kind = _magic_kind(raw)
    if kind:
        return BookRejection("binary", f"{kind} file signature")
    label = "utf-8"
    if raw.startswith(_UTF8_BOM):
        raw, label = raw[len(_UTF8_BOM) :], "utf-8-sig"
    else:
        for bom, codec in _WIDE_BOMS:
            if raw.startswith(bom):
                return _decode_wide(raw[len(bom) :], codec)

    nuls = raw.count(0)
    if nuls:
        wide = _sniff_utf16(raw)
        if wide:
            return _decode_wide(raw, wide)
        raw = raw.rstrip(b"\x00")  # NUL padding after the text is harmless
        if raw.count(0):
            return BookRejection("binary", f"{nuls} NUL bytes without a UTF-16 pattern")
    controls = len(raw) - len(raw.translate(None, _BINARY_CONTROLS))
    if controls > _MAX_CONTROL_SHARE * len(raw):
        return BookRejection("binary", f"{controls} control bytes in {len(raw)}")
    if controls or b"\x1a" in raw or b"\x0c" in raw:
        raw = raw.translate(_FF_TO_LF, _DROP_BYTES)
    if b"\r" in raw:  # cheaper on bytes than on the decoded str; safe in ASCII-compatible encodings
        raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")

    try:
        return _finish(raw.decode("utf-8"), label, 0)
    except UnicodeDecodeError:
        pass
    text, bad = _decode_counting(raw, "utf-8")
    high = len(raw) - len(raw.translate(None, _HIGH_BYTES))
    valid_non_ascii = len(text) - (len(raw) - high) - bad
    if valid_non_ascii >= 4 * bad:
        return _finish(text, label, bad)
    if high > _MAX_LEGACY_HIGH_SHARE * len(raw):
        return BookRejection(
            "undecodable", f"not UTF-8 ({bad} bad sequences) and {high} of {len(raw)} bytes are non-ASCII"
        )
    if not _C1_BYTE.search(raw):
        # No byte in 0x80-0x9F: Latin-1 and cp1252 agree on every byte.
        return _finish(raw.decode("latin-1"), "latin-1", 0)
    text, replaced = _decode_counting(raw, "cp1252")
    return _finish(text, "cp1252", replaced)


# --------------------------------------------------------------------------------------------------
# Cleaning
# --------------------------------------------------------------------------------------------------

# Every PG marker and licence notice contains one of these substrings. They are located with str.find,
# which is many times faster than any case-insensitive regex over a whole book; only the lines and
# paragraphs around the hits are examined, with the patterns below.
_LICENCE_TOKENS = (
    "utenberg",
    "UTENBERG",
    "SMALL PRINT",
    "roofread",
    "pgdp",
    "mashwords",
    "MASHWORDS",
    "personal enjoyment",
    "hard work of this author",
)
_LICENCE_CONTEXT = re.compile(
    r"project\s+gutenberg|gutenberg\.(?:org|net)|gutenberg(?:-tm|™)|small print|pgdp\.net|"
    r"distributed\s+proofread|smashwords|licensed\s+for\s+your\s+personal\s+enjoyment|"
    r"respecting\s+the\s+hard\s+work\s+of\s+this\s+author",
    re.I,
)
_CONTEXT_CHARS = 40
_MAX_LICENCE_PARAGRAPH = 3000
# Header end: the START marker, or the end of the 1990s "small print" block.
_PG_START_LINE = re.compile(
    r"[ \t]*\*\*\*[ \t]*start of (?:the|this)[ \t]+project gutenberg|.*\*end\*[ \t]*the small print"
)
# Footer start: the END marker, an "End of (the) Project Gutenberg ..." line, or small print at the end.
_PG_END_LINE = re.compile(
    r"[ \t]*(?:\*\*\*[ \t]*)?end of (?:the |this )?project gutenberg"
    r"|[ \t]*\*\*\*[ \t]*start\*\*[ \t]*the small print"
)
_TITLE = re.compile(r"^Title:[ \t]*(\S[^\n]*(?:\n[ \t]+\S[^\n]*)*)", re.M)
_PG_EBOOK_OF = re.compile(r"Project Gutenberg'?s? E-?(?:Book|Text) of ([^\n]+?)(?:, by [^\n]*)?$", re.I | re.M)

# An illustration marker with its caption, which may hold one level of nested brackets
# ("[Illustration: Caption [Copyright 1894]]"). Possessive repeats keep unclosed markers linear.
_ILLUSTRATION = re.compile(
    r"\[(?:Illustration|ILLUSTRATION|illustration|Frontispiece|FRONTISPIECE|Decoration|Picture)\b"
    r"(?:[^\[\]]++|\[[^\[\]]*+\])*+\]"
)
_MAX_ILLUSTRATION_CHARS = 3000
# A line of three or more separator symbols. Matched with its leading newline (a literal prefix the regex
# engine can jump to) on text that starts with one.
_SEPARATOR = re.compile(r"\n[ \t]*(?:[*\-_~=#.•·+—–─━═][ \t]*){3,}(?=\n)")
# PG marks emphasis as _word_ (and abbreviations as 7_s_. 6_d_.): drop every lone underscore, keep runs of
# them (blanks such as "Mr. ____"). Starts with the literal "_" so the regex engine skips ahead to candidates.
_ITALIC_UNDERSCORE = re.compile(r"_(?<!__)(?!_)")
# A break right after a hyphen or em dash closes up ("button-\nlike" -> "button-like").
_DASH_BREAK = re.compile("\n(?<=\\S[-\u2014]\n)[ \t]*(?=\\S)")
_SPACE_RUN = re.compile("   *")

_NUM_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    "seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|first|second|third|fourth|fifth|sixth|seventh|"
    "eighth|ninth|tenth|eleventh|twelfth|last|final"
)
_NUMERAL = rf"(?:[IVXLCDM]+\b|\d{{1,4}}\b|(?i:(?:the[ \t]+)?(?:{_NUM_WORDS})(?:[- ](?:{_NUM_WORDS}))?)\b)"
_KEYWORD = (
    r"(?i:chapter|book|part|volume|vol|letter|section|canto|stave|act|scene|episode|fytte|epilogue|"
    r"prologue|appendix)\b"
)
# "CHAPTER", "CHAPTER I.", "Chapter 1: The Start", "CHAPTER 1. Loomings.", "BOOK THE FIRST",
# "PART II THE RETURN", "Letter 4". A title after the numeral needs punctuation or capitals, so that
# prose such as "Part one of the plan" is not taken for a heading.
_KW_HEADING = re.compile(
    rf"[ \t]*{_KEYWORD}(?:\.|[ \t]*:)?"
    rf"(?:[ \t]+{_NUMERAL}(?:[ \t]*[.:\u2014\u2013-]+[ \t]*[^\n]*|[ \t]+[^a-z\n]*|[ \t]*))?[ \t]*"
)
_KEYWORD_START = re.compile(rf"[ \t]*{_KEYWORD}")
_NUMBER_HEADING = re.compile(r"[ \t]*(?:[IVXLCDM]+|\d{1,4})\.?[ \t]*")
_ROMAN_TITLE = re.compile(r"[ \t]*[IVXLCDM]+\.[ \t]+(\S[^\n]{0,80})")
_CONTENTS_HEADING = re.compile(
    r"[ \t]*(?i:(?:table of )?contents?|list of (?:illustrations|plates)|illustrations|page)[.:]?[ \t]*"
)
_TOC_ENTRY = re.compile(
    rf"[ \t]*(?:{_KEYWORD}\.?[ \t]+{_NUMERAL}|[IVXLCDM]+(?:\.|[ \t]{{2,}}|$)|\d{{1,3}}(?:\.|[ \t]{{2,}}|$))"
)
_PAGE_END_CHARS = frozenset("0123456789ivxlcdm")
_PAGE_REF = re.compile(r"\S(?: {3,}|[ \t]*\.{5,}[ \t]*)(?:\d{1,4}|[ivxlcdm]{1,7})$")
_WORD = re.compile(r"\w+")
_LETTER_PAIR = re.compile(r"[^\W\d_]{2}")
_DOUBLE_QUOTES = frozenset("\"“”«»„")
_BYLINE = re.compile(r"[ \t]*(?i:by)[ \t]+[A-Z][^.!?\n]{0,60}\.?")
_CENTRED = " " * 10
_ART_HINT = re.compile(r"[|\\/+=#@~^<>{}]")

_CREDIT = re.compile(
    r"[ \t]*(?:Produced by|Prepared by|E-?text (?:was )?(?:prepared|produced) by|This e-?(?:text|book) was "
    r"(?:produced|prepared|created|made) (?:by|from)|Transcribed (?:from|by)|Scanned (?:and proofed )?by|"
    r"Proofread by|HTML version by|(?:Original )?Transcriber[’']?s? Notes?\b)",
    re.I,
)
# Front matter of shop ebooks, and PG header fields left behind when the START marker is missing.
_FRONT_BOILERPLATE = re.compile(
    r"[ \t]*(?:Copyright\b|©|\(c\) ?\d|All rights reserved|ISBN\b|License Notes|Cover (?:art|design|image)\b|"
    r"This (?:book|e-?book|novel|story) is (?:a work of fiction|licensed)|This is a work of fiction|"
    r"(?:Title|Author|Release Date|Posting Date|Last Updated|Language|Character set encoding|Credits|"
    r"Most recently updated|Translator|Illustrator|Editor):)",
    re.I,
)
_FRONT_BLOCKS = 40
_BACK_BLOCKS = 15
_TOC_MAX_LINES = 400
_MAX_HEADING_CHARS = 4 * 82
_WRAP_MARGIN = 3
_RAGGED_SHARE = 0.8


def _normalise(text: str) -> str:
    """LF line endings, NFC, no tabs, BOMs or no-break spaces, so later patterns see one spelling."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\t" in text:
        text = text.expandtabs(4)
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    if "\u00a0" in text:
        text = text.replace("\u00a0", " ")
    if " \n" in text:
        text = "\n".join(map(str.rstrip, text.split("\n")))
    return text


def _header_title(header: str) -> str | None:
    """The "Title:" field of a PG header, else the title in its "Project Gutenberg eBook of ..." line."""
    match = _TITLE.search(header) or _PG_EBOOK_OF.search(header)
    title = " ".join(match.group(1).split()) if match else ""
    return title or None


def _add(removed: dict[str, int], kind: str, lines: int) -> None:
    removed[kind] = removed.get(kind, 0) + lines


def _licence_hits(text: str) -> list[int]:
    """Offsets of licence phrases (the start of the matched phrase), in order."""
    hits = set()
    for token in _LICENCE_TOKENS:
        at = text.find(token)
        while at >= 0:
            window_start = max(0, at - _CONTEXT_CHARS)
            match = _LICENCE_CONTEXT.search(text, window_start, at + _CONTEXT_CHARS)
            if match:
                hits.add(match.start())
            at = text.find(token, at + len(token))
    return sorted(hits)


def _line_at(text: str, pos: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, text[start : end if end >= 0 else len(text)]


def _strip_licence(text: str, removed: dict[str, int]) -> tuple[str, str | None]:
    """Cut the PG header (through the START marker) and footer (from the END line), then every
    paragraph that still carries a licence notice; return the title found in the header."""
    hits = _licence_hits(text)
    if not hits:
        return text, None
    begin, end = 0, len(text)
    for pos in hits:
        line_start, line = _line_at(text, pos)
        if _PG_START_LINE.match(line.lower()):
            begin = line_start + len(line)
            if line.lstrip().startswith("***") and line.count("***") < 2:
                # Marker wrapped onto a second line: "*** START OF THIS ... EBOOK THE LONG\nTITLE ***".
                _, following = _line_at(text, begin + 1)
                if len(following) < 120 and following.rstrip().endswith("***"):
                    begin += 1 + len(following)
            break
    title = _header_title(text[:begin]) if begin else None
    for pos in hits:
        if pos >= begin:
            line_start, line = _line_at(text, pos)
            if _PG_END_LINE.match(line.lower()):
                end = line_start
                break
    if begin:
        _add(removed, "licence_lines", text.count("\n", 0, begin) + 1)
    if end < len(text):
        _add(removed, "licence_lines", text.count("\n", end) + 1)

    # Paragraphs of the body that mention the licence or the producers.
    pieces: list[str] = []
    cursor = begin
    for pos in hits:
        if pos < cursor or pos >= end:
            continue
        para_start = max(text.rfind("\n\n", 0, pos) + 2, cursor)
        para_end = text.find("\n\n", pos)
        para_end = end if para_end < 0 else min(para_end, end)
        if para_end - para_start > _MAX_LICENCE_PARAGRAPH:
            # No blank lines around (a sentence-per-line file): drop just the line.
            para_start = max(text.rfind("\n", 0, pos) + 1, cursor)
            para_end = text.find("\n", pos)
            para_end = end if para_end < 0 else min(para_end, end)
        pieces.append(text[cursor:para_start])
        paragraph = text[para_start:para_end].strip("\n")
        kind = "credit_lines" if _CREDIT.match(paragraph) else "licence_lines"
        _add(removed, kind, paragraph.count("\n") + 1)
        cursor = para_end
    pieces.append(text[cursor:end])
    return "".join(pieces), title


def _drop_illustrations(text: str, removed: dict[str, int]) -> str:
    """Delete illustration markers (an unclosed one could span pages: those are left) and count their lines."""
    lines = 0

    def _drop(match: re.Match[str]) -> str:
        nonlocal lines
        found = match.group()
        if len(found) > _MAX_ILLUSTRATION_CHARS:
            return found
        lines += found.count("\n") + 1
        return ""

    text = _ILLUSTRATION.sub(_drop, text)
    if lines:
        _add(removed, "illustration_lines", lines)
    return text


def _is_caps_heading_line(line: str) -> bool:
    """A short line in capitals with a word of two letters or more ("R. W." is a signature), and not a
    shout: it does not open with a double quote or end with ! ? , ; or a dash."""
    s = line.strip()
    return (
        2 <= len(s) <= 60
        and s.upper() == s
        and _LETTER_PAIR.search(s) is not None
        and s[0] not in _DOUBLE_QUOTES
        and s[-1] not in ",;!?\u2014-"
    )


def _is_title_line(line: str) -> bool:
    """Title case or capitals: at least half the words start with a capital ("Down the Rabbit-Hole")."""
    words = line.split()
    capitals = sum(1 for word in words if word.lstrip("\"“‘'(")[:1].isupper())
    return bool(words) and capitals * 2 >= len(words)


def _is_heading(lines: list[str]) -> bool:
    """A block of at most four lines that is a chapter/part heading, with any title lines under it."""
    first = lines[0]
    lead = first.lstrip()[:1]
    if not (lead.isupper() or lead.isdigit()):
        return False
    if _KW_HEADING.fullmatch(first):
        return all(len(line) <= 80 and _is_title_line(line) for line in lines[1:])
    if len(lines) == 1:
        if _NUMBER_HEADING.fullmatch(first):
            return True
        match = _ROMAN_TITLE.fullmatch(first)
        if match:
            title = match.group(1).rstrip()
            return title.upper() == title or title[-1] not in ".!?,;"
    return len(lines) <= 3 and all(_is_caps_heading_line(line) for line in lines)


def _toc_key(line: str) -> str:
    """What a TOC entry and the heading it points to share: "CHAPTER I. Loomings" and "CHAPTER I." give
    "chapter i", "I. A Scandal in Bohemia" and "I. A SCANDAL IN BOHEMIA" give "i"."""
    words = _WORD.findall(line.casefold())
    if _TOC_ENTRY.match(line):
        return " ".join(words[:2]) if _KEYWORD_START.match(line) else " ".join(words[:1])
    return " ".join(words)


def _is_toc_line(line: str) -> bool:
    s = line.strip()
    if not s:
        return True
    if _TOC_ENTRY.match(s):
        return len(s) <= 300
    if _PAGE_REF.search(s):
        return len(s) <= 120
    # Short lines without a trailing comma; one that opens with a quote must not close like dialogue.
    return len(s) <= 60 and s[-1] not in ",;:" and (s[0] not in "\"“‘'(" or s[-1].isalnum())


def _is_art(block: str) -> bool:
    """Fewer letters than other visible characters: ASCII art, tables of figures, decorations."""
    visible = len(block) - block.count(" ") - block.count("\n")
    return visible >= 3 and sum(map(str.isalpha, block)) < 0.5 * visible


def _is_title_page(block: str, lines: list[str]) -> bool:
    """Title-page matter before the first prose: a byline, or centred lines of a few words each.

    Centred verse (an epigraph) has longer lines and is kept.
    """
    if len(lines) == 1:
        return _BYLINE.fullmatch(block) is not None
    if any(line and not line.startswith(_CENTRED) for line in lines):
        return False
    return len(block.split()) < 3.5 * len(lines)


def _wrap_width(blocks: list[str]) -> int:
    """Typical line width of the file: the 90th percentile of line lengths over a sample of blocks."""
    step = max(1, len(blocks) // 400)
    lengths = sorted(len(line) for block in blocks[::step] for line in block.split("\n") if line)
    if not lengths:
        return 72
    return max(lengths[int(0.9 * (len(lengths) - 1))], 20)


def _is_verse(lines: list[str], width: int) -> bool:
    """Most line breaks come early: the next line's first word would still have fitted.

    Greedy wrapping never leaves room for the next word, so such breaks were put there on purpose
    (verse, addresses, lists) and are kept. Hand-wrapped prose is ragged, so a break only counts as
    early well inside the width; a block indented as a whole (a quoted poem) is held to nearly the full width.
    """
    if all(line.startswith("  ") for line in lines):
        limit = width - _WRAP_MARGIN
    else:
        limit = _RAGGED_SHARE * width
    early = 0
    for line, nxt in zip(lines, lines[1:]):
        nxt = nxt.lstrip()
        word = nxt.find(" ")
        if len(line) + 1 + (word if word >= 0 else len(nxt)) < limit:
            early += 1
    return early * 2 > len(lines) - 1


def _join_prose(block: str) -> str:
    if "-\n" in block or "\u2014\n" in block:
        block = _DASH_BREAK.sub("", block)
    text = block.replace("\n", " ")
    return _SPACE_RUN.sub(" ", text) if "  " in text else text


def _join_verse(lines: list[str]) -> str:
    text = "\n".join(line.strip() for line in lines)
    return _SPACE_RUN.sub(" ", text) if "  " in text else text


def _clean_blocks(blocks: list[str], removed: dict[str, int]) -> list[str]:
    """Classify each blank-line-separated block and rebuild paragraphs from the ones that are text."""
    width = _wrap_width(blocks)
    glued_limit = 0.75 * width
    prose_min_line = _RAGGED_SHARE * width - 2  # no next word is shorter than one character
    back_start = len(blocks) - _BACK_BLOCKS
    out: list[str] = []
    toc_lines = 0
    toc_key: str | None = None
    in_toc = after_heading = seen_prose = False
    for i, block in enumerate(blocks):
        block = block.strip("\n")
        if not block or block.isspace():
            continue
        lines = block.split("\n")
        n_lines = len(lines)

        if i < _FRONT_BLOCKS or i >= back_start:
            head = block[:200]
            if _CREDIT.match(head):
                _add(removed, "credit_lines", n_lines)
                continue
            if i < _FRONT_BLOCKS and _FRONT_BOILERPLATE.match(head):
                _add(removed, "licence_lines", n_lines)
                continue
            if not seen_prose and i < _FRONT_BLOCKS and _is_title_page(block, lines):
                _add(removed, "title_page_lines", n_lines)
                continue

        if in_toc:
            if toc_key is not None and n_lines <= 4 and _toc_key(lines[0]) == toc_key:
                in_toc = False  # the body starts with the heading the TOC listed first
            elif toc_lines < _TOC_MAX_LINES and all(map(_is_toc_line, lines)):
                if toc_key is None:
                    toc_key = _toc_key(lines[0])
                toc_lines += n_lines
                _add(removed, "toc_lines", n_lines)
                continue
            else:
                in_toc = False
        if n_lines == 1 and _CONTENTS_HEADING.fullmatch(block):
            in_toc, toc_key, toc_lines = True, None, 0
            _add(removed, "toc_lines", 1)
            continue

        if n_lines <= 4 and len(block) <= _MAX_HEADING_CHARS and _is_heading(lines):
            _add(removed, "heading_lines", n_lines)
            after_heading = True
            continue
        if after_heading and n_lines == 1:
            s = block.strip()
            after_heading = False
            if len(s) <= 60 and s[-1].isalnum() and "," not in s and ";" not in s and _is_title_line(s):
                _add(removed, "heading_lines", 1)  # chapter title on its own line under the heading
                continue
        after_heading = False
        if n_lines == 1 and block[-1] in _PAGE_END_CHARS and _PAGE_REF.search(block):
            _add(removed, "toc_lines", 1)
            continue
        if _ART_HINT.search(block) and _is_art(block):
            _add(removed, "art_lines", n_lines)
            continue

        if n_lines > 1 and len(lines[0]) < glued_limit and _KW_HEADING.fullmatch(lines[0]):
            # Heading glued to its first paragraph, possibly with a title line in capitals under it.
            drop = 1
            while drop < n_lines - 1 and _is_caps_heading_line(lines[drop]):
                drop += 1
            _add(removed, "heading_lines", drop)
            lines = lines[drop:]
            n_lines = len(lines)
            block = "\n".join(lines)

        if n_lines == 1:
            para = block.strip()
            if "  " in para:
                para = _SPACE_RUN.sub(" ", para)
            seen_prose = seen_prose or len(para) >= 100
        elif (
            min(map(len, lines[:-1])) >= prose_min_line and not lines[0].startswith("  ")
        ) or not _is_verse(lines, width):
            para = _join_prose(block.strip())
            seen_prose = True
        else:
            para = _join_verse(lines)
        out.append(para)
    return out


def clean_book(text: str) -> CleanBook:
    """Turn decoded book text into running paragraphs, dropping everything that is not the book's text.

    Removed: the Project Gutenberg header/footer and licence paragraphs, "Produced by" credits, ebook-shop
    licence notes, tables of contents, chapter/part headings, separator lines, ASCII art and illustration
    markers. Hard-wrapped prose is rejoined to one line per paragraph; verse stanzas keep their line breaks
    (one stanza per paragraph), because joining them would glue lines into run-on sentences. Files with
    one sentence per line (the HF bookcorpus layout) are regrouped instead of rejoined, and files with one
    unwrapped paragraph per line keep each line as a paragraph.
    """
    removed: dict[str, int] = {}
    text, title = _strip_licence(_normalise(text), removed)
    layout = _line_layout(text)
    if layout == "sentences":
        return CleanBook(_regroup_sentence_lines(text, removed), title, removed)
    if layout == "paragraphs":
        text = text.replace("\n", "\n\n")
    if "[" in text:
        text = _drop_illustrations(text, removed)
    text, separators = _SEPARATOR.subn("\n", "\n" + text + "\n")
    text = text[1:-1]
    if separators:
        _add(removed, "separator_lines", separators)
    if "_" in text:
        text = _ITALIC_UNDERSCORE.sub("", text)
    if " \n" in text:
        text = "\n".join(map(str.rstrip, text.split("\n")))
    paragraphs = _clean_blocks(text.split("\n\n"), removed)
    return CleanBook("\n\n".join(paragraphs), title, removed)


# --------------------------------------------------------------------------------------------------
# Sentence-per-line layout (HF bookcorpus)
# --------------------------------------------------------------------------------------------------

_CLOSERS = " \t\"'”’)]»"
_TERMINALS = (".", "!", "?", "…")
_LINE_HEADING = re.compile(rf"(?i:{_KEYWORD})(?:[ \t]+{_NUMERAL})?(?:[ \t]+[^.!?]{{0,40}})?")
_LINE_BOILERPLATE = re.compile(
    r"(?i:copyright\b|all rights reserved|smashwords|isbn\b|licensed for your personal enjoyment|"
    r"respecting the hard work of this author|project gutenberg)"
)
_PARAGRAPH_CHARS = 600
_INNER_SENTENCE_BREAK = re.compile(r"[.!?][\"'”’)]*[ \t]+[\"“‘(]*[A-Z]")
_EDGE_LINES = 60


def _ends_sentence(line: str) -> bool:
    return line.rstrip(_CLOSERS)[-1:] in _TERMINALS


def _line_layout(text: str, sample_chars: int = 200_000) -> str:
    """How lines relate to sentences: "wrapped" prose, one "sentences" per line, or one "paragraphs" per line.

    In hard-wrapped prose most line breaks fall inside a sentence. When nearly every line that has a
    successor ends a sentence, lines are sentences (HF bookcorpus) unless many of them hold several
    sentences, which makes them unwrapped paragraphs. Lines followed by a blank line do not count, and
    the sample comes from the middle of the file, away from title pages and tables of contents.
    """
    start = max(0, len(text) // 2 - sample_chars // 2)
    lines = text[start : start + sample_chars].split("\n")[1:-1] if start else text[:sample_chars].split("\n")
    inner = ends = several = 0
    for line, nxt in zip(lines, lines[1:]):
        if line and nxt and not line.isspace() and not nxt.isspace():
            inner += 1
            if _ends_sentence(line):
                ends += 1
                several += _INNER_SENTENCE_BREAK.search(line) is not None
    if inner < 20 or ends < 0.75 * inner:
        return "wrapped"
    return "paragraphs" if several > 0.3 * ends else "sentences"


def looks_sentence_per_line(text: str) -> bool:
    """True for files that hold one sentence per line with no hard wrapping (the HF bookcorpus layout)."""
    return _line_layout(text) == "sentences"


def _regroup_sentence_lines(text: str, removed: dict[str, int]) -> str:
    """Join sentence lines into paragraphs of about _PARAGRAPH_CHARS, dropping heading lines and, near
    either end of the file, licence lines."""
    paragraphs: list[str] = []
    current: list[str] = []
    size = 0
    all_lines = text.split("\n")
    back_start = len(all_lines) - _EDGE_LINES
    for i, raw_line in enumerate(all_lines):
        line = raw_line.strip()
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current, size = [], 0
            continue
        if (i < _EDGE_LINES or i >= back_start) and _LINE_BOILERPLATE.search(line):
            _add(removed, "licence_lines", 1)
            continue
        if _LINE_HEADING.fullmatch(line) and not _ends_sentence(line):
            _add(removed, "heading_lines", 1)
            if current:
                paragraphs.append(" ".join(current))
                current, size = [], 0
            continue
        current.append(line)
        size += len(line) + 1
        if size >= _PARAGRAPH_CHARS:
            paragraphs.append(" ".join(current))
            current, size = [], 0
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def read_hf_bookcorpus_lines(text: str) -> str:
    """Rebuild paragraphs from an HF bookcorpus file (one sentence per line, the file is one book).

    Lines are kept whole and in order, joined with spaces into paragraphs of about 600 characters; blank
    lines and heading lines ("chapter 3") end a paragraph. Text in any other layout is returned unchanged.
    """
    text = _normalise(text)
    if not looks_sentence_per_line(text):
        return text
    return _regroup_sentence_lines(text, {})


# --------------------------------------------------------------------------------------------------
# Duplicate detection
# --------------------------------------------------------------------------------------------------

# General punctuation (U+2000-U+206F: dashes, curly quotes, ellipsis) and Latin-1 signs (U+00A0-U+00BF),
# matched on UTF-8 bytes with one literal-prefix pattern per lead pair, which runs several times faster
# than a character class over str; the rarer ones are only searched for when their lead bytes occur.
_UNICODE_PUNCT = (
    (b"\xe2\x80", re.compile(rb"\xe2\x80[\x80-\xbf]")),
    (b"\xe2\x81", re.compile(rb"\xe2\x81[\x80-\xaf]")),
    (b"\xc2", re.compile(rb"\xc2[\xa0-\xbf]")),
)
_ASCII_NON_ALNUM = bytes(b for b in range(128) if not chr(b).isalnum())
_ASCII_NON_ALNUM_TO_SPACE = bytes(32 if b < 128 and not chr(b).isalnum() else b for b in range(256))


def _nfkc(text: str) -> str:
    """NFKC, normalising only the paragraphs that need it: one "…" or "½" must not cost a pass over the book."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    return "\n\n".join(
        part if unicodedata.is_normalized("NFKC", part) else unicodedata.normalize("NFKC", part)
        for part in text.split("\n\n")
    )


def _folded_utf8(text: str, punctuation: bytes) -> bytes:
    """NFKC, casefolded UTF-8 with general punctuation replaced by ``punctuation``."""
    data = _nfkc(text).casefold().encode("utf-8")
    for lead, pattern in _UNICODE_PUNCT:
        if lead in data:
            data = pattern.sub(punctuation, data)
    return data


def dedup_key(text: str) -> str:
    """sha256 of the text reduced to its letters and digits, casefolded (NFKC first).

    Two copies of a book that differ in encoding, line endings, wrapping, quote and dash style or
    emphasis markers get the same key; any change of wording gives another.
    """
    data = _folded_utf8(text, b"").translate(None, _ASCII_NON_ALNUM)
    return hashlib.sha256(data).hexdigest()


# MinHash over word 5-shingles, computed with numpy on the UTF-8 bytes. Words are hashed with a polynomial
# hash (prefix sums modulo 2**64, divided out with the modular inverse of the base), so no Python code runs
# per word. The signature is one-permutation MinHash: one mixed 64-bit hash per shingle, the minimum kept in
# each of num_perm bins chosen by the hash's top bits. All constants are fixed, so signatures are stable
# across processes, machines and runs. The text goes through in chunks cut at spaces, which bounds memory
# (a few dozen bytes per input byte of one chunk) whatever the size of the book.
_SHINGLE = 5
_BASE = 0x100000001B3
_BASE_INV = pow(_BASE, -1, 1 << 64)
_SHINGLE_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_EMPTY_BIN = (1 << 64) - 1
_MINHASH_CHUNK = 1 << 18


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads every input bit over the whole word."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _powers(base: int, n: int) -> np.ndarray:
    powers = np.full(n, base, dtype=np.uint64)
    powers[0] = 1
    return np.cumprod(powers, out=powers)


def _word_hashes(data: np.ndarray, powers: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """One hash per space-separated word of data, the same wherever the word occurs."""
    is_word = (data != 32).view(np.int8)
    edges = np.diff(is_word, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)  # exclusive
    prefix = np.zeros(data.size + 1, dtype=np.uint64)
    np.cumsum((data + np.uint64(1)) * powers[: data.size], out=prefix[1:])
    # sum over [s, e) of (b_k + 1) * BASE**k, times BASE**-s.
    return _mix64((prefix[ends] - prefix[starts]) * inverse[starts])


def _chunks(data: bytes) -> list[memoryview]:
    view = memoryview(data)
    out = []
    start = 0
    while start < len(data):
        end = min(start + _MINHASH_CHUNK, len(data))
        if end < len(data):
            cut = data.rfind(b" ", start, end)
            end = cut + 1 if cut > start else end
        out.append(view[start:end])
        start = end
    return out


def _add_shingles(words: np.ndarray, k: int, signature: np.ndarray) -> None:
    count = words.size - k + 1
    shingles = words[:count].copy()
    for offset in range(1, k):
        shingles *= _SHINGLE_MULTIPLIER
        shingles += words[offset : offset + count]
    shingles = _mix64(shingles)
    bins = (((shingles >> np.uint64(32)) * np.uint64(signature.size)) >> np.uint64(32)).astype(np.intp)
    np.minimum.at(signature, bins, shingles)


def minhash_signature(text: str, num_perm: int = 64) -> tuple[int, ...]:
    """MinHash signature (num_perm bins) of the set of word 5-shingles of the casefolded text.

    Compare two signatures with jaccard_estimate(). Punctuation, case and layout do not change it.
    A text of fewer than five words is one shingle. Empty bins hold 2**64 - 1.
    """
    if num_perm < 1:
        raise ValueError("num_perm must be positive")
    folded = _folded_utf8(text, b" ").translate(_ASCII_NON_ALNUM_TO_SPACE)
    signature = np.full(num_perm, _EMPTY_BIN, dtype=np.uint64)
    size = min(len(folded), _MINHASH_CHUNK)
    powers, inverse = (_powers(_BASE, size), _powers(_BASE_INV, size)) if size else (None, None)
    carry = np.zeros(0, dtype=np.uint64)  # the last words of the previous chunk, which start its shingles
    shingled = False
    for chunk in _chunks(folded):
        data = np.frombuffer(chunk, dtype=np.uint8).astype(np.uint64)
        words = np.concatenate((carry, _word_hashes(data, powers, inverse)))
        if words.size >= _SHINGLE:
            _add_shingles(words, _SHINGLE, signature)
            shingled = True
            words = words[-(_SHINGLE - 1) :]
        carry = words
    if not shingled and carry.size:
        _add_shingles(carry, carry.size, signature)
    return tuple(int(v) for v in signature)


def jaccard_estimate(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """Share of shingles two texts have in common, estimated from their MinHash signatures.

    Bins empty in both signatures carry no information and are left out (one-permutation estimator).
    """
    if len(a) != len(b):
        raise ValueError("signatures of different lengths")
    used = equal = 0
    for x, y in zip(a, b):
        if x == _EMPTY_BIN and y == _EMPTY_BIN:
            continue
        used += 1
        equal += x == y
    return equal / used if used else 1.0
