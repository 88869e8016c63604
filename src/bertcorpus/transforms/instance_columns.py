"""Finished instances in compact columns: what a record holds, in about a third of its serialised size.

Between building a bucket's instances and writing its shards, `create` keeps them in this form, so that the
pieces that cross its last shuffle are small, and a shard writer holds a third of the bytes it writes.
The input mask, the segment ids and the prediction weights follow from three numbers per instance (its length,
the length of A and its count of predictions); `features()` lays them out as the reference's seven features
for transforms/tfrecord.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from bertcorpus.transforms.instances import concatenate_word_flags


@dataclass
class InstanceColumns:
    input_ids: np.ndarray  # (N, L) with the masked-LM replacements applied, padded with 0
    length: np.ndarray  # (N,) real tokens: [CLS] A [SEP] B [SEP], or the tokenizer's template
    len_a: np.ndarray  # (N,) tokens of A
    positions: np.ndarray  # (N, P) masked positions, ascending, padded with 0
    label_ids: np.ndarray  # (N, P) the original ids at those positions, padded with 0
    predictions: np.ndarray  # (N,) real predictions of each instance
    next_sentence: np.ndarray  # (N,) 1 where B is a random next
    # (N, L) bool, unmasked instances only: the tokens that continue a segmenter's word (the Chinese characters of
    # a word after its first), for whole-word masking at load time; None where no segmenter grouped any.
    word_continues: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.length)

    @staticmethod
    def empty(width: int, predictions: int = 0) -> InstanceColumns:
        none = np.zeros(0, np.int64)
        return InstanceColumns(
            np.zeros((0, width), np.int32),
            none,
            none,
            np.zeros((0, predictions), np.int32),
            np.zeros((0, predictions), np.int32),
            none,
            none,
        )

    def take(self, rows: np.ndarray) -> InstanceColumns:
        return InstanceColumns(*(None if (v := getattr(self, f.name)) is None else v[rows] for f in fields(self)))

    @staticmethod
    def concatenate(parts: list[InstanceColumns]) -> InstanceColumns:
        flags = [p.word_continues for p in parts]
        return InstanceColumns(
            *(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(InstanceColumns)[:-1]),
            concatenate_word_flags(flags, [p.input_ids.shape for p in parts]),
        )

    @staticmethod
    def gather(parts: list[InstanceColumns], part: np.ndarray, row: np.ndarray) -> InstanceColumns:
        """Instance row[i] of parts[part[i]] for every i, in that order, without joining the parts first."""
        by_part = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[by_part], np.arange(len(parts) + 1))
        taken = InstanceColumns.concatenate(
            [parts[p].take(row[by_part[bounds[p] : bounds[p + 1]]]) for p in range(len(parts))]
        )
        placed = np.empty_like(by_part)
        placed[by_part] = np.arange(len(by_part))
        return taken.take(placed)

    def features(self, b_offset: int = 2, b_type: int = 1) -> dict[str, np.ndarray]:
        """The reference's features (bertcorpus.transforms.tfrecord.FEATURE_NAMES), one row per instance. B starts
        b_offset tokens after A's first ([CLS] A [SEP]: 2); its tokens and the rest have type b_type (0 in
        RoBERTa's template, where every token has type 0)."""
        col = np.arange(self.input_ids.shape[1])[None, :]
        length = self.length[:, None]
        return {
            "input_ids": self.input_ids,
            "input_mask": col < length,
            "segment_ids": (col >= self.len_a[:, None] + b_offset) & (col < length) & bool(b_type),
            "masked_lm_positions": self.positions,
            "masked_lm_ids": self.label_ids,
            "masked_lm_weights": (np.arange(self.positions.shape[1])[None, :] < self.predictions[:, None]).astype(
                np.float32
            ),
            "next_sentence_labels": self.next_sentence[:, None],
        }
