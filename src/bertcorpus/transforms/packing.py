"""Full-sentence packing, for pretraining without a pair objective (RoBERTa's FULL-SENTENCES).

An instance is one segment: contiguous whole sentences, read across document boundaries, up to the sequence
length, laid out as [CLS] piece [SEP] piece [SEP] ... [SEP], where a piece is a run of one document's sentences
and the [SEP] after a piece marks the end of its document or of the instance. Each pass over a bucket reads its
documents in an order of its own, so that dupe passes pack different neighbours together. A sentence longer than
an instance holds is cut into instance-sized parts, so no token is lost; the target-length draw of the pair
objectives (short_seq_prob) does not apply.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.instances import Bucket
from bertcorpus.transforms.masking import Assembled, SpecialIds
from bertcorpus.wordpiece.ranges import concat_ranges


@dataclass
class PackedPieces:
    """Instances as pieces: piece k is tokens[start[k]:end[k]] of instance[k]; an instance's pieces are
    consecutive and in order."""

    instance: np.ndarray  # (K,) int64, non-decreasing
    start: np.ndarray  # (K,) int64
    end: np.ndarray  # (K,) int64
    count: int  # instances

    def __len__(self) -> int:
        return self.count

    def take(self, instances: np.ndarray) -> PackedPieces:
        """The pieces of these instances (ascending), numbered anew from 0."""
        number = np.full(self.count, -1, np.int64)
        number[instances] = np.arange(len(instances))
        kept = number[self.instance] >= 0
        return PackedPieces(number[self.instance[kept]], self.start[kept], self.end[kept], len(instances))


def pack_sentences(
    bucket: Bucket, documents: int, max_seq_length: int, rng: random.Random, min_document_tokens: int = 0
) -> PackedPieces:
    """One pass over the first `documents` documents of `bucket`, in a seeded order, packed into instances of at
    most `max_seq_length` tokens, [CLS] and every [SEP] included. Documents of fewer than `min_document_tokens`
    tokens are left out (a long-context phase on long documents only, as NeoBERT's 1024+ and 2048+ subsets)."""
    starts, first = bucket.starts_list, bucket.first_list
    order = list(range(documents))
    rng.shuffle(order)
    if min_document_tokens:
        order = [d for d in order if starts[first[d + 1]] - starts[first[d]] >= min_document_tokens]
    pieces: list[tuple[int, int, int]] = []  # (instance, start, end)
    current, used = 0, 1  # the instance being filled, and its tokens so far: [CLS]
    for doc in order:
        piece_open = False  # whether this document already has a piece in the current instance
        for sentence in range(first[doc], first[doc + 1]):
            at, stop = starts[sentence], starts[sentence + 1]
            while at < stop:
                room = max_seq_length - used - (0 if piece_open else 1)  # a new piece brings its [SEP]
                if stop - at <= room:
                    if piece_open:
                        pieces[-1] = (current, pieces[-1][1], stop)
                    else:
                        pieces.append((current, at, stop))
                        used += 1
                    used += stop - at
                    piece_open, at = True, stop
                elif used == 1:  # a sentence longer than a whole instance: this one takes its next part
                    pieces.append((current, at, at + room))
                    at += room
                    current, used, piece_open = current + 1, 1, False
                else:  # the sentence goes whole into the next instance
                    current, used, piece_open = current + 1, 1, False
    instance, start, end = np.array(pieces, dtype=np.int64).reshape(-1, 3).T
    return PackedPieces(instance, start, end, current + (used > 1))


def assemble_packed(
    tokens: np.ndarray,
    packed: PackedPieces,
    max_seq_length: int,
    special: SpecialIds,
    word_continues: np.ndarray | None = None,
) -> Assembled:
    """Rows [CLS] piece [SEP] piece [SEP] ... padded with 0, as one segment: len_a is the row's length - 2, so
    that the last [SEP] closes segment A and no token belongs to a segment B; the [SEP]s between documents are
    the rows' separators, which masking leaves alone."""
    n = packed.count
    sizes = packed.end - packed.start
    # Each piece's place in its row: after [CLS] and the earlier pieces of its instance, each with its [SEP].
    footprint = sizes + 1
    before = np.cumsum(footprint) - footprint
    first_piece = np.searchsorted(packed.instance, packed.instance)  # index of the instance's first piece
    place = 1 + before - before[first_piece]
    row_start = np.arange(n, dtype=np.int64) * max_seq_length
    at = row_start[packed.instance] + place
    flat = np.zeros(n * max_seq_length, np.int32)
    src = concat_ranges(packed.start, sizes)
    into = np.repeat(at - packed.start, sizes) + src
    flat[into] = tokens[src]
    flat[at + sizes] = special.sep
    flat[row_start] = special.cls
    length = np.bincount(packed.instance, weights=footprint, minlength=n).astype(np.int64) + 1
    separators = np.zeros(n * max_seq_length, bool)
    separators[at + sizes] = True
    separators[row_start + length - 1] = False  # the last [SEP] closes the segment, as in a pair's layout
    continues = None
    if word_continues is not None:
        continues = np.zeros(n * max_seq_length, bool)
        continues[into] = word_continues[src]
        continues = continues.reshape(n, max_seq_length)
    return Assembled(
        flat.reshape(n, max_seq_length), length, length - 2, separators.reshape(n, max_seq_length), continues
    )
