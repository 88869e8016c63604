"""How many pages a damaged stretch of a dump took, where the damage itself cannot count them: a gap whose XML
bytes are known waits for the pages after it, then its pages are bound from above, by the ids of the pages on either
side where the dump orders its pages by id (as Wikipedia's do), else by its XML bytes over the size of the smallest
page around it (transforms/wiki_pages.py reads the stream and reports each gap as a PageError with this Loss).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from bertcorpus.transforms.wiki_page_items import Loss

# Page starts (and ids) on each side of a gap that bound the pages it held.
ESTIMATE_PAGES = 32


@dataclass
class Gap:
    """A gap whose pages are estimated once enough pages after it have been seen: its error as it stood when the gap
    was found (where, why, the head of the page it cut, the last page before it), the XML bytes it held, and the
    page starts around it."""

    offset: int
    reason: str
    detail: str
    cut_page: bytes | str
    last_page: str
    lost_bytes: int
    before: list[int]
    after: list[int]
    ids_before: list[int]  # the ids of the pages read before the gap, in order
    ids_after: list[int] = dataclasses.field(default_factory=list)


class LostPages:
    """The gaps a reader found that wait for the pages after them, and the starts and ids of the last pages read."""

    def __init__(self) -> None:
        self.page_starts: deque[int] = deque(maxlen=ESTIMATE_PAGES)  # offsets of the last pages begun
        self.page_ids: deque[int] = deque(maxlen=ESTIMATE_PAGES)  # ids of the last pages read
        self.gaps: list[Gap] = []  # gaps waiting for the pages after them

    def page_begins(self, offset: int) -> bool:
        """A page begins at `offset`; True when the oldest gap has seen enough pages after it to be estimated."""
        self.page_starts.append(offset)
        if not self.gaps:
            return False
        for gap in self.gaps:
            gap.after.append(offset)
        return len(self.gaps[0].after) >= ESTIMATE_PAGES

    def page_read(self, page_id: int) -> None:
        self.page_ids.append(page_id)
        for gap in self.gaps:
            gap.ids_after.append(page_id)

    def add_gap(
        self, offset: int, reason: str, detail: str, cut_page: bytes | str, last_page: str, lost_bytes: int
    ) -> None:
        self.gaps.append(
            Gap(
                offset,
                reason,
                detail,
                cut_page,
                last_page,
                lost_bytes,
                list(self.page_starts),
                [],
                list(self.page_ids),
            )
        )

    def estimated(self, bytes_per_unit: float) -> list[tuple[Gap, str, Loss]]:
        """Every gap seen so far, each with its error's detail and its Loss; then none waits.
        `bytes_per_unit`: the bytes of input per unit of the offsets (1, or the ratio where the XML is decoded)."""
        estimated = [(gap, *gap_loss(gap, bytes_per_unit)) for gap in self.gaps]
        self.gaps = []
        return estimated


def gap_loss(gap: Gap, bytes_per_unit: float) -> tuple[str, Loss]:
    """(the error's detail, the Loss) of a gap."""
    ids = [*gap.ids_before, *gap.ids_after[:1]]
    if gap.ids_before and gap.ids_after and all(a < b for a, b in pairwise(ids)):
        # every page lost has an id between the last one read before the gap and the first one after it
        pages = gap.ids_after[0] - gap.ids_before[-1] - 1 - bool(gap.cut_page)
        said = (
            f"at most {pages:,} pages lost (a bound: the pages on either side are {gap.ids_before[-1]} and "
            f"{gap.ids_after[0]}, in order of id)"
        )
        return f"{gap.detail}; {said}", Loss(pages, estimated=True, bound=True)
    sizes = [b - a for starts in (gap.before, gap.after) for a, b in pairwise(starts)]
    if not sizes:
        said = "how many pages it held cannot be told: too few pages around it"
        return f"{gap.detail}; {said}", Loss(None)
    smallest = max(1.0, min(sizes) * bytes_per_unit)
    pages = math.ceil(gap.lost_bytes / smallest)
    said = (
        f"at most about {pages:,} pages lost (an estimate: about {gap.lost_bytes:,} bytes of XML, at "
        f"{smallest:,.0f} bytes for the smallest page around them)"
    )
    if gap.reason == "truncated":
        said += ", and what followed the cut is not known"
    return f"{gap.detail}; {said}", Loss(pages, estimated=True)
