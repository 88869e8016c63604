"""Where every instance's tokens came from (create --provenance): for each segment, the ordered pieces of document
text, as (document id, first character, end character) into that document's text.

A sentence's tokens are made from a stretch of its document's text (Bucket.spans): the sentence itself with a
vocab.txt, the sentence with the whitespace before it with a tokenizer.json (transforms/document_tokens.py). A
segment is a run of consecutive sentences of one document (a pair's A and B, a packed row's piece), so its piece is
the stretch from its first sentence's start to its last one's end, and its tokens are a contiguous run of that
piece's tokenisation: truncation may cut tokens off either end, and a sentence cut into parts (too long for a pair)
gives each part the whole sentence's stretch. Where a tokenizer does not treat a text as its units one after
another (wordpiece/piece_encoder.py), a piece is given per sentence instead, so that the claim holds for it too.

The documents of text given one sentence a line have as their text the sentences joined by a space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcorpus.wordpiece.ranges import concat_ranges

PROVENANCE = "provenance"  # the column of the Parquet and MDS forms, and of a TFRecord shard's Parquet beside it


@dataclass
class Provenance:
    """Per instance, its pieces: instance i's are pieces offsets[i]..offsets[i + 1], in order; each names a document
    (a number into `documents`), its characters [start, end) and the segment it made (0: A or the packed row,
    1: B)."""

    offsets: np.ndarray  # (N + 1,) int64
    document: np.ndarray  # (K,) int32
    start: np.ndarray  # (K,) int64
    end: np.ndarray  # (K,) int64
    segment: np.ndarray  # (K,) uint8
    documents: list[str]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def take(self, rows: np.ndarray) -> Provenance:
        rows = np.asarray(rows, np.int64)
        counts = self.offsets[rows + 1] - self.offsets[rows]
        at = concat_ranges(self.offsets[rows], counts)
        used, number = np.unique(self.document[at], return_inverse=True)
        return Provenance(
            np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
            number.astype(np.int32),
            self.start[at],
            self.end[at],
            self.segment[at],
            [self.documents[d] for d in used.tolist()],
        )

    @staticmethod
    def concatenate(parts: list[Provenance]) -> Provenance:
        """The instances of several, in order, under one table of documents."""
        names = sorted({name for p in parts for name in p.documents})
        number = {name: i for i, name in enumerate(names)}
        counts = np.concatenate([np.diff(p.offsets) for p in parts]) if parts else np.zeros(0, np.int64)
        return Provenance(
            np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
            np.concatenate(
                [np.array([number[n] for n in p.documents], np.int32)[p.document] for p in parts] or [np.zeros(0)]
            ).astype(np.int32),
            np.concatenate([p.start for p in parts] or [np.zeros(0)]).astype(np.int64),
            np.concatenate([p.end for p in parts] or [np.zeros(0)]).astype(np.int64),
            np.concatenate([p.segment for p in parts] or [np.zeros(0)]).astype(np.uint8),
            names,
        )

    def rows(self) -> list[list[dict]]:
        """Each instance's pieces as records {document, start, end, segment}, for the Parquet and JSON forms."""
        names = self.documents
        pieces = [
            {"document": names[d], "start": s, "end": e, "segment": g}
            for d, s, e, g in zip(self.document.tolist(), self.start.tolist(), self.end.tolist(), self.segment.tolist())
        ]
        bounds = self.offsets.tolist()
        return [pieces[a:b] for a, b in zip(bounds, bounds[1:])]


def segment_pieces(
    starts: np.ndarray,
    ends: np.ndarray,
    sentence_starts: np.ndarray,
    doc_first_sentence: np.ndarray,
    spans: np.ndarray,
    per_sentence: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of segments given as token ranges [starts, ends) of a bucket: per piece (which segment, document,
    first character, end character); one piece per segment, or with per_sentence one per sentence it touches."""
    first = np.searchsorted(sentence_starts, starts, side="right") - 1
    last = np.searchsorted(sentence_starts, np.maximum(ends, starts + 1) - 1, side="right") - 1
    document = np.searchsorted(doc_first_sentence, first, side="right") - 1
    if not per_sentence:
        return np.arange(len(starts)), document, spans[first, 0], spans[last, 1]
    counts = last - first + 1
    sentence = concat_ranges(first, counts)
    return (
        np.repeat(np.arange(len(starts)), counts),
        np.repeat(document, counts),
        spans[sentence, 0],
        spans[sentence, 1],
    )


def pair_provenance(columns: np.ndarray, bucket, per_sentence: bool) -> Provenance:
    """The provenance of a pass's pairs (InstanceBatch.columns(): A's and B's token ranges into the bucket)."""
    a_start, a_end, b_start, b_end = columns[:4]
    n = len(a_start)
    args = (bucket.sentence_starts, bucket.doc_first_sentence, bucket.spans, per_sentence)
    a = segment_pieces(a_start, a_end, *args)
    b = segment_pieces(b_start, b_end, *args)
    segment = np.concatenate([np.zeros(len(a[0]), np.uint8), np.ones(len(b[0]), np.uint8)])
    instance = np.concatenate([a[0], b[0]])
    order = np.lexsort((segment, instance))  # each instance's A piece(s), then its B piece(s)
    return _provenance(
        n, instance[order], *(np.concatenate(x)[order] for x in zip(a[1:], b[1:])), segment[order], bucket
    )


def packed_provenance(packed, bucket, per_sentence: bool) -> Provenance:
    """The provenance of a pass's packed rows (PackedPieces: each piece a run of one document's tokens)."""
    args = (bucket.sentence_starts, bucket.doc_first_sentence, bucket.spans, per_sentence)
    piece, document, start, end = segment_pieces(packed.start, packed.end, *args)
    instance = packed.instance[piece]
    return _provenance(packed.count, instance, document, start, end, np.zeros(len(piece), np.uint8), bucket)


def _provenance(n: int, instance, document, start, end, segment, bucket) -> Provenance:
    """Pieces already in instance order, their documents numbered into the bucket's documents."""
    counts = np.bincount(instance, minlength=n)
    used, number = np.unique(document, return_inverse=True)
    return Provenance(
        np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        number.astype(np.int32),
        np.asarray(start, np.int64),
        np.asarray(end, np.int64),
        np.asarray(segment, np.uint8),
        [bucket.doc_ids[d] for d in used.tolist()],
    )
