"""How the lines of a book relate to its sentences, and the one-sentence-per-line layout of HF bookcorpus.

A book file is hard-wrapped prose, one sentence per line, or one unwrapped paragraph per line; line_layout
tells which from a sample of the text. Sentence lines are regrouped into paragraphs here; book_cleaning.py
handles the other two layouts. Both start from normalise_lines and know chapter headings by the same words.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "HEADING_KEYWORD",
    "HEADING_NUMERAL",
    "count_removed",
    "line_layout",
    "looks_sentence_per_line",
    "normalise_lines",
    "read_hf_bookcorpus_lines",
    "regroup_sentence_lines",
]

_NUM_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    "seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|first|second|third|fourth|fifth|sixth|seventh|"
    "eighth|ninth|tenth|eleventh|twelfth|last|final"
)
HEADING_NUMERAL = rf"(?:[IVXLCDM]+\b|\d{{1,4}}\b|(?i:(?:the[ \t]+)?(?:{_NUM_WORDS})(?:[- ](?:{_NUM_WORDS}))?)\b)"
HEADING_KEYWORD = (
    r"(?i:chapter|book|part|volume|vol|letter|section|canto|stave|act|scene|episode|fytte|epilogue|"
    r"prologue|appendix)\b"
)

_CLOSERS = " \t\"'”’)]»"
_TERMINALS = (".", "!", "?", "…")
_LINE_HEADING = re.compile(rf"(?i:{HEADING_KEYWORD})(?:[ \t]+{HEADING_NUMERAL})?(?:[ \t]+[^.!?]{{0,40}})?")
_LINE_BOILERPLATE = re.compile(
    r"(?i:copyright\b|all rights reserved|smashwords|isbn\b|licensed for your personal enjoyment|"
    r"respecting the hard work of this author|project gutenberg)"
)
_PARAGRAPH_CHARS = 600
_INNER_SENTENCE_BREAK = re.compile(r"[.!?][\"'”’)]*[ \t]+[\"“‘(]*[A-Z]")
_EDGE_LINES = 60


def normalise_lines(text: str) -> str:
    """LF line endings, NFC, no tabs, BOMs or no-break spaces, so later patterns see one spelling."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    if "\t" in text:
        text = text.expandtabs(4)
    if "\ufeff" in text:
        text = text.replace("\ufeff", "")
    if "\u00a0" in text:
        text = text.replace("\u00a0", " ")
    if " \n" in text:
        text = "\n".join(map(str.rstrip, text.split("\n")))
    return text


def count_removed(removed: dict[str, int], kind: str, lines: int) -> None:
    removed[kind] = removed.get(kind, 0) + lines


def _ends_sentence(line: str) -> bool:
    return line.rstrip(_CLOSERS)[-1:] in _TERMINALS


def line_layout(text: str, sample_chars: int = 200_000) -> str:
    """How lines relate to sentences: "wrapped" prose, one "sentences" per line, or one "paragraphs" per line.

    In hard-wrapped prose most line breaks fall inside a sentence. When nearly every line that has a
    successor ends a sentence, lines are sentences (HF bookcorpus) unless many of them hold several
    sentences, which makes them unwrapped paragraphs. Lines followed by a blank line do not count, and
    the sample comes from the middle of the file, away from title pages and tables of contents.
    """
    start = max(0, len(text) // 2 - sample_chars // 2)
    lines = text[start : start + sample_chars].split("\n")[1:-1] if start else text[:sample_chars].split("\n")
    inner = ends = several = 0
    for line, nxt in zip(lines, lines[1:]):
        if line and nxt and not line.isspace() and not nxt.isspace():
            inner += 1
            if _ends_sentence(line):
                ends += 1
                several += _INNER_SENTENCE_BREAK.search(line) is not None
    if inner < 20 or ends < 0.75 * inner:
        return "wrapped"
    return "paragraphs" if several > 0.3 * ends else "sentences"


def looks_sentence_per_line(text: str) -> bool:
    """True for files that hold one sentence per line with no hard wrapping (the HF bookcorpus layout)."""
    return line_layout(text) == "sentences"


def regroup_sentence_lines(text: str, removed: dict[str, int]) -> str:
    """Join sentence lines into paragraphs of about _PARAGRAPH_CHARS, dropping heading lines and, near
    either end of the file, licence lines."""
    paragraphs: list[str] = []
    current: list[str] = []
    size = 0
    all_lines = text.split("\n")
    back_start = len(all_lines) - _EDGE_LINES
    for i, raw_line in enumerate(all_lines):
        line = raw_line.strip()
        if not line:
            if current:
                paragraphs.append(" ".join(current))
                current, size = [], 0
            continue
        if (i < _EDGE_LINES or i >= back_start) and _LINE_BOILERPLATE.search(line):
            count_removed(removed, "licence_lines", 1)
            continue
        if _LINE_HEADING.fullmatch(line) and not _ends_sentence(line):
            count_removed(removed, "heading_lines", 1)
            if current:
                paragraphs.append(" ".join(current))
                current, size = [], 0
            continue
        current.append(line)
        size += len(line) + 1
        if size >= _PARAGRAPH_CHARS:
            paragraphs.append(" ".join(current))
            current, size = [], 0
    if current:
        paragraphs.append(" ".join(current))
    return "\n\n".join(paragraphs)


def read_hf_bookcorpus_lines(text: str) -> str:
    """Rebuild paragraphs from an HF bookcorpus file (one sentence per line, the file is one book).

    Lines are kept whole and in order, joined with spaces into paragraphs of about 600 characters; blank
    lines and heading lines ("chapter 3") end a paragraph. Text in any other layout is returned unchanged.
    """
    text = normalise_lines(text)
    if not looks_sentence_per_line(text):
        return text
    return regroup_sentence_lines(text, {})
