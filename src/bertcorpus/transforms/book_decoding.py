"""Book files' bytes to text: the encoding detected, line endings unified, double-encoded characters repaired.

decode_book never raises: a file that is not text (empty, a container or image format, binary, an incoherent
single-byte script) comes back as a BookRejection that says why, which the job turns into a dead-letter record.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bertcorpus.transforms.compression import compression_of

__all__ = ["BookRejection", "DecodedBook", "decode_book"]


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


# Signatures of document and image formats that are sometimes mislabelled as .txt; compressed files are known by
# compression.SIGNATURES.
_FILE_TYPES: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "pdf"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole2 (doc)"),
)
_EPUB = b"mimetypeapplication/epub+zip"  # the first entry of an EPUB's zip container

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
# Each cp1252 character to the Latin-1 character of its byte (€ → \x80), and the highest of them (™, U+2122).
_AS_BYTE_CHARACTERS = str.maketrans({c: chr(b) for c, b in _CP1252_UPPER.items() if ord(c) > 0xFF})
_LAST_CP1252_CHARACTER = max(_CP1252_UPPER)


def _magic_kind(raw: bytes) -> str | None:
    for magic, kind in _FILE_TYPES:
        if raw.startswith(magic):
            return kind
    if raw[60:68] == b"BOOKMOBI":
        return "mobi"
    kind = compression_of(raw)
    return "epub" if kind == "zip" and raw[30:58] == _EPUB else kind


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
    if not text.isascii() and (undone := _undo_double_encoding(text)) is not None:
        text, fixed = undone
    elif any(hint in text for hint in _MOJIBAKE_HINTS):
        text, fixed = _repair_mojibake(text)
    return DecodedBook(text, encoding, replaced, fixed)


def _undo_double_encoding(text: str) -> tuple[str, int] | None:
    """(the text its bytes were, the characters repaired) for a text whose every non-ASCII character is the cp1252
    or Latin-1 reading of a byte of UTF-8, as a UTF-8 book read as Latin-1 and saved as UTF-8 again is
    (《辟 → ã\x80\x8aè¾\x9f); None for any other text. Real Latin-1 text is never such a text: its accented
    letters are followed by ASCII, which no UTF-8 lead byte is."""
    if max(text) > _LAST_CP1252_CHARACTER:  # a character no single byte stands for: not a text of bytes
        return None
    try:
        original = text.translate(_AS_BYTE_CHARACTERS).encode("latin-1").decode("utf-8")
    except UnicodeError:
        return None
    return original, sum(1 for c in original if ord(c) > 0x7F)


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


# A legacy encoding charset-normalizer finds is taken where its text is this coherent (its "chaos", the share of
# characters out of place, at most this): a wrong guess reads as noise.
_MAX_LEGACY_CHAOS = 0.1
# Text repeats its characters: of a sample of this many non-ASCII characters, at most this share are distinct.
_MIN_REPEATS_SAMPLE, _MAX_DISTINCT_SHARE = 500, 0.5
# The legacy encodings books come in (charset-normalizer's names): the East Asian double-byte ones and the
# single-byte ones of Cyrillic, Greek, Hebrew, Arabic, Thai, Turkish, Central European and Baltic text. Others it
# may name for random bytes (EBCDIC code pages) are never taken.
_LEGACY_ENCODINGS = frozenset(
    [
        "gb18030",
        "gb2312",
        "gbk",
        "big5",
        "big5hkscs",
        "cp950",
        "cp932",
        "shift_jis",
        "euc_jp",
        "cp949",
        "euc_kr",
        "johab",
        "koi8_r",
        "koi8_u",
        "cp1251",
        "cp866",
        "iso8859_5",
        "mac_cyrillic",
        "cp1253",
        "iso8859_7",
        "cp1255",
        "iso8859_8",
        "cp1256",
        "iso8859_6",
        "tis_620",
        "cp874",
        "cp1254",
        "iso8859_9",
        "cp1250",
        "iso8859_2",
        "cp1257",
        "iso8859_13",
    ]
)


def _decode_legacy(raw: bytes) -> tuple[str, str, int] | None:
    """(text, encoding, characters replaced) of a file in a legacy encoding of another script (GB18030, Big5,
    Shift JIS, EUC-KR, KOI8-R, Windows-1251, ...) as charset-normalizer detects it from the text's own coherence;
    None where no encoding gives coherent text. Bytes the encoding cannot decode (a damaged byte, a last character
    cut in two) are replaced and counted, as in a UTF-8 book."""
    sample = raw[:1_000_000]
    encoding = _legacy_encoding(sample) or _legacy_encoding_despite_damage(sample)
    if encoding is None:
        return None
    text, replaced = _decode_counting(raw, encoding)
    wide = [c for c in text[:100_000] if ord(c) > 0x7F]
    if len(wide) >= _MIN_REPEATS_SAMPLE and len(set(wide)) > _MAX_DISTINCT_SHARE * len(wide):
        return None  # text repeats its characters; random bytes read in a large character set hardly do
    return text, encoding.replace("_", "-"), replaced


def _legacy_encoding(sample: bytes) -> str | None:
    """The legacy encoding in which the sample is coherent text, or None."""
    from charset_normalizer import from_bytes

    found = from_bytes(sample).best()
    if found is None or found.encoding not in _LEGACY_ENCODINGS or found.chaos > _MAX_LEGACY_CHAOS:
        return None
    return found.encoding


# The double-byte encodings among them: one bad byte, or a last character cut in two, keeps charset-normalizer from
# naming any. Each one's reading of the sample with the bytes it cannot decode replaced is judged again instead,
# the reading with the fewest replacements first.
_DOUBLE_BYTE_ENCODINGS = ("gb18030", "big5hkscs", "cp932", "euc_jp", "cp949")


def _legacy_encoding_despite_damage(sample: bytes) -> str | None:
    readings = sorted(
        (_decode_counting(sample, codec)[1], order, codec) for order, codec in enumerate(_DOUBLE_BYTE_ENCODINGS)
    )
    for _, _, codec in readings:
        if (found := _legacy_encoding(sample.decode(codec, "replace").encode(codec, "replace"))) is not None:
            return found
    return None


def decode_book(raw: bytes) -> DecodedBook | BookRejection:
    """Detect the encoding of a book file and decode it to LF-terminated text, or say why it cannot be.

    Order of evidence: emptiness, file signatures, BOMs, NUL-byte patterns (UTF-16), control-byte share,
    strict UTF-8, for a file mostly of high bytes the legacy encoding of another script that gives coherent text
    (GB18030, Big5, Shift JIS, EUC-KR, KOI8-R, ...: charset-normalizer), then a single-byte fallback (cp1252, which
    is Latin-1 plus curly quotes and dashes in 0x80-0x9F). A file that is UTF-8 except for a few bad bytes stays
    UTF-8 with counted replacements.
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
        legacy = _decode_legacy(raw)
        if legacy is not None:
            return _finish(*legacy)
        return BookRejection(
            "undecodable",
            f"not UTF-8 ({bad} bad sequences), nor coherent text in a legacy encoding, and {high} of {len(raw)} "
            "bytes are non-ASCII",
        )
    if not _C1_BYTE.search(raw):
        # No byte in 0x80-0x9F: Latin-1 and cp1252 agree on every byte.
        return _finish(raw.decode("latin-1"), "latin-1", 0)
    text, replaced = _decode_counting(raw, "cp1252")
    return _finish(text, "cp1252", replaced)
