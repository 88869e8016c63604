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

_CLOSERS = " \t\"'”’)]»」』）》"
_TERMINALS = (".", "!", "?", "…", "。", "！", "？")
_LINE_HEADING = re.compile(rf"(?i:{HEADING_KEYWORD})(?:[ \t]+{HEADING_NUMERAL})?(?:[ \t]+[^.!?]{{0,40}})?")
_LINE_BOILERPLATE = re.compile(
    r"(?i:copyright\b|all rights reserved|smashwords|isbn\b|licensed for your personal enjoyment|"
    r"respecting the hard work of this author|project gutenberg)"
)
_PARAGRAPH_CHARS = 600
_INNER_SENTENCE_BREAK = re.compile(r"[.!?][\"'”’)]*[ \t]+[\"“‘(]*[A-Z]|[。！？][」』”）]*(?=[^\s」』”）])")

# Scripts written without spaces between words (CJK ideographs, kana, CJK and full-width punctuation): a line
# break between two such characters, or next to one, was only the wrap of a line and joins with nothing.
EAST_ASIAN = (
    "\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002fa1f"
)
_HAS_EAST_ASIAN = re.compile(f"[{EAST_ASIAN}]")
_EAST_ASIAN_BREAK = re.compile(f"(?<=[{EAST_ASIAN}])[ \t]*\n[ \t]*|[ \t]*\n[ \t]*(?=[{EAST_ASIAN}])")
# A chapter heading of a Chinese book: 第一回, 第十二章 and the like, or 卷三, with the chapter's title after it.
CJK_HEADING = re.compile(
    r"[ \t\u3000]*(?:第[〇零一二三四五六七八九十百千兩两\d０-９]{1,6}[章回則则節节卷篇部集折齣]"
    r"|卷(?:之)?[〇零一二三四五六七八九十百千\d０-９]{1,4})(?:[ \t\u3000]+[^\n]{0,40})?[ \t\u3000]*"
)
# Punctuation a sentence holds, and a heading does not.
_CJK_SENTENCE_PUNCTUATION = re.compile(r"[，。！？；：、,.!?;:]")


def join_lines(text: str) -> str:
    """Wrapped lines as one: joined with a space, or with nothing where either side of the break is East Asian."""
    if "\n" not in text:
        return text
    if not text.isascii() and _HAS_EAST_ASIAN.search(text):
        text = _EAST_ASIAN_BREAK.sub("", text)
    return text.replace("\n", " ")


def is_cjk_title_line(line: str) -> bool:
    """A short East Asian line without sentence punctuation (弁言, 敘 天空嘯鶴): a heading or a title, not prose."""
    s = line.strip()
    return 0 < len(s) <= 12 and _HAS_EAST_ASIAN.match(s) is not None and not _CJK_SENTENCE_PUNCTUATION.search(s)


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
                paragraphs.append(join_lines("\n".join(current)))
                current, size = [], 0
            continue
        if (i < _EDGE_LINES or i >= back_start) and _LINE_BOILERPLATE.search(line):
            count_removed(removed, "licence_lines", 1)
            continue
        if (_LINE_HEADING.fullmatch(line) or CJK_HEADING.fullmatch(line)) and not _ends_sentence(line):
            count_removed(removed, "heading_lines", 1)
            if current:
                paragraphs.append(join_lines("\n".join(current)))
                current, size = [], 0
            continue
        current.append(line)
        size += len(line) + 1
        if size >= _PARAGRAPH_CHARS:
            paragraphs.append(join_lines("\n".join(current)))
            current, size = [], 0
    if current:
        paragraphs.append(join_lines("\n".join(current)))
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
