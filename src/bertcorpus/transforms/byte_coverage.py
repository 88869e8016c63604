"""Which bytes of a reader's span it has passed, so that a progress count takes each byte once however the reader
moves: a reader of a byte span reads back to the start of its first line, and on past its end to finish its last
(in a file whose one line is hundreds of MB, every span inside it reads all of it), and a Parquet reader reads the
file's footer before its row groups."""

from __future__ import annotations

import bisect


class SpanCoverage:
    """The bytes of [start, stop) covered so far by reads anywhere in the file (stop None: to the file's end), as
    sorted disjoint ranges: reads mostly follow one another, so there are few."""

    def __init__(self, start: int = 0, stop: int | None = None):
        self.start, self.stop = start, stop
        self.covered = 0
        self._ranges: list[tuple[int, int]] = []

    def add(self, begin: int, end: int) -> int:
        """Cover the bytes [begin, end) of the file; return how many of them lie in the span, not covered before."""
        begin, end = max(begin, self.start), end if self.stop is None else min(end, self.stop)
        if begin >= end:
            return 0
        first = bisect.bisect_left(self._ranges, begin, key=lambda r: r[1])  # the first range that ends at or after it
        last, overlap, low, high = first, 0, begin, end
        while last < len(self._ranges) and self._ranges[last][0] <= end:
            a, b = self._ranges[last]
            overlap += max(0, min(b, end) - max(a, begin))
            low, high = min(low, a), max(high, b)
            last += 1
        self._ranges[first:last] = [(low, high)]
        self.covered += end - begin - overlap
        return end - begin - overlap
