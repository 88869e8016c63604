"""A document too long for a worker's unit of memory, cut into pieces at paragraph boundaries.

create holds a bucket of documents, and every instance made from them, in one worker's memory, and dedup a
document's folded text, word hashes and shingles: a 44 MB document multiplied create's peak memory by four, and a
200 MB one took dedup to 4.7 GB. So a document longer than a cap (--max-document-mb) is cut into pieces no longer
than the cap, each a document of its own with a stable id (ID#part-1, ID#part-2, ...). A piece ends after the last
paragraph boundary (a blank line) that keeps it within the cap; a paragraph longer than the cap ends after its last
line break, else after its last space, else at the cap itself. The pieces put together are the text, character for
character, and the same text always gives the same pieces.
"""

from __future__ import annotations

from collections.abc import Iterator

PART = "#part-"  # between a document's id and the number of its piece, from 1


def piece_id(doc_id: str, number: int) -> str:
    return f"{doc_id}{PART}{number}"


def text_pieces(text: str, cap: int) -> Iterator[str]:
    """The text in pieces of at most `cap` characters (itself when it is no longer), one at a time."""
    start = 0
    while len(text) - start > cap:
        end = _piece_end(text, start, start + cap)
        yield text[start:end]
        start = end
    yield text[start:]


def _piece_end(text: str, start: int, limit: int) -> int:
    """Where a piece that starts at `start` ends: after the last break within [start, limit) that a piece may end
    at, the larger breaks first."""
    for separator in ("\n\n", "\n", " "):
        found = text.rfind(separator, start, limit)
        if found > start:
            return found + len(separator)
    return limit


def sentence_pieces(sentences: list[str], cap: int) -> Iterator[list[str]]:
    """A document given as sentences (one a line, in the reference's format) in runs of sentences of at most `cap`
    characters in all; a sentence longer than the cap is cut as text is, each part a sentence of its own."""
    run, size = [], 0
    for sentence in sentences:
        for part in text_pieces(sentence, cap):
            if run and size + len(part) > cap:
                yield run
                run, size = [], 0
            run.append(part)
            size += len(part)
    if run:
        yield run
