"""The length of a text in the characters of English it stands for, so that a threshold in characters (extraction's
--min-chars) keeps the same amount of text in every script.

How many characters of English one character of a denser script says, measured on the Universal Declaration of
Human Rights in translation (tests/data/scripts): its preamble and Articles 1, 7, 12, 16, 25 and 26 are 4,354
characters in English and 1,057 in Chinese, so a CJK ideograph counts 4; Article 1 is 66 Hangul syllables and 21
spaces and stops in Korean, so a syllable counts 2. Every other character counts 1: kana, and the alphabets of Thai,
Devanagari or Greek, are no denser than Latin letters. Article 1, 170 characters in English, is then 160 in Chinese,
160 in Japanese (25 ideographs, 53 kana) and 153 in Korean, where a plain count gives 43, 85 and 87.
"""

from __future__ import annotations

import re

_DENSE_WEIGHTS = (
    (re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"), 4),  # CJK ideographs
    (re.compile("[\uac00-\ud7a3]"), 2),  # Hangul syllables
)


def weighted_length(text: str) -> int:
    """The text's length in characters of English: each CJK ideograph 4, each Hangul syllable 2, others 1."""
    if text.isascii():
        return len(text)
    return len(text) + sum((weight - 1) * len(pattern.findall(text)) for pattern, weight in _DENSE_WEIGHTS)


def long_enough(text: str, min_chars: int) -> bool:
    """weighted_length(text) >= min_chars, counted only where the plain length falls short of it."""
    return len(text) >= min_chars or weighted_length(text) >= min_chars
