"""Index arithmetic shared by the vectorised steps (the tokenizer's chunk table, masking)."""

from __future__ import annotations

import numpy as np


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """starts[0], starts[0]+1, ..., then starts[1], ...: each range of the given count, concatenated (int64)."""
    offsets = np.repeat(np.cumsum(counts) - counts - starts, counts)
    return np.arange(len(offsets), dtype=np.int64) - offsets
