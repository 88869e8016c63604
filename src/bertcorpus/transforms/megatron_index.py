"""Megatron-LM's indexed dataset (the `MMIDIDX` format, version 1): a `.bin` of token ids, one sequence after
another, and an `.idx` that indexes it, as Megatron-LM, NeMo and the tools built on them read it.

    .idx   b"MMIDIDX\\x00\\x00"   version (u64, 1)   dtype code (u8)   sequences S (u64)   D + 1 (u64)
           sequence lengths (int32 × S)   sequence byte offsets into .bin (int64 × S)
           document indices (int64 × D + 1): document d holds sequences [indices[d], indices[d + 1])
    .bin   the ids of every sequence, in order, in the dtype of the code

create writes one sequence per sentence and one document per document (the form Megatron's BERT dataset builds
its pairs and masks from at load time), or one sequence per document. Ids are uint16 where the vocabulary has fewer
than 65,500 of them and int32 otherwise, as Megatron's own builder picks.

A part (one bucket's documents) is a dataset of its own; parts merge into one by writing their ids one after
another and their index arrays with the offsets rebased: a merge holds one part's index at a time, never the ids.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

HEADER = b"MMIDIDX\x00\x00"
VERSION = 1
# Megatron's numeric codes of the dtypes of .bin
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
SMALL_VOCAB = 65_500  # below it, ids are uint16 (Megatron's own choice of dtype)
PREAMBLE = len(HEADER) + 8 + 1 + 8 + 8


class MegatronIndexError(ValueError):
    """An .idx that is not Megatron's format, or not what it should be."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16 if vocab_size < SMALL_VOCAB else np.int32)


@dataclass
class IndexArrays:
    """An .idx's content: the dtype of its .bin, each sequence's length, and where each document's sequences start
    (documents + 1 entries, the last the number of sequences)."""

    dtype: np.dtype
    lengths: np.ndarray  # int32 (S,)
    document_indices: np.ndarray  # int64 (D + 1,)

    @property
    def sequences(self) -> int:
        return len(self.lengths)

    @property
    def documents(self) -> int:
        return len(self.document_indices) - 1

    def pointers(self, base: int = 0) -> np.ndarray:
        """int64 byte offsets of each sequence in its .bin, the first at `base`."""
        sizes = self.lengths.astype(np.int64) * self.dtype.itemsize
        return base + np.cumsum(sizes) - sizes


def preamble(dtype: np.dtype, sequences: int, documents: int) -> bytes:
    """The .idx's fixed start."""
    return (
        HEADER
        + struct.pack("<Q", VERSION)
        + struct.pack("<B", DTYPE_CODES[dtype])
        + struct.pack("<QQ", sequences, documents + 1)
    )


def index_bytes(index: IndexArrays) -> bytes:
    """A whole .idx."""
    return b"".join(
        [
            preamble(index.dtype, index.sequences, index.documents),
            index.lengths.astype("<i4").tobytes(),
            index.pointers().astype("<i8").tobytes(),
            index.document_indices.astype("<i8").tobytes(),
        ]
    )


def read_index(data: bytes, name: str = "index") -> IndexArrays:
    """An .idx's arrays; MegatronIndexError where the bytes are not Megatron's format version 1."""
    if len(data) < PREAMBLE or data[: len(HEADER)] != HEADER:
        raise MegatronIndexError(f"{name} is not a Megatron index (no MMIDIDX header)")
    version, code = struct.unpack_from("<QB", data, len(HEADER))
    sequences, entries = struct.unpack_from("<QQ", data, len(HEADER) + 9)
    dtypes = {c: t for t, c in DTYPE_CODES.items()}
    if version != VERSION or code not in dtypes:
        raise MegatronIndexError(f"{name}: version {version}, dtype code {code}: not what create writes")
    expected = PREAMBLE + 4 * sequences + 8 * sequences + 8 * entries
    if len(data) != expected or entries < 1:
        raise MegatronIndexError(f"{name} holds {len(data):,} bytes where its counts make {expected:,}")
    at = PREAMBLE
    lengths = np.frombuffer(data, "<i4", sequences, at)
    at += 12 * sequences  # lengths, then the pointers, which follow from them
    return IndexArrays(dtypes[code], lengths.astype(np.int32), np.frombuffer(data, "<i8", entries, at).astype(np.int64))


def bucket_index(sentence_lengths: np.ndarray, doc_first_sentence: np.ndarray, dtype: np.dtype) -> IndexArrays:
    """A bucket's documents as one sequence per sentence."""
    return IndexArrays(dtype, sentence_lengths.astype(np.int32), doc_first_sentence.astype(np.int64))


def document_index(sentence_lengths: np.ndarray, doc_first_sentence: np.ndarray, dtype: np.dtype) -> IndexArrays:
    """A bucket's documents as one sequence per document (each document's sentences joined)."""
    ends = np.cumsum(np.concatenate(([0], sentence_lengths.astype(np.int64))))[doc_first_sentence]
    return IndexArrays(dtype, np.diff(ends).astype(np.int32), np.arange(len(doc_first_sentence), dtype=np.int64))


def merged_sections(parts: Callable[[], Iterable[IndexArrays]]) -> Iterator[bytes]:
    """The merged .idx's arrays, after its preamble: each section (lengths, then pointers, then document indices)
    part by part, from a fresh pass over the parts (`parts()`), so that one part's index is held at a time."""
    for what in ("lengths", "pointers", "documents"):
        for values in _section(parts(), what):
            yield values.tobytes()


def _section(parts: Iterable[IndexArrays], what: str) -> Iterator[np.ndarray]:
    """One section of the merged index, part by part (documents: each part's boundaries after its first, rebased;
    the merged index's leading 0 comes first)."""
    if what == "documents":
        yield np.zeros(1, "<i8")
    byte_base = sequence_base = 0
    for part in parts:
        if what == "lengths":
            yield part.lengths.astype("<i4")
        elif what == "pointers":
            yield part.pointers(byte_base).astype("<i8")
        else:
            yield (part.document_indices[1:] + sequence_base).astype("<i8")
        byte_base += int(part.lengths.astype(np.int64).sum()) * part.dtype.itemsize
        sequence_base += part.sequences
