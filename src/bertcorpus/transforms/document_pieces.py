"""A document too long for a worker's unit of memory, cut into pieces at paragraph boundaries.

create holds a bucket of documents, and every instance made from them, in one worker's memory, and dedup a
document's folded text, word hashes and shingles: a 44 MB document multiplied create's peak memory by four, and a
200 MB one took dedup to 4.7 GB. So a document longer than a cap (--max-document-mb) is cut into pieces no longer
than the cap, each a document of its own with a stable id (ID#part-1, ID#part-2, ...). A piece ends after the last
paragraph boundary (a blank line) that keeps it within the cap; a paragraph longer than the cap ends after its last
line break, else after its last space, else at the cap itself. The pieces put together are the text, character for
character, and the same text always gives the same pieces.

The readers cut a document as they read it, so that none is ever held whole: the text comes in chunks (a long line
a part at a time, a document of many lines a line at a time), and no more than two pieces' worth is held, whatever
the chunks. The pieces are the same as those of the text read whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

PART = "#part-"  # between a document's id and the number of its piece, from 1
Piece = TypeVar("Piece")


def piece_id(doc_id: str, number: int) -> str:
    return f"{doc_id}{PART}{number}"


def text_pieces(text: str, cap: int) -> Iterator[str]:
    """The text in pieces of at most `cap` characters (itself when it is no longer), one at a time."""
    return streamed_text_pieces([text], cap)


def streamed_text_pieces(chunks: Iterable[str], cap: int) -> Iterator[str]:
    """text_pieces of the text that the chunks make up, read a chunk at a time: a piece is cut as soon as more
    than `cap` characters are held, which is where text_pieces cuts it too (it looks at the next cap characters
    only)."""
    held, size = [], 0
    for chunk in chunks:
        held.append(chunk)
        size += len(chunk)
        if size <= cap:
            continue
        text, start = "".join(held), 0
        while len(text) - start > cap:
            end = _piece_end(text, start, start + cap)
            yield text[start:end]
            start = end
        held, size = [text[start:]], len(text) - start
    yield "".join(held)


def _piece_end(text: str, start: int, limit: int) -> int:
    """Where a piece that starts at `start` ends: after the last break within [start, limit) that a piece may end
    at, the larger breaks first."""
    for separator in ("\n\n", "\n", " "):
        found = text.rfind(separator, start, limit)
        if found > start:
            return found + len(separator)
    return limit


def sentence_pieces(sentences: Iterable[str | Iterable[str]], cap: int) -> Iterator[list[str]]:
    """A document given as sentences (one a line, in the reference's format) in runs of sentences of at most `cap`
    characters in all; a sentence longer than the cap is cut as text is, each part a sentence of its own. A
    sentence is a str, or the chunks of one too long to hold (a line read a part at a time)."""
    run, size = [], 0
    for sentence in sentences:
        for part in streamed_text_pieces([sentence] if isinstance(sentence, str) else sentence, cap):
            if run and size + len(part) > cap:
                yield run
                run, size = [], 0
            run.append(part)
            size += len(part)
    if run:
        yield run


def numbered_pieces(pieces: Iterator[Piece]) -> Iterator[tuple[int, Piece]]:
    """(0, the document) where `pieces` (of text_pieces or sentence_pieces) holds just one, which is the document
    whole; else (1, the first piece), (2, the second), ...: the numbers of their ids. The pieces are taken one
    ahead, so that two at most are held."""
    first = next(pieces, None)
    if first is None:
        return
    second = next(pieces, None)
    if second is None:
        yield 0, first
        return
    yield 1, first
    yield 2, second
    yield from enumerate(pieces, 3)
