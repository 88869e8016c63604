"""English sentence splitting: paragraphs of plain text → sentences.

A rule-based splitter built from a few compiled regular expressions, so it is fast in CPython (docs/benchmarks.md)
and needs no model or data download. A sentence ends at `.`, `!`, `?` or `…` (optionally followed by closing quotes or
brackets) that is followed by whitespace and then something that can start a sentence: an upper-case letter, a
digit, an opening quote or bracket, or a lower-case word with an inner capital ("iPhone"). A full stop is not an
end when the token before it is a known abbreviation or an initial; docs/sentence_splitting.md gives the measured
quality and speed, and tests/data/sentences/ is the hand-checked gold standard every rule here was scored on.
"""

from __future__ import annotations

import re

# Abbreviations that never end a sentence in running prose: titles and suffixes of names, circa, Latin connectives.
_NEVER_FINAL = frozenset(
    [
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "rev",
        "gen",
        "maj",
        "brig",
        "bvt",
        "col",
        "lt",
        "sgt",
        "capt",
        "cmdr",
        "adm",
        "gov",
        "sen",
        "rep",
        "pres",
        "hon",
        "messrs",
        "mme",
        "mlle",
        "ca",
        "e.g",
        "i.e",
        "cf",
        "vs",
    ]
)
# Abbreviations that only stand before a number ("No. 5", "pp. 12", "Vol. II,"); before a word they are words
# ("Oh no.", "a work of art.") or end the sentence.
_BEFORE_NUMBER = frozenset(
    [
        "no",
        "nos",
        "pp",
        "vol",
        "vols",
        "fig",
        "figs",
        "eq",
        "ch",
        "sec",
        "art",
        "op",
        "approx",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
    ]
)
# Abbreviations that often end a sentence ("... in the U.S. The ..."): a full stop after them ends the sentence
# only when a common sentence-opening word follows. Dotted letter groups (U.S., J.J., a.m.) are treated alike.
_MAYBE_FINAL = frozenset(
    ["al", "inc", "ltd", "co", "corp", "bros", "ed", "eds", "trans", "dept", "univ", "assn", "est", "ph.d"]
)

# Candidate boundary: terminal punctuation, optional closers, whitespace, then a plausible sentence start. A match
# may only begin at the first mark of a run, which keeps long runs of dots linear instead of quadratic.
_BOUNDARY = re.compile(
    r"""([.!?\u2026](?<![.!?\u2026]{2})[.!?\u2026]*)(["'\u201d\u2019)\]]*)(\s+)
    (?=["'\u201c\u2018(\[]*(?:[^\W_a-z]|[a-z]+[A-Z]))""",
    re.X,
)
# The token just before a full stop, without the opening quotes or brackets attached to it. Whitespace, dashes and
# slashes separate tokens ("Sept.–Nov.", "you,--Mr."), apostrophes do not, so "Grantley’s", "isn't" and "°C" stay
# whole instead of ending in a lone letter that would pass for an initial.
_LAST_TOKEN = re.compile(
    r"""(?:^|[\s\-\u2013\u2014/])["'\u201c\u2018(\[]*
    ([^\s"'\u201c\u2018(\[\-\u2013\u2014/][^\s\-\u2013\u2014/]*)$""",
    re.X,
)
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_NUMBER_NEXT = re.compile(r"\d|[IVXLC]+[,.;:)]")
# The most frequent sentence openers of the books and articles in docs/sentence_splitting.md, less names, titles and
# "I": after an initial or an ambiguous abbreviation, one of them shows that the full stop ends the sentence
# ("... boils at 87.3 K. About 700,000 tonnes ...", "... made by Warner Bros. It also starred ...").
_OPENER = re.compile(
    r"""["'\u201c\u2018(\[]*(?:
    The|In|It|He|But|She|You|This|A|And|There|They|As|What|For|When|On|If|No|Oh|At|That|We|His|My|After|Then|
    How|However|Yes|Some|Now|So|Well|These|To|One|By|With|Why|Her|All|An|During|Do|While|From|Not|Although|
    According|Of|Many|Most|Here|Let|Other|Your|Their|Its|Yet|Come|Since|Because|Ah|Who|Is|Another|Though|Where|
    Such|Perhaps|Thus|Even|Two|Both|Very|Nor|See|Only|Did|Nothing|About|Look|Just|Besides|Indeed
    )\b(?!\.)""",
    re.X,
)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, with soft line breaks inside a block turned into spaces."""
    paragraphs = (" ".join(p.split()) for p in _PARAGRAPH_BREAK.split(text))
    return [p for p in paragraphs if p]


def _is_false_stop(paragraph: str, stop_at: int, next_at: int) -> bool:
    """True when the full stop at `stop_at` ends an abbreviation or an initial rather than a sentence;
    `next_at` is where the following token starts."""
    m = _LAST_TOKEN.search(paragraph, max(0, stop_at - 24), stop_at)
    if m is None:
        return False
    token = m.group(1)
    if len(token) == 1 and token.isalpha():
        # An initial or a one-letter abbreviation ("J. R. R. Tolkien", "p. 7", "Brown v. Board") unless a sentence
        # opener follows ("... the symbol Z. The ..."). "I" is the pronoun ("said I.") unless it follows a
        # capitalised word ("Samuel I. Hayakawa", "BOOK I. (Folio)").
        before = m.start(1) - 2  # inside the previous token
        if token == "I" and before >= 0 and not paragraph[paragraph.rfind(" ", 0, before) + 1].isupper():
            return False
        return _OPENER.match(paragraph, next_at) is None
    key = token.lower()
    if key in _NEVER_FINAL:
        return True
    if key in _BEFORE_NUMBER:
        return _NUMBER_NEXT.match(paragraph, next_at) is not None
    if key in _MAYBE_FINAL or _DOTTED.fullmatch(token):
        return _OPENER.match(paragraph, next_at) is None
    return False


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph, in order, with each run of whitespace turned into one space, so that
    " ".join(sentences) == " ".join(paragraph.split())."""
    return _split_line(" ".join(paragraph.split()))


def _split_line(line: str) -> list[str]:
    """split_sentences of a paragraph that is already one line with single spaces, as split_paragraphs returns."""
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(line):
        if m.group(1) == "." and _is_false_stop(line, m.start(1), m.end()):
            continue
        sentences.append(line[start : m.end(2)])
        start = m.end()
    if start < len(line):
        sentences.append(line[start:])
    return sentences


def document_sentences(text: str) -> list[str]:
    """All sentences of a document whose paragraphs are separated by blank lines."""
    return [s for p in split_paragraphs(text) for s in _split_line(p)]
