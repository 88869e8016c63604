"""An independent, plain-Python tokenizer that follows the reference FullTokenizer's rules exactly.

It exists only to check that the fast tokenizer in wordpiece/ gives identical tokens. It is written from the
specification (clean text, space out CJK ideographs, split on whitespace, lower-case and strip accents,
split punctuation, greedy longest-match-first WordPiece with whole-word [UNK]) and is deliberately slow and simple.
"""

from __future__ import annotations

import unicodedata

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    return (
        33 <= cp <= 47
        or 58 <= cp <= 64
        or 91 <= cp <= 96
        or 123 <= cp <= 126
        or unicodedata.category(ch).startswith("P")
    )


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def basic_tokens(text: str, do_lower_case: bool) -> list[str]:
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            cleaned.append(" ")
        elif _is_cjk(cp):
            cleaned.append(f" {ch} ")
        else:
            cleaned.append(ch)
    out: list[str] = []
    for token in "".join(cleaned).split():
        if do_lower_case:
            token = token.lower()
            token = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn")
        piece: list[str] = []
        for ch in token:
            if _is_punctuation(ch):
                if piece:
                    out.append("".join(piece))
                    piece = []
                out.append(ch)
            else:
                piece.append(ch)
        if piece:
            out.append("".join(piece))
    return " ".join(out).split()


def wordpieces(word: str, vocab: set[str], max_chars: int = 200) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        found = None
        while start < end:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


class FullTokenizerEquivalent:
    def __init__(self, vocab_tokens: list[str], do_lower_case: bool = True):
        self.vocab = set(vocab_tokens)
        self.do_lower_case = do_lower_case

    def tokenize(self, text: str) -> list[str]:
        return [p for w in basic_tokens(text, self.do_lower_case) for p in wordpieces(w, self.vocab)]
