"""Finished instances in compact columns: what a record holds, in about a third of its serialised size.

Between building a bucket's instances and writing its shards, `create` keeps them in this form, so that the
pieces it compresses, spills and reads back are small, and a shard writer holds a third of the bytes it writes.
The input mask, the segment ids and the prediction weights follow from three numbers per instance (its length,
the length of A and its count of predictions); `features()` lays them out as the reference's seven features
for transforms/tfrecord.py.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass
class InstanceColumns:
    input_ids: np.ndarray      # (N, L) with the masked-LM replacements applied, padded with 0
    length: np.ndarray         # (N,) real tokens: [CLS] A [SEP] B [SEP]
    len_a: np.ndarray          # (N,) tokens of A
    positions: np.ndarray      # (N, P) masked positions, ascending, padded with 0
    label_ids: np.ndarray      # (N, P) the original ids at those positions, padded with 0
    predictions: np.ndarray    # (N,) real predictions of each instance
    next_sentence: np.ndarray  # (N,) 1 where B is a random next

    def __len__(self) -> int:
        return len(self.length)

    def take(self, rows: np.ndarray) -> "InstanceColumns":
        return InstanceColumns(*(getattr(self, f.name)[rows] for f in fields(self)))

    @staticmethod
    def concatenate(parts: list["InstanceColumns"]) -> "InstanceColumns":
        return InstanceColumns(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(InstanceColumns)))

    @staticmethod
    def gather(parts: list["InstanceColumns"], part: np.ndarray, row: np.ndarray) -> "InstanceColumns":
        """Instance row[i] of parts[part[i]] for every i, in that order, without joining the parts first."""
        by_part = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[by_part], np.arange(len(parts) + 1))
        taken = InstanceColumns.concatenate([parts[p].take(row[by_part[bounds[p]:bounds[p + 1]]])
                                             for p in range(len(parts))])
        placed = np.empty_like(by_part)
        placed[by_part] = np.arange(len(by_part))
        return taken.take(placed)

    def features(self) -> dict[str, np.ndarray]:
        """The reference's features (transforms.tfrecord.FEATURE_NAMES), one row per instance."""
        col = np.arange(self.input_ids.shape[1])[None, :]
        length = self.length[:, None]
        return {
            "input_ids": self.input_ids,
            "input_mask": col < length,
            "segment_ids": (col >= self.len_a[:, None] + 2) & (col < length),
            "masked_lm_positions": self.positions,
            "masked_lm_ids": self.label_ids,
            "masked_lm_weights": (np.arange(self.positions.shape[1])[None, :] < self.predictions[:, None]
                                  ).astype(np.float32),
            "next_sentence_labels": self.next_sentence[:, None],
        }

    def to_bytes(self) -> bytes:
        """Header (count, L, P and the width of each column), then each column's values in 16 bits where they fit."""
        columns = [_narrowest(getattr(self, f.name)) for f in fields(self)]
        header = np.array([len(self), *self.input_ids.shape[1:], *self.positions.shape[1:],
                           *(c.dtype.itemsize for c in columns)], np.int64)
        return b"".join([header.tobytes(), *(c.tobytes() for c in columns)])

    @staticmethod
    def from_bytes(data) -> "InstanceColumns":
        names = [f.name for f in fields(InstanceColumns)]
        header = np.frombuffer(data, np.int64, 3 + len(names))
        n, width, predictions = (int(x) for x in header[:3])
        shapes = {"input_ids": (n, width), "positions": (n, predictions), "label_ids": (n, predictions)}
        offset, columns = header.nbytes, []
        for name, itemsize in zip(names, header[3:].tolist()):
            shape = shapes.get(name, (n,))
            count = int(np.prod(shape))
            columns.append(np.frombuffer(data, _WIDTHS[itemsize], count, offset).reshape(shape))
            offset += count * itemsize
        return InstanceColumns(*columns)


_WIDTHS = {2: np.dtype("<u2"), 4: np.dtype("<i4")}


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Non-negative ints as 16-bit where every value fits, otherwise 32-bit."""
    top = int(values.max(initial=0))
    if values.size and int(values.min()) < 0 or top >= 1 << 31:
        raise ValueError(f"a column of instances holds a value outside [0, 2**31): {top}")
    return values.astype(_WIDTHS[2] if top < 1 << 16 else _WIDTHS[4])
