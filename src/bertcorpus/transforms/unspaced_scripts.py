"""Scripts written without spaces between words: Chinese and Japanese (CJK ideographs, kana), Thai, Lao, Myanmar and
Khmer. Where a measure counts words (dedup's shingles and n-grams, the data card's words and the words behind
[UNK]), each character of these scripts is a word of its own: a whole clause would otherwise be one "word".
"""

from __future__ import annotations

import re

_UNSPACED_RUN = re.compile(
    "[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]+"
)


def _spaced_run(run: re.Match) -> str:
    return " " + "  ".join(run.group()) + " "


def spaced_unspaced_scripts(text: str) -> str:
    """The text with a space on each side of every character of a script without spaces between words."""
    if text.isascii():
        return text
    return _UNSPACED_RUN.sub(_spaced_run, text)  # run by run: one call per run, not a template per character
