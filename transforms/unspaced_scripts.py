"""Scripts written without spaces between words: Chinese and Japanese (CJK ideographs, kana), Thai, Lao, Myanmar and
Khmer. Where a measure counts words (dedup's shingles and n-grams, the data card's words and the words behind
[UNK]), each character of these scripts is a word of its own: a whole clause would otherwise be one "word".
"""

from __future__ import annotations

import re

_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]"
)


def spaced_unspaced_scripts(text: str) -> str:
    """The text with a space on each side of every character of a script without spaces between words."""
    if text.isascii() or _UNSPACED.search(text) is None:
        return text
    return _UNSPACED.sub(r" \g<0> ", text)
