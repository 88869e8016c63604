"""What damaged dumps cost extract-wiki, in pages: counted on the way (from the index where a damaged stream is
listed there), otherwise bound from above by the ids of the pages on either side (`at_most`), or estimated from the
damaged bytes at the size of the smallest page around them, or unknown; recorded with each input in the manifest,
summed for the summary, and judged against --max-error-rate at the end."""

from __future__ import annotations

from collections import Counter

from bertcorpus.transforms.wiki_page_items import PageError


def count_loss(losses: Counter, error: PageError) -> None:
    """Add the pages a damaged stretch took to a file's losses: counted (from the index), at most (from the page
    ids), estimated, or, where that cannot be told, one more stretch of unknown content."""
    if error.lost is not None:
        lost = error.lost
        kind = (
            "unknown"
            if lost.pages is None
            else "at_most"
            if lost.bound
            else "estimated"
            if lost.estimated
            else "counted"
        )
        losses[kind] += 1 if lost.pages is None else lost.pages


def pages_lost_entry(losses: Counter) -> dict:
    """The input description's part that says what its damage took: nothing where nothing was damaged."""
    return {"pages_lost": dict(sorted(losses.items()))} if losses else {}


def with_pages_lost(element):
    """(path, {'input': [description], 'lost': [losses]}) → the description with the pages the file lost."""
    _, joined = element
    lost = Counter()
    for losses in joined["lost"]:
        lost.update(losses)
    for description in joined["input"]:
        yield {**description, **pages_lost_entry(lost)}


def pages_lost(manifest: dict) -> Counter:
    """The pages the inputs' damage took, summed: counted (from an index), at most (from page ids), estimated, and
    the damaged stretches whose pages cannot be told (unknown)."""
    total = Counter()
    for entry in manifest["inputs"]:
        total.update(entry.get("pages_lost", {}))
    return total


def loss_rows(lost: Counter) -> list[tuple[str, str]]:
    if not lost:
        return []
    parts = [f"{lost['counted']:,} counted from the index"] if "counted" in lost else []
    if "at_most" in lost:
        parts.append(f"at most {lost['at_most']:,} by the page ids around the damage")
    if "estimated" in lost:
        parts.append(f"at most about {lost['estimated']:,} estimated from the damaged bytes")
    if lost["unknown"]:
        parts.append(f"unknown in {lost['unknown']:,} damaged stretch{'es' * (lost['unknown'] != 1)}")
    return [("pages lost", ", ".join(parts))]


def loss_check(manifest: dict, max_error_rate: float) -> str | None:
    """Why the run must exit non-zero when the pages lost with damaged stretches count too: (errors + pages lost) /
    (read + pages lost) above --max-error-rate. None where nothing was lost, or not enough."""
    lost = pages_lost(manifest)
    pages = lost["counted"] + lost["at_most"] + lost["estimated"]
    errors, read = manifest["documents"]["errors"], manifest["documents"]["read"]
    if not pages or (errors + pages) / (read + pages) <= max_error_rate:
        return None
    bounds = lost["at_most"] + lost["estimated"]
    estimated = f", {bounds:,} of them upper bounds" if bounds else ""
    return (
        f"{errors:,} errors and {pages:,} pages lost{estimated}, in {read + pages:,} read or lost "
        f"({(errors + pages) / (read + pages):.2%}), is over --max-error-rate {max_error_rate:g}"
    )
