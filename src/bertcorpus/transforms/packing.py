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
    bucket: Bucket,
    documents: int,
    max_seq_length: int,
    rng: random.Random,
    min_document_tokens: int = 0,
    frame: tuple[int, int] = (1, 1),
) -> PackedPieces:
    """One pass over the first `documents` documents of `bucket`, in a seeded order, packed into instances of at
    most `max_seq_length` tokens, the special tokens included: frame[0] before the first piece ([CLS]), frame[1]
    after every piece ([SEP]). Documents of fewer than `min_document_tokens` tokens are left out (a long-context
    phase on long documents only, as NeoBERT's 1024+ and 2048+ subsets)."""
    opening, closing = frame
    starts, first = bucket.starts_list, bucket.first_list
    order = list(range(documents))
    rng.shuffle(order)
    if min_document_tokens:
        order = [d for d in order if starts[first[d + 1]] - starts[first[d]] >= min_document_tokens]
    pieces: list[tuple[int, int, int]] = []  # (instance, start, end)
    current, used = 0, opening  # the instance being filled, and its tokens so far: [CLS]
    for doc in order:
        piece_open = False  # whether this document already has a piece in the current instance
        for sentence in range(first[doc], first[doc + 1]):
            at, stop = starts[sentence], starts[sentence + 1]
            while at < stop:
                room = max_seq_length - used - (0 if piece_open else closing)  # a new piece brings its [SEP]
                if stop - at <= room:
                    if piece_open:
                        pieces[-1] = (current, pieces[-1][1], stop)
                    else:
                        pieces.append((current, at, stop))
                        used += closing
                    used += stop - at
                    piece_open, at = True, stop
                elif used == opening:  # a sentence longer than a whole instance: this one takes its next part
                    pieces.append((current, at, at + room))
                    at += room
                    current, used, piece_open = current + 1, opening, False
                else:  # the sentence goes whole into the next instance
                    current, used, piece_open = current + 1, opening, False
    instance, start, end = np.array(pieces, dtype=np.int64).reshape(-1, 3).T
    return PackedPieces(instance, start, end, current + (used > opening))


def assemble_packed(
    tokens: np.ndarray,
    packed: PackedPieces,
    max_seq_length: int,
    special: SpecialIds,
    word_continues: np.ndarray | None = None,
) -> Assembled:
    """Rows in the tokenizer's single template, one piece after another, each closed by its suffix: [CLS] piece
    [SEP] piece [SEP] ... for BERT's, padded with 0, as one segment (SequenceLayout.single_frame: the last suffix
    closes segment A and no token belongs to a segment B); the suffixes between documents are the rows'
    separators, which masking leaves alone."""
    lay = special.templates
    opening, closing = lay.single_prefix, lay.single_suffix
    n = packed.count
    sizes = packed.end - packed.start
    # Each piece's place in its row: after the prefix and the earlier pieces of its instance, each with its suffix.
    footprint = sizes + len(closing)
    before = np.cumsum(footprint) - footprint
    first_piece = np.searchsorted(packed.instance, packed.instance)  # index of the instance's first piece
    place = len(opening) + before - before[first_piece]
    row_start = np.arange(n, dtype=np.int64) * max_seq_length
    at = row_start[packed.instance] + place
    flat = np.zeros(n * max_seq_length, np.int32)
    src = concat_ranges(packed.start, sizes)
    into = np.repeat(at - packed.start, sizes) + src
    flat[into] = tokens[src]
    separators = np.zeros(n * max_seq_length, bool)
    for k, token in enumerate(closing):
        flat[at + sizes + k] = token
        separators[at + sizes + k] = True
    for k, token in enumerate(opening):
        flat[row_start + k] = token
    length = np.bincount(packed.instance, weights=footprint, minlength=n).astype(np.int64) + len(opening)
    for k in range(len(closing)):  # the last suffix closes the segment, as the middle of a pair's layout
        separators[row_start + length - 1 - k] = False
    continues = None
    if word_continues is not None:
        continues = np.zeros(n * max_seq_length, bool)
        continues[into] = word_continues[src]
        continues = continues.reshape(n, max_seq_length)
    frame = lay.single_frame
    return Assembled(
        flat.reshape(n, max_seq_length),
        length,
        length - frame[0] - frame[1],
        separators.reshape(n, max_seq_length),
        continues,
        frame,
    )
