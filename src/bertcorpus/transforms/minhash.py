"""Word shingles of a text, and what near-duplicate detection measures on them: one-permutation MinHash
signatures, LSH band keys, and the exact Jaccard similarity of two shingle sets.

Words are those of the folded text (fold_text: NFKC, casefolded, punctuation and symbols made spaces), so case,
punctuation, quote and dash style and layout never tell two texts apart; in scripts written without spaces (Chinese,
Japanese, Thai) each character is a word. Each word is hashed with a polynomial hash
computed with numpy on the UTF-8 bytes (prefix sums modulo 2**64, divided out with the modular inverse of the
base), so no Python code runs per word; a shingle (k consecutive words) is its words' hashes combined and mixed.
All constants are fixed, so hashes and signatures are the same in every process, on every machine and in every run.
The text goes through in chunks cut at spaces, which bounds the temporaries (a few dozen bytes per input byte of one
chunk) whatever the size of the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

import numpy as np

from bertcorpus.transforms.unspaced_scripts import spaced_unspaced_scripts

__all__ = [
    "EMPTY_BIN",
    "band_hashes",
    "casefolded",
    "fold_text",
    "folded_utf8",
    "jaccard",
    "nfkc",
    "oph_signature",
    "shingle_chunks",
    "shingle_hashes",
    "shingle_set",
    "word_hash_chunks",
    "word_hashes",
]

# General punctuation (U+2000-U+206F: dashes, curly quotes, ellipsis) and Latin-1 signs (U+00A0-U+00BF),
# matched on UTF-8 bytes with one literal-prefix pattern per lead pair, which costs less than a character
# class over str; the rarer ones are only searched for when their lead bytes occur.
_UNICODE_PUNCT = (
    (b"\xe2\x80", re.compile(rb"\xe2\x80[\x80-\xbf]")),
    (b"\xe2\x81", re.compile(rb"\xe2\x81[\x80-\xaf]")),
    (b"\xc2", re.compile(rb"\xc2[\xa0-\xbf]")),
)
_ASCII_NON_ALNUM_TO_SPACE = bytes(32 if b < 128 and not chr(b).isalnum() else b for b in range(256))


def nfkc(text: str) -> str:
    """NFKC, normalising only the paragraphs that need it: one "…" or "½" must not cost a pass over a book."""
    if unicodedata.is_normalized("NFKC", text):
        return text
    return "\n\n".join(
        part if unicodedata.is_normalized("NFKC", part) else unicodedata.normalize("NFKC", part)
        for part in text.split("\n\n")
    )


def casefolded(text: str) -> str:
    """NFKC, then casefolded: the text with the differences that never tell two texts apart taken out."""
    return nfkc(text).casefold()


def folded_utf8(text: str, punctuation: bytes, is_casefolded: bool = False) -> bytes:
    """NFKC, casefolded UTF-8 with general punctuation replaced by ``punctuation`` (`text` may be casefolded()
    already)."""
    data = (text if is_casefolded else casefolded(text)).encode("utf-8", "surrogatepass")
    for lead, pattern in _UNICODE_PUNCT:
        if lead in data:
            data = pattern.sub(punctuation, data)
    return data


def fold_text(text: str, is_casefolded: bool = False) -> bytes:
    """The text as its words see it: NFKC, casefolded UTF-8 in which every ASCII character that is not a letter or
    a digit, and general punctuation, is a space (`text` may be casefolded() already). Folding never joins two
    pieces of text that whitespace parts, so folding the whitespace-separated pieces of a text one by one gives the
    same words (decontamination relies on it to find where a word lies)."""
    # The characters of scripts without spaces are words apart (unspaced_scripts.py).
    text = spaced_unspaced_scripts(text if is_casefolded else casefolded(text))
    return folded_utf8(text, b" ", is_casefolded=True).translate(_ASCII_NON_ALNUM_TO_SPACE)


_BASE = 0x100000001B3
_BASE_INV = pow(_BASE, -1, 1 << 64)
_SHINGLE_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
EMPTY_BIN = (1 << 64) - 1
_CHUNK = 1 << 18


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


def _chunk_word_hashes(data: np.ndarray, powers: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """One hash per space-separated word of data, the same wherever the word occurs."""
    is_word = (data != 32).view(np.int8)
    edges = np.diff(is_word, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)  # exclusive
    prefix = np.zeros(data.size + 1, dtype=np.uint64)
    np.cumsum((data + np.uint64(1)) * powers[: data.size], out=prefix[1:])
    # sum over [s, e) of (b_k + 1) * BASE**k, times BASE**-s.
    return _mix64((prefix[ends] - prefix[starts]) * inverse[starts])


def _chunks(data: bytes) -> Iterator[memoryview]:
    view, start = memoryview(data), 0
    while start < len(data):
        end = min(start + _CHUNK, len(data))
        if end < len(data):
            cut = data.rfind(b" ", start, end)
            end = cut + 1 if cut > start else end
        yield view[start:end]
        start = end


def word_hash_chunks(folded: bytes) -> Iterator[np.ndarray]:
    """The hashes of the words of a folded text (fold_text), in order, a chunk of the text at a time."""
    size = min(len(folded), _CHUNK)
    if not size:
        return
    powers, inverse = _powers(_BASE, size), _powers(_BASE_INV, size)
    for chunk in _chunks(folded):
        yield _chunk_word_hashes(np.frombuffer(chunk, dtype=np.uint8).astype(np.uint64), powers, inverse)


def word_hashes(folded: bytes) -> np.ndarray:
    """The hashes of all the words of a folded text (fold_text), in order: uint64, 8 bytes a word."""
    chunks = list(word_hash_chunks(folded))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)


def shingle_hashes(words: np.ndarray, k: int) -> np.ndarray:
    """One mixed hash per k consecutive words (words.size - k + 1 of them; none for fewer than k words)."""
    count = words.size - k + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    shingles = words[:count].copy()
    for offset in range(1, k):
        shingles *= _SHINGLE_MULTIPLIER
        shingles += words[offset : offset + count]
    return _mix64(shingles)


def shingle_chunks(word_chunks: Iterable[np.ndarray], k: int, short_text_shingle: bool = False) -> Iterator[np.ndarray]:
    """The shingle hashes of a text given its word hashes chunk by chunk; shingles that span two chunks included.
    With short_text_shingle, a text of fewer than k words (but some) is one shingle of all its words."""
    carry = np.zeros(0, dtype=np.uint64)  # the last words of the previous chunk, which start its shingles
    shingled = False
    for chunk in word_chunks:
        words = np.concatenate((carry, chunk))
        if words.size >= k:
            yield shingle_hashes(words, k)
            shingled = True
            words = words[-(k - 1) :] if k > 1 else words[:0]
        carry = words
    if short_text_shingle and not shingled and carry.size:
        yield shingle_hashes(carry, carry.size)


def oph_signature(shingle_arrays: Iterable[np.ndarray], num_hashes: int) -> np.ndarray:
    """One-permutation MinHash: each shingle hash goes to one of num_hashes bins by its top bits, and each bin keeps
    its least hash; a bin no shingle reached holds EMPTY_BIN. Two texts' bins agree with probability about the
    Jaccard similarity of their shingle sets, at the cost of one hash per shingle."""
    if num_hashes < 1:
        raise ValueError("the number of hashes must be positive")
    signature = np.full(num_hashes, EMPTY_BIN, dtype=np.uint64)
    for shingles in shingle_arrays:
        bins = (((shingles >> np.uint64(32)) * np.uint64(num_hashes)) >> np.uint64(32)).astype(np.intp)
        np.minimum.at(signature, bins, shingles)
    return signature


def band_hashes(signature: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit LSH key per band of `rows` bins (the band's number mixed in, so equal keys mean the same band
    agrees); a band holding only empty bins would match any text and gives none."""
    if bands * rows != signature.size:
        raise ValueError(f"{bands} bands × {rows} rows do not fit a signature of {signature.size} hashes")
    table = signature.reshape(bands, rows)
    keys = np.arange(bands, dtype=np.uint64) + np.uint64(1)
    for column in range(rows):
        keys = _mix64(keys * _SHINGLE_MULTIPLIER + table[:, column])
    return keys[(table != np.uint64(EMPTY_BIN)).any(axis=1)]


def shingle_set(shingles: np.ndarray) -> np.ndarray:
    """The distinct shingle hashes, sorted: what the exact Jaccard similarity is measured on."""
    ordered = np.sort(shingles)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if ordered.size else ordered


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A ∩ B| / |A ∪ B| of two shingle sets (shingle_set); two empty sets are alike (1.0)."""
    if not a.size and not b.size:
        return 1.0
    common = np.intersect1d(a, b, assume_unique=True).size
    return common / (a.size + b.size - common)
