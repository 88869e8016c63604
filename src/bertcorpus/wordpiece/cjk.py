"""The CJK ideographs, as the reference tokenizer knows them: each one becomes a token of its own.

These are the reference's ranges (CJK Unified Ideographs, Extensions A to E, and the two Compatibility Ideographs
blocks), no more: Hiragana, Katakana and Hangul are not in them, and are tokenised as words. What must agree
with the tokenizer (the vocab's alphabet, whole-word masking's segmenter, the Chinese text checks) uses this one
definition. The measures that count a character of an unspaced script as a word (dedup's shingles, the data
card's words) take the wider set of transforms/unspaced_scripts.py instead, which also holds kana, Thai, Lao,
Myanmar, Khmer and the newer ideograph extensions.
"""

from __future__ import annotations

import functools
import re

import numpy as np

IDEOGRAPH_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_CLASS = "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in IDEOGRAPH_RANGES)
IDEOGRAPH = re.compile(f"[{_CLASS}]")
IDEOGRAPH_RUN = re.compile(f"[{_CLASS}]+")


def is_ideograph(char: str) -> bool:
    code = ord(char)
    return any(a <= code <= b for a, b in IDEOGRAPH_RANGES)


def ideograph_code_points(code_points: np.ndarray) -> np.ndarray:
    """Per code point of an array, whether it is an ideograph."""
    out = np.zeros(code_points.shape, bool)
    for first, last in IDEOGRAPH_RANGES:
        out |= (code_points >= first) & (code_points <= last)
    return out


def count_ideographs(text: str) -> int:
    return len(IDEOGRAPH.findall(text))


def _double_byte_range(codec: str, first: int, last: int) -> set[str]:
    """The characters of a double-byte encoding's code points first..last (lead and trail bytes)."""
    chars = set()
    for lead in range(first >> 8, (last >> 8) + 1):
        for trail in range(0x40, 0xFF):
            code = lead << 8 | trail
            if first <= code <= last:
                try:
                    chars.add(bytes((lead, trail)).decode(codec))
                except UnicodeDecodeError:
                    continue
    return chars


@functools.cache
def common_ideographs() -> frozenset[str]:
    """The everyday Chinese characters of both scripts: GB 2312's level 1 (3,755 simplified) and Big5's level 1
    (5,401 traditional), 6,722 in all, as the two encodings (and so Python's codecs) define them. A Chinese
    vocab holds them all, seen in its training text or not, as bert-base-chinese does."""
    return frozenset(
        c
        for c in _double_byte_range("gb2312", 0xB0A1, 0xD7F9) | _double_byte_range("big5", 0xA440, 0xC67E)
        if is_ideograph(c)
    )


# The blocks of the forms that Chinese text writes Latin letters, digits and punctuation in: the full-width forms of
# ASCII (U+FF01–FF5E), the CJK compatibility forms (vertical punctuation, U+FE30–FE4F) and the small form variants
# (U+FE50–FE6F). Text of Taiwan, Hong Kong and older mainland sources writes 1996 as １９９６.
WIDE_FORM_BLOCKS = ((0xFF01, 0xFF5E), (0xFE30, 0xFE4F), (0xFE50, 0xFE6F))


@functools.cache
def wide_forms() -> frozenset[str]:
    """Every assigned character of WIDE_FORM_BLOCKS (152, as Python's Unicode database assigns them): a Chinese
    vocab holds them all, seen in its training text or not, as bert-base-chinese does."""
    import unicodedata

    return frozenset(
        chr(c)
        for first, last in WIDE_FORM_BLOCKS
        for c in range(first, last + 1)
        if unicodedata.category(chr(c)) != "Cn"
    )
