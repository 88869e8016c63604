"""The order of one epoch of the loader: a permutation of blocks, a shuffle inside windows of blocks, and global
batches cut from that order (from one length bin's instances each, where the output has bins).

A split's instances are numbered in manifest order (shard by shard, row by row) and cut into blocks (a Parquet row
group; a run of TFRecords). An epoch permutes the blocks with a generator seeded by (seed, epoch), groups them
WINDOW_BLOCKS at a time into windows, and shuffles the instances inside each window, so that reads stay within a
few blocks at a time. Global batches are consecutive instances of that order.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from bertcorpus.transforms.seeding import numpy_rng
from bertcorpus.wordpiece.ranges import concat_ranges

WINDOW_BLOCKS = 8  # blocks whose instances are shuffled together
_CACHED_WINDOWS = 16


class EpochPlan:
    """The order of one epoch: which instances make global batch t, for every t (see the module docstring).

    bin_counts: (blocks, bins) instances of each bin in each block (one column without bins)."""

    def __init__(
        self,
        block_start: np.ndarray,
        block_rows: np.ndarray,
        bin_counts: np.ndarray,
        instance_bins,
        global_batch: int,
        drop_remainder: bool,
        seed: int,
        epoch: int,
    ):
        self.block_start, self.block_rows = block_start, block_rows
        self.instance_bins = instance_bins  # global instance numbers → bins (None without bins)
        self.seed, self.epoch = seed, epoch
        self.global_batch = global_batch
        rng = numpy_rng(seed, "loader-blocks", epoch)
        self.block_order = rng.permutation(len(block_rows))
        windows = np.arange(0, len(block_rows), WINDOW_BLOCKS)
        per_window = (
            np.add.reduceat(bin_counts[self.block_order], windows, axis=0)
            if len(windows)
            else np.zeros((0, bin_counts.shape[1]), np.int64)
        )
        # cum[w, b]: instances of bin b in the windows before w.
        self.cum = np.concatenate((np.zeros((1, bin_counts.shape[1]), np.int64), np.cumsum(per_window, axis=0)))
        self.totals = self.cum[-1]
        per_bin = self.totals // global_batch if drop_remainder else -(-self.totals // global_batch)
        bins = np.repeat(np.arange(len(per_bin)), per_bin)
        index = np.arange(len(bins)) - np.repeat(np.cumsum(per_bin) - per_bin, per_bin)
        last = np.minimum((index + 1) * global_batch, self.totals[bins]) - 1
        end_window = np.zeros(len(bins), np.int64)
        for b in range(len(per_bin)):
            at = bins == b
            end_window[at] = np.searchsorted(self.cum[1:, b], last[at], side="right")
        # Without bins, batches follow the epoch order. With bins, they come in the order in which the windows
        # complete them, those that one window completes in a seeded random order (so bins mix).
        order = np.lexsort((rng.random(len(bins)), end_window)) if len(per_bin) > 1 else np.arange(len(bins))
        self.batch_bin, self.batch_index = bins[order], index[order]
        self.windows: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self.batch_bin)

    @property
    def window_count(self) -> int:
        return len(self.cum) - 1

    def window(self, w: int) -> list[np.ndarray]:
        """The instances of window w in the epoch's order, one array per bin (trainer/packed_layout.py packs them)."""
        return self._window(w)

    def instances(self, t: int, first: int, count: int) -> tuple[int, np.ndarray]:
        """(bin, global instance numbers) of positions first..first+count-1 of global batch t."""
        b = int(self.batch_bin[t])
        pos = int(self.batch_index[t]) * self.global_batch + first + np.arange(count)
        pos %= self.totals[b]  # a completed last batch wraps to the bin's first instances of the epoch
        window = np.searchsorted(self.cum[1:, b], pos, side="right")
        out = np.empty(count, np.int64)
        for w in np.unique(window).tolist():
            at = window == w
            out[at] = self._window(w)[b][pos[at] - self.cum[w, b]]
        return b, out

    def _window(self, w: int) -> list[np.ndarray]:
        """The shuffled instances of window w, one array per bin."""
        found = self.windows.get(w)
        if found is not None:
            self.windows.move_to_end(w)
            return found
        blocks = self.block_order[w * WINDOW_BLOCKS : (w + 1) * WINDOW_BLOCKS]
        ids = concat_ranges(self.block_start[blocks], self.block_rows[blocks])
        ids = ids[numpy_rng(self.seed, "loader-window", self.epoch, w).permutation(len(ids))]
        if self.instance_bins is None:
            found = [ids]
        else:
            bins = self.instance_bins(ids)
            found = [ids[bins == b] for b in range(self.cum.shape[1])]
        self.windows[w] = found
        while len(self.windows) > _CACHED_WINDOWS:
            self.windows.popitem(last=False)
        return found
