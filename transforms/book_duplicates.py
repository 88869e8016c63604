"""What makes two books copies of each other: an exact-copy key, and MinHash signatures for near copies.

Both ignore what differs between editions of one text that were produced differently: encoding, line endings,
wrapping, case, quote and dash style, emphasis markers. All constants are fixed, so keys and signatures are
the same in every process, on every machine and in every run.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import numpy as np

__all__ = [
    "EMPTY_BIN",
    "NUM_PERM",
    "band_keys",
    "dedup_key",
    "jaccard_estimate",
    "lsh_rows",
    "minhash_signature",
    "near_copies",
]

# General punctuation (U+2000-U+206F: dashes, curly quotes, ellipsis) and Latin-1 signs (U+00A0-U+00BF),
# matched on UTF-8 bytes with one literal-prefix pattern per lead pair, which costs less than a character
# class over str; the rarer ones are only searched for when their lead bytes occur.
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
EMPTY_BIN = (1 << 64) - 1
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
    signature = np.full(num_perm, EMPTY_BIN, dtype=np.uint64)
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
        if x == EMPTY_BIN and y == EMPTY_BIN:
            continue
        used += 1
        equal += x == y
    return equal / used if used else 1.0


# Near copies among many books: LSH over bands of the signature, so that only books sharing a band are compared.
NUM_PERM = 64  # MinHash bins per signature
LSH_RECALL = 0.99  # the least chance that two books exactly at the threshold share a band


def lsh_rows(threshold: float, num_perm: int = NUM_PERM) -> int:
    """Signature bins per LSH band: the most (fewest false candidates) with which two books of similarity
    `threshold` still share at least one band with probability LSH_RECALL."""
    for rows in (32, 16, 8, 4, 2):
        if num_perm % rows == 0 and 1 - (1 - threshold**rows) ** (num_perm // rows) >= LSH_RECALL:
            return rows
    return 1


def band_keys(signature: tuple[int, ...], rows: int) -> list[str]:
    """One bucket key per band of the signature; bands holding only empty bins match anything and are left out."""
    keys = []
    for band, start in enumerate(range(0, len(signature), rows)):
        values = signature[start : start + rows]
        if any(v != EMPTY_BIN for v in values):
            digest = hashlib.blake2b(b"".join(v.to_bytes(8, "little") for v in values), digest_size=12)
            keys.append(f"{band}:{digest.hexdigest()}")
    return keys


def near_copies(members, threshold: float):
    """(id, path, signature) of one band bucket → the paths of books with a near copy of a smaller (id, path).

    A book is dropped when any book before it is similar enough, whether or not that one is kept itself: the
    decision needs no order between buckets, so it is the same on every runner."""
    members = sorted(set(members))
    for j in range(1, len(members)):
        if any(jaccard_estimate(members[i][2], members[j][2]) >= threshold for i in range(j)):
            yield members[j][1]
