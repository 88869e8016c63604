"""What makes two books copies of each other: an exact-copy key, and MinHash signatures for near copies.

Both ignore what differs between editions of one text that were produced differently: encoding, line endings,
wrapping, case, quote and dash style, emphasis markers. All constants are fixed, so keys and signatures are
the same in every process, on every machine and in every run.
"""

from __future__ import annotations

import hashlib

from bertcorpus.transforms.minhash import (
    EMPTY_BIN,
    fold_text,
    folded_utf8,
    oph_signature,
    shingle_chunks,
    word_hash_chunks,
)

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

_ASCII_NON_ALNUM = bytes(b for b in range(128) if not chr(b).isalnum())
_SHINGLE = 5


def dedup_key(text: str) -> str:
    """sha256 of the text reduced to its letters and digits, casefolded (NFKC first).

    Two copies of a book that differ in encoding, line endings, wrapping, quote and dash style or
    emphasis markers get the same key; any change of wording gives another.
    """
    data = folded_utf8(text, b"").translate(None, _ASCII_NON_ALNUM)
    return hashlib.sha256(data).hexdigest()


def minhash_signature(text: str, num_perm: int = 64) -> tuple[int, ...]:
    """MinHash signature (num_perm bins) of the set of word 5-shingles of the casefolded text (transforms/minhash.py).

    Compare two signatures with jaccard_estimate(). Punctuation, case and layout do not change it.
    A text of fewer than five words is one shingle. Empty bins hold 2**64 - 1.
    """
    if num_perm < 1:
        raise ValueError("num_perm must be positive")
    shingles = shingle_chunks(word_hash_chunks(fold_text(text)), _SHINGLE, short_text_shingle=True)
    return tuple(int(v) for v in oph_signature(shingles, num_perm))


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
