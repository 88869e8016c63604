"""The loader's padding-free layout: each rank's batch one flat stream of whole instances within a token budget,
for unpadded attention (flash-attention's varlen kernels, Hugging Face's DataCollatorWithFlattening, ModernBERT).

    input_ids, token_type_ids, labels, position_ids   (T,) int64, T <= tokens_per_batch; labels -100 where nothing
                                                      is predicted; position_ids restart at 0 with each instance
    cu_seqlens                                        (instances + 1,) int32: instance j is [cu[j], cu[j + 1])
    max_seqlen                                        () int32, the longest instance of the batch
    next_sentence_label                               (instances,) int64, where the objective has a label

Packing follows the loader's epoch order: its windows of shuffled instances (trainer/epoch_plan.py) are packed one
at a time, best fit decreasing: the window's instances longest first (ties in the window's order), each into the
open batch with the least room that still holds it, else into a new batch; the least filled batch goes on into the
next window, whose instances fill it; then the window's batches in an order seeded by (seed, epoch, window).
Instances are never split, and every batch is one rank's: global step t is packed batches t·W .. t·W + W - 1
(W = world_size), rank r taking the r-th. So ranks get equal counts. With drop_remainder, the epoch's last least
filled batch and the last fewer than W batches are left out; without, they are kept, and the last step is completed
by wrapping to the epoch's first batches.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import OrderedDict

import numpy as np

from bertcorpus.trainer.epoch_plan import EpochPlan
from bertcorpus.transforms.seeding import numpy_rng

IGNORE_INDEX = -100  # the label PyTorch's cross-entropy (and so Hugging Face) skips
_CACHED_WINDOWS = 4


def best_fit_decreasing(lengths: np.ndarray, budget: int) -> list[np.ndarray]:
    """Indices into `lengths`, one array per batch, each batch's lengths summing to at most `budget`."""
    order = np.argsort(-lengths, kind="stable")
    rooms: list[tuple[int, int]] = []  # (room left, batch) of the open batches, ascending
    batches: list[list[int]] = []
    for i, n in zip(order.tolist(), lengths[order].tolist()):
        at = bisect_left(rooms, (n, -1))
        if at < len(rooms):
            room, b = rooms.pop(at)
        else:
            room, b = budget, len(batches)
            batches.append([])
        batches[b].append(i)
        if room - n:
            insort(rooms, (room - n, b))
    return [np.array(b, np.int64) for b in batches]


class PackedPlan:
    """The packed batches of one epoch: which instances make rank r's batch at step t."""

    def __init__(self, order: EpochPlan, lengths: np.ndarray, budget: int, world_size: int, drop_remainder: bool):
        self.order, self.lengths, self.budget, self.world_size = order, lengths, budget, world_size
        self.windows: OrderedDict = OrderedDict()
        # Each window's least filled batch goes on into the next window, packed again with its instances; the
        # last window's is left out of the epoch with drop_remainder, as a remainder of rows is.
        windows = order.window_count
        self.carried_in = [np.zeros(0, np.int64)] * windows
        counts = []
        for w in range(windows):
            counts.append(len(self._window(w)))
            if w + 1 < windows:
                self.carried_in[w + 1] = self._carried_out
        if windows and not drop_remainder and len(self._carried_out):
            self.carried_in.append(self._carried_out)  # a last window of the one batch, kept
            counts.append(1)
        self.window_start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self.batches = int(self.window_start[-1])
        steps = self.batches // world_size
        self.steps = steps if drop_remainder or not self.batches % world_size else steps + 1

    def __len__(self) -> int:
        return self.steps

    def _window(self, w: int) -> list[np.ndarray]:
        found = self.windows.get(w)
        if found is None:
            if w == self.order.window_count:  # the carried batch kept at the end of the epoch
                found = self.windows[w] = [self.carried_in[w]]
                return found
            ids = np.concatenate((self.carried_in[w], self.order.window(w)[0]))
            packed = [ids[b] for b in best_fit_decreasing(self.lengths[ids], self.budget)]
            least = int(np.argmin([self.lengths[b].sum() for b in packed]))
            self._carried_out = packed.pop(least)
            shuffle = numpy_rng(self.order.seed, "loader-packed", self.order.epoch, w).permutation(len(packed))
            found = self.windows[w] = [packed[i] for i in shuffle]
            while len(self.windows) > _CACHED_WINDOWS:
                self.windows.popitem(last=False)
        else:
            self.windows.move_to_end(w)
        return found

    def instances(self, step: int, rank: int) -> np.ndarray:
        """Global instance numbers of rank `rank`'s batch at `step`, in their place in the stream."""
        j = (step * self.world_size + rank) % self.batches
        w = int(np.searchsorted(self.window_start, j, side="right")) - 1
        return self._window(w)[j - self.window_start[w]]

    def filled(self) -> float:
        """The share of the token budget of this epoch's batches that instances fill."""
        windows = range(len(self.window_start) - 1)
        used = sum(int(self.lengths[b].sum()) for w in windows for b in self._window(w))
        return used / (self.budget * self.batches) if self.batches else 0.0


def packed_batch(features: dict[str, np.ndarray], pair_label: bool) -> dict[str, np.ndarray]:
    """A batch in the reference layout (rows padded, masks at masked_lm_positions) as one flat stream."""
    real = features["input_mask"].astype(bool)
    lengths = real.sum(axis=1)
    segments = features["segment_ids"].astype(bool)
    # B starts at each row's first token of segment 1; a row of one segment has none (its length, then).
    b_start = np.where(segments.any(axis=1), segments.argmax(axis=1), lengths)
    return packed_stream(
        features["input_ids"],
        lengths,
        b_start,
        features["masked_lm_positions"],
        features["masked_lm_ids"],
        features["masked_lm_weights"] > 0,
        features["next_sentence_labels"][:, 0] if pair_label else None,
    )


def packed_stream(
    rows: np.ndarray,
    lengths: np.ndarray,
    b_start: np.ndarray,
    positions: np.ndarray,
    label_ids: np.ndarray,
    predicted: np.ndarray,
    sentence_labels: np.ndarray | None,
) -> dict[str, np.ndarray]:
    """The flat stream of instances held as rows padded to one width: lengths and b_start (where segment B starts)
    per row; positions, label_ids and predicted (bool) per prediction slot; the sentence label per row, or None."""
    width = rows.shape[1]
    cu_seqlens = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=cu_seqlens[1:])
    starts = cu_seqlens[:-1]
    if (lengths == width).all():  # rows filled to the width, as long-context rows mostly are: no padding to drop
        input_ids = rows.astype(np.int64).reshape(-1)
    else:
        input_ids = rows[np.arange(width)[None, :] < lengths[:, None]].astype(np.int64)
    position_ids = np.arange(len(input_ids), dtype=np.int64) - np.repeat(starts.astype(np.int64), lengths)
    if (b_start >= lengths).all():  # one segment in every row (no pair objective)
        token_type_ids = np.zeros(len(input_ids), np.int64)
    else:
        token_type_ids = (position_ids >= np.repeat(b_start, lengths)).astype(np.int64)
    labels = np.full(len(input_ids), IGNORE_INDEX, np.int64)
    labels[(starts[:, None] + positions)[predicted]] = label_ids[predicted]
    out = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "labels": labels,
        "cu_seqlens": cu_seqlens,
        "position_ids": position_ids,
        "max_seqlen": np.array(lengths.max(initial=0), np.int32),
    }
    if sentence_labels is not None:
        out["next_sentence_label"] = sentence_labels.astype(np.int64)
    return out
