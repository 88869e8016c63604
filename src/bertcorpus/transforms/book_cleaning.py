"""Decoded book text to running paragraphs: licence, front matter, contents, headings and markup removed.

Everything works on whole strings with compiled regular expressions; Python-level loops run per paragraph
block, never per character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bertcorpus.transforms.book_lines import (
    CJK_HEADING,
    HEADING_KEYWORD,
    HEADING_NUMERAL,
    count_removed,
    is_cjk_title_line,
    join_lines,
    line_layout,
    normalise_lines,
    regroup_sentence_lines,
)

__all__ = ["CleanBook", "clean_book"]


@dataclass(frozen=True, slots=True)
class CleanBook:
    """Running text (paragraphs separated by one blank line), the title from a PG header, and line counts
    of what was dropped, by kind, so that the job can report where the bytes went."""

    text: str
    title: str | None
    removed: dict[str, int] = field(default_factory=dict)


# Every PG marker and licence notice contains one of these substrings. They are located with str.find,
# which costs far less than a case-insensitive regex over a whole book; only the lines and paragraphs
# around the hits are examined, with the patterns below.
_LICENCE_TOKENS = (
    "utenberg",
    "UTENBERG",
    "SMALL PRINT",
    "roofread",
    "pgdp",
    "mashwords",
    "MASHWORDS",
    "personal enjoyment",
    "hard work of this author",
)
_LICENCE_CONTEXT = re.compile(
    r"project\s+gutenberg|gutenberg\.(?:org|net)|gutenberg(?:-tm|™)|small print|pgdp\.net|"
    r"distributed\s+proofread|smashwords|licensed\s+for\s+your\s+personal\s+enjoyment|"
    r"respecting\s+the\s+hard\s+work\s+of\s+this\s+author",
    re.I,
)
_CONTEXT_CHARS = 40
_MAX_LICENCE_PARAGRAPH = 3000
# Header end: the START marker, or the end of the 1990s "small print" block.
_PG_START_LINE = re.compile(
    r"[ \t]*\*\*\*[ \t]*start of (?:the|this)[ \t]+project gutenberg|.*\*end\*[ \t]*the small print"
)
# Footer start: the END marker, an "End of (the) Project Gutenberg ..." line, or small print at the end.
_PG_END_LINE = re.compile(
    r"[ \t]*(?:\*\*\*[ \t]*)?end of (?:the |this )?project gutenberg"
    r"|[ \t]*\*\*\*[ \t]*start\*\*[ \t]*the small print"
)
_TITLE = re.compile(r"^Title:[ \t]*(\S[^\n]*(?:\n[ \t]+\S[^\n]*)*)", re.M)
_PG_EBOOK_OF = re.compile(r"Project Gutenberg'?s? E-?(?:Book|Text) of ([^\n]+?)(?:, by [^\n]*)?$", re.I | re.M)

# An illustration marker with its caption, which may hold one level of nested brackets
# ("[Illustration: Caption [Copyright 1894]]"). Possessive repeats keep unclosed markers linear.
_ILLUSTRATION = re.compile(
    r"\[(?:Illustration|ILLUSTRATION|illustration|Frontispiece|FRONTISPIECE|Decoration|Picture)\b"
    r"(?:[^\[\]]++|\[[^\[\]]*+\])*+\]"
)
_MAX_ILLUSTRATION_CHARS = 3000
# A line of three or more separator symbols. Matched with its leading newline (a literal prefix the regex
# engine can jump to) on text that starts with one.
_SEPARATOR = re.compile(r"\n[ \t]*(?:[*\-_~=#.•·+—–─━═][ \t]*){3,}(?=\n)")
# PG marks emphasis as _word_ (and abbreviations as 7_s_. 6_d_.): drop every lone underscore, keep runs of
# them (blanks such as "Mr. ____"). Starts with the literal "_" so the regex engine skips ahead to candidates.
_ITALIC_UNDERSCORE = re.compile(r"_(?<!__)(?!_)")
# A break right after a hyphen or em dash closes up ("button-\nlike" -> "button-like").
_DASH_BREAK = re.compile("\n(?<=\\S[-\u2014]\n)[ \t]*(?=\\S)")
_SPACE_RUN = re.compile("   *")
_FULL_WIDTH_INDENT = re.compile("\n(?=\u3000)")
# A line of East Asian text that ends a sentence (with its closing quotes), followed by a line that does not go on
# closing them: where it is short of the wrap width, the paragraph ended there.
_EAST_ASIAN_PARAGRAPH_END = re.compile("(?m)^[^\n]*[。！？][」』”’）]*$(?=\n[^」』”’）\n])")

# "CHAPTER", "CHAPTER I.", "Chapter 1: The Start", "CHAPTER 1. Loomings.", "BOOK THE FIRST",
# "PART II THE RETURN", "Letter 4". A title after the numeral needs punctuation or capitals, so that
# prose such as "Part one of the plan" is not taken for a heading.
_KW_HEADING = re.compile(
    rf"[ \t]*{HEADING_KEYWORD}(?:\.|[ \t]*:)?"
    rf"(?:[ \t]+{HEADING_NUMERAL}(?:[ \t]*[.:\u2014\u2013-]+[ \t]*[^\n]*|[ \t]+[^a-z\n]*|[ \t]*))?[ \t]*"
)
_KEYWORD_START = re.compile(rf"[ \t]*{HEADING_KEYWORD}")
_NUMBER_HEADING = re.compile(r"[ \t]*(?:[IVXLCDM]+|\d{1,4})\.?[ \t]*")
_ROMAN_TITLE = re.compile(r"[ \t]*[IVXLCDM]+\.[ \t]+(\S[^\n]{0,80})")
_CONTENTS_HEADING = re.compile(
    r"[ \t]*(?i:(?:table of )?contents?|list of (?:illustrations|plates)|illustrations|page)[.:]?[ \t]*"
)
_TOC_ENTRY = re.compile(
    rf"[ \t]*(?:{HEADING_KEYWORD}\.?[ \t]+{HEADING_NUMERAL}"
    rf"|[IVXLCDM]+(?:\.|[ \t]{{2,}}|$)|\d{{1,3}}(?:\.|[ \t]{{2,}}|$))"
)
_PAGE_END_CHARS = frozenset("0123456789ivxlcdm")
_PAGE_REF = re.compile(r"\S(?: {3,}|[ \t]*\.{5,}[ \t]*)(?:\d{1,4}|[ivxlcdm]{1,7})$")
_WORD = re.compile(r"\w+")
_LETTER_PAIR = re.compile(r"[^\W\d_]{2}")
_DOUBLE_QUOTES = frozenset('"“”«»„')
_BYLINE = re.compile(r"[ \t]*(?i:by)[ \t]+[A-Z][^.!?\n]{0,60}\.?")
_CENTRED = " " * 10
_ART_HINT = re.compile(r"[|\\/+=#@~^<>{}]")

_CREDIT = re.compile(
    r"[ \t]*(?:Produced by|Prepared by|E-?text (?:was )?(?:prepared|produced) by|This e-?(?:text|book) was "
    r"(?:produced|prepared|created|made) (?:by|from)|Transcribed (?:from|by)|Scanned (?:and proofed )?by|"
    r"Proofread by|HTML version by|(?:Original )?Transcriber[’']?s? Notes?\b)",
    re.I,
)
# Front matter of shop ebooks, and PG header fields left behind when the START marker is missing.
_FRONT_BOILERPLATE = re.compile(
    r"[ \t]*(?:Copyright\b|©|\(c\) ?\d|All rights reserved|ISBN\b|License Notes|Cover (?:art|design|image)\b|"
    r"This (?:book|e-?book|novel|story) is (?:a work of fiction|licensed)|This is a work of fiction|"
    r"(?:Title|Author|Release Date|Posting Date|Last Updated|Language|Character set encoding|Credits|"
    r"Most recently updated|Translator|Illustrator|Editor):)",
    re.I,
)
_FRONT_BLOCKS = 40
_BACK_BLOCKS = 15
_TOC_MAX_LINES = 400
_MAX_HEADING_CHARS = 4 * 82
_WRAP_MARGIN = 3
_RAGGED_SHARE = 0.8


def _header_title(header: str) -> str | None:
    """The "Title:" field of a PG header, else the title in its "Project Gutenberg eBook of ..." line."""
    match = _TITLE.search(header) or _PG_EBOOK_OF.search(header)
    title = " ".join(match.group(1).split()) if match else ""
    return title or None


def _licence_hits(text: str) -> list[int]:
    """Offsets of licence phrases (the start of the matched phrase), in order."""
    hits = set()
    for token in _LICENCE_TOKENS:
        at = text.find(token)
        while at >= 0:
            window_start = max(0, at - _CONTEXT_CHARS)
            match = _LICENCE_CONTEXT.search(text, window_start, at + _CONTEXT_CHARS)
            if match:
                hits.add(match.start())
            at = text.find(token, at + len(token))
    return sorted(hits)


def _line_at(text: str, pos: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, text[start : end if end >= 0 else len(text)]


def _strip_licence(text: str, removed: dict[str, int]) -> tuple[str, str | None]:
    """Cut the PG header (through the START marker) and footer (from the END line), then every
    paragraph that still carries a licence notice; return the title found in the header."""
    hits = _licence_hits(text)
    if not hits:
        return text, None
    begin, end = 0, len(text)
    for pos in hits:
        line_start, line = _line_at(text, pos)
        if _PG_START_LINE.match(line.lower()):
            begin = line_start + len(line)
            if line.lstrip().startswith("***") and line.count("***") < 2:
                # Marker wrapped onto a second line: "*** START OF THIS ... EBOOK THE LONG\nTITLE ***".
                _, following = _line_at(text, begin + 1)
                if len(following) < 120 and following.rstrip().endswith("***"):
                    begin += 1 + len(following)
            break
    title = _header_title(text[:begin]) if begin else None
    for pos in hits:
        if pos >= begin:
            line_start, line = _line_at(text, pos)
            if _PG_END_LINE.match(line.lower()):
                end = line_start
                break
    if begin:
        count_removed(removed, "licence_lines", text.count("\n", 0, begin) + 1)
    if end < len(text):
        count_removed(removed, "licence_lines", text.count("\n", end) + 1)

    # Paragraphs of the body that mention the licence or the producers.
    pieces: list[str] = []
    cursor = begin
    for pos in hits:
        if pos < cursor or pos >= end:
            continue
        para_start = max(text.rfind("\n\n", 0, pos) + 2, cursor)
        para_end = text.find("\n\n", pos)
        para_end = end if para_end < 0 else min(para_end, end)
        if para_end - para_start > _MAX_LICENCE_PARAGRAPH:
            # No blank lines around (a sentence-per-line file): drop just the line.
            para_start = max(text.rfind("\n", 0, pos) + 1, cursor)
            para_end = text.find("\n", pos)
            para_end = end if para_end < 0 else min(para_end, end)
        pieces.append(text[cursor:para_start])
        paragraph = text[para_start:para_end].strip("\n")
        kind = "credit_lines" if _CREDIT.match(paragraph) else "licence_lines"
        count_removed(removed, kind, paragraph.count("\n") + 1)
        cursor = para_end
    pieces.append(text[cursor:end])
    return "".join(pieces), title


def _drop_illustrations(text: str, removed: dict[str, int]) -> str:
    """Delete illustration markers (an unclosed one could span pages: those are left) and count their lines."""
    lines = 0

    def _drop(match: re.Match[str]) -> str:
        nonlocal lines
        found = match.group()
        if len(found) > _MAX_ILLUSTRATION_CHARS:
            return found
        lines += found.count("\n") + 1
        return ""

    text = _ILLUSTRATION.sub(_drop, text)
    if lines:
        count_removed(removed, "illustration_lines", lines)
    return text


def _is_caps_heading_line(line: str) -> bool:
    """A short line in capitals with a word of two letters or more ("R. W." is a signature), and not a
    shout: it does not open with a double quote or end with ! ? , ; or a dash."""
    s = line.strip()
    return (
        2 <= len(s) <= 60
        and s.upper() == s
        and _LETTER_PAIR.search(s) is not None
        and s[0] not in _DOUBLE_QUOTES
        and s[-1] not in ",;!?\u2014-"
    )


def _is_title_line(line: str) -> bool:
    """Title case or capitals: at least half the words start with a capital ("Down the Rabbit-Hole")."""
    words = line.split()
    capitals = sum(1 for word in words if word.lstrip("\"“‘'(")[:1].isupper())
    return bool(words) and capitals * 2 >= len(words)


def _is_heading(lines: list[str]) -> bool:
    """A block of at most four lines that is a chapter/part heading, with any title lines under it."""
    first = lines[0]
    if CJK_HEADING.fullmatch(first):
        return all(is_cjk_title_line(line) for line in lines[1:])
    lead = first.lstrip()[:1]
    if not (lead.isupper() or lead.isdigit()):
        return False
    if _KW_HEADING.fullmatch(first):
        return all(len(line) <= 80 and _is_title_line(line) for line in lines[1:])
    if len(lines) == 1:
        if _NUMBER_HEADING.fullmatch(first):
            return True
        match = _ROMAN_TITLE.fullmatch(first)
        if match:
            title = match.group(1).rstrip()
            return title.upper() == title or title[-1] not in ".!?,;"
    return len(lines) <= 3 and all(_is_caps_heading_line(line) for line in lines)


def _toc_key(line: str) -> str:
    """What a TOC entry and the heading it points to share: "CHAPTER I. Loomings" and "CHAPTER I." give
    "chapter i", "I. A Scandal in Bohemia" and "I. A SCANDAL IN BOHEMIA" give "i"."""
    words = _WORD.findall(line.casefold())
    if _TOC_ENTRY.match(line):
        return " ".join(words[:2]) if _KEYWORD_START.match(line) else " ".join(words[:1])
    return " ".join(words)


def _is_toc_line(line: str) -> bool:
    s = line.strip()
    if not s:
        return True
    if _TOC_ENTRY.match(s):
        return len(s) <= 300
    if _PAGE_REF.search(s):
        return len(s) <= 120
    # Short lines without a trailing comma; one that opens with a quote must not close like dialogue.
    return len(s) <= 60 and s[-1] not in ",;:" and (s[0] not in "\"“‘'(" or s[-1].isalnum())


def _is_art(block: str) -> bool:
    """Fewer letters than other visible characters: ASCII art, tables of figures, decorations."""
    visible = len(block) - block.count(" ") - block.count("\n")
    return visible >= 3 and sum(map(str.isalpha, block)) < 0.5 * visible


def _is_title_page(block: str, lines: list[str]) -> bool:
    """Title-page matter before the first prose: a byline, or centred lines of a few words each.

    Centred verse (an epigraph) has longer lines and is kept.
    """
    if len(lines) == 1:
        return _BYLINE.fullmatch(block) is not None
    if any(line and not line.startswith(_CENTRED) for line in lines):
        return False
    return len(block.split()) < 3.5 * len(lines)


def _wrap_width(blocks: list[str]) -> int:
    """Typical line width of the file: the 90th percentile of line lengths over a sample of blocks."""
    step = max(1, len(blocks) // 400)
    lengths = sorted(len(line) for block in blocks[::step] for line in block.split("\n") if line)
    if not lengths:
        return 72
    return max(lengths[int(0.9 * (len(lengths) - 1))], 20)


def _is_verse(lines: list[str], width: int) -> bool:
    """Most line breaks come early: the next line's first word would still have fitted.

    Greedy wrapping never leaves room for the next word, so such breaks were put there on purpose
    (verse, addresses, lists) and are kept. Hand-wrapped prose is ragged, so a break only counts as
    early well inside the width; a block indented as a whole (a quoted poem) is held to nearly the full width.
    """
    if all(line.startswith("  ") for line in lines):
        limit = width - _WRAP_MARGIN
    else:
        limit = _RAGGED_SHARE * width
    early = 0
    for line, nxt in zip(lines, lines[1:]):
        nxt = nxt.lstrip()
        word = nxt.find(" ")
        if len(line) + 1 + (word if word >= 0 else len(nxt)) < limit:
            early += 1
    return early * 2 > len(lines) - 1


def _join_prose(block: str, width: int = 0) -> str:
    """Hard-wrapped lines rejoined into one paragraph; an East Asian block (whose paragraphs are often not set
    apart by blank lines) into one per paragraph: at a full-width indent, or after a short line ending a sentence."""
    if "\n\u3000" in block:  # East Asian books indent each paragraph with full-width spaces
        return "\n\n".join(_join_prose(p.strip(), width) for p in _FULL_WIDTH_INDENT.split(block) if p.strip())
    if width and ("。" in block or "！" in block or "？" in block):  # a line can end a paragraph only after one
        ends = [m.end() for m in _EAST_ASIAN_PARAGRAPH_END.finditer(block) if m.end() - m.start() < width - 2]
        if ends:
            bounds = [0, *ends, len(block)]
            parts = [block[a:b].strip("\n") for a, b in zip(bounds, bounds[1:])]
            return "\n\n".join(_join_prose(p) for p in parts if p.strip())
    if "-\n" in block or "\u2014\n" in block:
        block = _DASH_BREAK.sub("", block)
    text = join_lines(block)
    return _SPACE_RUN.sub(" ", text) if "  " in text else text


def _join_verse(lines: list[str]) -> str:
    text = "\n".join(line.strip() for line in lines)
    return _SPACE_RUN.sub(" ", text) if "  " in text else text


def _clean_blocks(blocks: list[str], removed: dict[str, int]) -> list[str]:
    """Classify each blank-line-separated block and rebuild paragraphs from the ones that are text."""
    width = _wrap_width(blocks)
    glued_limit = 0.75 * width
    prose_min_line = _RAGGED_SHARE * width - 2  # no next word is shorter than one character
    back_start = len(blocks) - _BACK_BLOCKS
    out: list[str] = []
    toc_lines = 0
    toc_key: str | None = None
    in_toc = after_heading = seen_prose = False
    for i, block in enumerate(blocks):
        block = block.strip("\n")
        if not block or block.isspace():
            continue
        lines = block.split("\n")
        n_lines = len(lines)

        if i < _FRONT_BLOCKS or i >= back_start:
            head = block[:200]
            if _CREDIT.match(head):
                count_removed(removed, "credit_lines", n_lines)
                continue
            if i < _FRONT_BLOCKS and _FRONT_BOILERPLATE.match(head):
                count_removed(removed, "licence_lines", n_lines)
                continue
            if not seen_prose and i < _FRONT_BLOCKS and _is_title_page(block, lines):
                count_removed(removed, "title_page_lines", n_lines)
                continue

        if in_toc:
            if toc_key is not None and n_lines <= 4 and _toc_key(lines[0]) == toc_key:
                in_toc = False  # the body starts with the heading the TOC listed first
            elif toc_lines < _TOC_MAX_LINES and all(map(_is_toc_line, lines)):
                if toc_key is None:
                    toc_key = _toc_key(lines[0])
                toc_lines += n_lines
                count_removed(removed, "toc_lines", n_lines)
                continue
            else:
                in_toc = False
        if n_lines == 1 and _CONTENTS_HEADING.fullmatch(block):
            in_toc, toc_key, toc_lines = True, None, 0
            count_removed(removed, "toc_lines", 1)
            continue

        if n_lines <= 4 and len(block) <= _MAX_HEADING_CHARS and _is_heading(lines):
            count_removed(removed, "heading_lines", n_lines)
            after_heading = True
            continue
        if after_heading and n_lines == 1:
            s = block.strip()
            after_heading = False
            if len(s) <= 60 and s[-1].isalnum() and "," not in s and ";" not in s and _is_title_line(s):
                count_removed(removed, "heading_lines", 1)  # chapter title on its own line under the heading
                continue
        after_heading = False
        if n_lines == 1 and block[-1] in _PAGE_END_CHARS and _PAGE_REF.search(block):
            count_removed(removed, "toc_lines", 1)
            continue
        if _ART_HINT.search(block) and _is_art(block):
            count_removed(removed, "art_lines", n_lines)
            continue

        # A heading glued to its first paragraph, possibly with title lines under it: in capitals, or East Asian
        # (第一則 介之推火封妒婦, 弁言).
        title_line = None
        if n_lines > 1 and len(lines[0]) < glued_limit and _KW_HEADING.fullmatch(lines[0]):
            title_line = _is_caps_heading_line
        elif n_lines > 1 and (CJK_HEADING.fullmatch(lines[0]) or is_cjk_title_line(lines[0])):
            title_line = is_cjk_title_line
        if title_line is not None:
            drop = 1
            while drop < n_lines - 1 and title_line(lines[drop]):
                drop += 1
            count_removed(removed, "heading_lines", drop)
            lines = lines[drop:]
            n_lines = len(lines)
            block = "\n".join(lines)

        if n_lines == 1:
            para = block.strip()
            if "  " in para:
                para = _SPACE_RUN.sub(" ", para)
            seen_prose = seen_prose or len(para) >= 100
        elif (min(map(len, lines[:-1])) >= prose_min_line and not lines[0].startswith("  ")) or not _is_verse(
            lines, width
        ):
            para = _join_prose(block.strip(), width)
            seen_prose = True
        else:
            para = _join_verse(lines)
        out.append(para)
    return out


def clean_book(text: str) -> CleanBook:
    """Turn decoded book text into running paragraphs, dropping everything that is not the book's text.

    Removed: the Project Gutenberg header/footer and licence paragraphs, "Produced by" credits, ebook-shop
    licence notes, tables of contents, chapter/part headings, separator lines, ASCII art and illustration
    markers. Hard-wrapped prose is rejoined to one line per paragraph; verse stanzas keep their line breaks
    (one stanza per paragraph), because joining them would glue lines into run-on sentences. Files with
    one sentence per line (the HF bookcorpus layout) are regrouped instead of rejoined, and files with one
    unwrapped paragraph per line keep each line as a paragraph.
    """
    removed: dict[str, int] = {}
    text, title = _strip_licence(normalise_lines(text), removed)
    layout = line_layout(text)
    if layout == "sentences":
        return CleanBook(regroup_sentence_lines(text, removed), title, removed)
    if layout == "paragraphs":
        text = text.replace("\n", "\n\n")
    if "[" in text:
        text = _drop_illustrations(text, removed)
    text, separators = _SEPARATOR.subn("\n", "\n" + text + "\n")
    text = text[1:-1]
    if separators:
        count_removed(removed, "separator_lines", separators)
    if "_" in text:
        text = _ITALIC_UNDERSCORE.sub("", text)
    if " \n" in text:
        text = "\n".join(map(str.rstrip, text.split("\n")))
    paragraphs = _clean_blocks(text.split("\n\n"), removed)
    return CleanBook("\n\n".join(paragraphs), title, removed)
