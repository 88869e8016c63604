"""Chunks of text and their token ids, learnt once and looked up ever after: the cache that makes tokenisation fast
wherever a tokenizer treats each chunk of a text on its own.

The table is flat: each known chunk has a row, and its ids are ids[start:start + count] of one array, so that a
document's ids are gathered by numpy from its chunks' rows. Columns of the same length as the ids (whether a token
is an ideograph, where it starts in its chunk) ride along. Natural text repeats its chunks so often that most of a
document never reaches the tokenizer itself.
"""

from __future__ import annotations

from itertools import repeat

import numpy as np

from bertcorpus.wordpiece.ranges import concat_ranges

# Chunks held; a bound on the table's memory. Dropping it costs little: frequent chunks come back first.
CHUNK_LIMIT = 400_000


class ChunkTable:
    """Chunk → its ids (int32) and, per id, the values of each extra column (name → dtype). `empty`: chunks that
    stand for no ids (a tokenizer's own markers, which no text gives), held in the first rows whatever is dropped."""

    def __init__(self, extras: dict[str, type] | None = None, limit: int = CHUNK_LIMIT, empty: tuple[str, ...] = ()):
        self.extras = dict(extras or {})
        self.limit = limit
        self.empty = tuple(empty)
        self.clear()

    def clear(self) -> None:
        self._row: dict[str, int] = {}  # chunk → its row
        self._start = np.zeros(1024, np.int64)  # row → its first id in ids
        self._count = np.zeros(1024, np.int64)  # row → how many ids
        self.ids = np.zeros(1 << 16, np.int32)
        self.columns = {name: np.zeros(1 << 16, dtype) for name, dtype in self.extras.items()}
        self._used = 0  # entries of ids in use
        if self.empty:
            self.add(list(self.empty), np.zeros(len(self.empty), np.int64), np.zeros(0, np.int32))

    def add(self, chunks: list[str], counts: np.ndarray, ids: np.ndarray, **columns: np.ndarray) -> None:
        """New rows: chunk i's ids are the next counts[i] of ids, with the same entries of each extra column."""
        first_row = len(self._row)
        rows = slice(first_row, first_row + len(chunks))
        end = self._used + len(ids)
        self._start = _grown(self._start, rows.stop)
        self._count = _grown(self._count, rows.stop)
        self.ids = _grown(self.ids, end)
        self._start[rows] = self._used + np.cumsum(counts) - counts
        self._count[rows] = counts
        self.ids[self._used : end] = ids
        for name, values in columns.items():
            self.columns[name] = _grown(self.columns[name], end)
            self.columns[name][self._used : end] = values
        self._used = end
        self._row.update(zip(chunks, range(rows.start, rows.stop)))

    def where(self, chunks: list[str], learn) -> tuple[np.ndarray, np.ndarray]:
        """(where every id of the chunks is in the table, in order; the id count of each chunk). Chunks the table
        lacks are first given to learn(unseen chunks), which adds them."""
        return self.ranges(self.rows(chunks, learn))

    def rows(self, chunks: list[str], learn) -> np.ndarray:
        """Each chunk's row (int64). The distinct chunks the table lacks are first given to learn, in a fixed order
        (so that what is learnt from them, and everything after, is reproducible), which adds them; where they would
        not fit, the table is cleared first and learns every chunk of these (a fresh table refills with what the
        text uses now)."""
        rows = np.fromiter(map(self._row.get, chunks, repeat(-1)), np.int64, len(chunks))
        missing = np.flatnonzero(rows < 0).tolist()
        if not missing:
            return rows
        unseen = sorted(set(map(chunks.__getitem__, missing)))
        if len(self._row) + len(unseen) > self.limit:
            self.clear()
            learn(sorted(set(chunks).difference(self._row)))
            return np.fromiter(map(self._row.__getitem__, chunks), np.int64, len(chunks))
        learn(unseen)
        rows[missing] = np.fromiter(map(self._row.__getitem__, map(chunks.__getitem__, missing)), np.int64)
        return rows

    def ranges(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(where every id of these rows is in the table, in order; the id count of each row)."""
        counts = self._count[rows]
        return concat_ranges(self._start[rows], counts), counts


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """array, or a copy with room for at least size entries (capacity doubles)."""
    if size <= len(array):
        return array
    bigger = np.zeros(max(size, 2 * len(array)), array.dtype)
    bigger[: len(array)] = array
    return bigger
