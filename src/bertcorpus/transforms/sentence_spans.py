"""Where each sentence of a document stands in its text, and the pieces of text a tokenizer.json encodes.

document_sentences gives each sentence with its whitespace made single spaces; a tokenizer that marks a word's
leading space (byte-level BPE's Ġ, SentencePiece's ▁) must see the text as it stands instead. Each sentence keeps
its characters in order, so the n-th character of the sentences that is no whitespace is the n-th such character
of the text: that alone places every sentence.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from bertcorpus.transforms.sentences import document_sentences


@functools.cache
def _whitespace() -> np.ndarray:
    """Per code point, whether str.split takes it for whitespace."""
    flags = np.zeros(sys.maxunicode + 1, bool)
    flags[[c for c in range(0x3001) if chr(c).isspace()]] = True  # no whitespace lies beyond U+3000
    return flags


def sentence_spans(text: str, sentences: list[str] | None = None) -> list[tuple[int, int]] | None:
    """(start, end) in `text` of each sentence of document_sentences(text) (or of `sentences`, so split), from its
    first character to its last; None where the sentences are not the text's (no whitespace-only difference)."""
    sentences = document_sentences(text) if sentences is None else sentences
    code_points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    visible = np.flatnonzero(~_whitespace()[code_points])  # where each character that is no whitespace stands
    counts = np.fromiter((len(s) - s.count(" ") for s in sentences), np.int64, len(sentences))
    if int(counts.sum()) != len(visible) or (counts <= 0).any():
        return None
    last = np.cumsum(counts) - 1
    return list(zip(visible[last - counts + 1].tolist(), (visible[last] + 1).tolist()))


def text_pieces(text: str) -> tuple[list[str], list[int]]:
    """The document's sentences as a tokenizer.json should see them: each with the whitespace that stands before it
    in the text (a space, or a paragraph's blank line), the first without; and where each piece starts."""
    sentences = document_sentences(text)
    if not sentences:  # no text but whitespace
        return [], []
    spans = sentence_spans(text, sentences)
    if spans is None:  # not expected: the sentences as document_sentences gives them, a space between
        return joined_pieces(sentences), []
    starts = [spans[0][0], *(end for _, end in spans[:-1])]
    return [text[start:end] for start, (_, end) in zip(starts, spans)], starts


def joined_pieces(sentences: list[str]) -> list[str]:
    """Sentences given apart (one a line, as the reference's text format has them) as running text: a space before
    each but the first."""
    return [s if i == 0 else " " + s for i, s in enumerate(sentences)]
