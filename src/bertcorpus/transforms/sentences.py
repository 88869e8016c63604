"""Sentence splitting: paragraphs of plain text → sentences, by English rules, and at the stops of other scripts.

A rule-based splitter built from a few compiled regular expressions, so it is fast in CPython (docs/benchmarks.md)
and needs no model or data download. A sentence ends at `.`, `!`, `?` or `…` (optionally followed by closing quotes or
brackets) that is followed by whitespace and then something that can start a sentence: an upper-case letter, a
digit, an opening quote or bracket, or a lower-case word with an inner capital ("iPhone"). A full stop is not an
end when the token before it is a known abbreviation or an initial; docs/sentence_splitting.md gives the measured
quality and speed, and tests/data/sentences/ is the hand-checked gold standard every rule here was scored on.

Scripts with stops of their own (CJK, Devanagari, Arabic, Armenian, Ethiopic, Myanmar, Khmer, Tibetan, ...) are
split after those stops whatever follows, since none of them marks an abbreviation; a paragraph without any such
character pays one search for them.
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

# Sentence terminators of scripts whose stops are never abbreviations, decimal points or initials, so that they end
# a sentence with no space or capital after them: the CJK full stops, exclamation and question marks (full-width,
# half-width and small forms), the Devanagari and Bengali danda and double danda, the Arabic question mark and the
# Urdu full stop, the Armenian full stop, the Ethiopic full stop and question mark, the Myanmar section mark, the
# Khmer khan and bariyoosan, the Tibetan shad and its doubled forms, the Syriac, Mongolian and Canadian syllabics
# full stops and the Philippine (Baybayin) double punctuation.
_SCRIPT_STOPS = (
    "\u3002\uff01\uff1f\uff0e\uff61\ufe12\ufe52\ufe56\ufe57"
    "\u0964\u0965\u061f\u06d4\u0589\u1362\u1367\u104b\u17d4\u17d5"
    "\u0f0d\u0f0e\u0f0f\u0700\u0701\u0702\u1803\u166e\u1736"
)
# What may close a sentence after such a stop: the quotes and brackets of those scripts and the ASCII ones.
_SCRIPT_CLOSERS = "\"'\u201d\u2019)\\]\u300d\u300f\u3011\u3015\u3017\u3019\u300b\u3009\uff09\uff3d\uff63\u00bb"
# Ethiopic text typed without the full stop ። often writes two wordspaces (፡፡) for it.
_SCRIPT_BOUNDARY = re.compile(rf"((?:[{_SCRIPT_STOPS}]|\u1361\u1361)+)([{_SCRIPT_CLOSERS}]*)(\s*)(?=\S)")
_HAS_SCRIPT_STOP = re.compile(rf"[{_SCRIPT_STOPS}]|\u1361\u1361")
_FULLWIDTH_STOP = "\uff0e"  # also a decimal point between full-width digits (３．１４)
# The quotation marks of Chinese and Japanese text, opening → closing, and the angle brackets of commentary and
# titles (〈劉夫人已見。〉, 《你好！李焕英》): the stops inside them end no sentence either. Curly quotes count only
# where CJK stops are in play: English text never gets here.
_QUOTE_PAIRS = {
    "\u300c": "\u300d",
    "\u300e": "\u300f",
    "\u201c": "\u201d",
    "\u2018": "\u2019",
    "\u3008": "\u3009",
    "\u300a": "\u300b",
}
_QUOTE = re.compile("[" + "".join(o + c for o, c in _QUOTE_PAIRS.items()) + "]")
_HIRAGANA = re.compile("[\u3041-\u309f]")
_HAS_WORD = re.compile(r"[^\W_]")
# The letters of scripts that mark no sentence end: Thai and Lao separate phrases and sentences alike by a space. A
# paragraph of them stays one sentence, cut into pieces only where it is too long for a pair (transforms/instances.py
# cut_long_sentences); `create` counts such sentences, so that a corpus shows how much of it had no boundaries.
_UNSTOPPED_SCRIPT = re.compile("[\u0e01-\u0e5b\u0e81-\u0edf]")


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
    """Sentences of one paragraph, in order, with each run of whitespace turned into one space: joined with a space
    where the paragraph had whitespace between them, and with nothing where it had none (after a CJK full stop,
    say), they give " ".join(paragraph.split())."""
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
    if _HAS_SCRIPT_STOP.search(line) is None:  # English and the like: one search, and nothing more to do
        return sentences
    return [piece for sentence in sentences for piece in _split_at_script_stops(sentence)]


def _quoted_spans(sentence: str) -> list[tuple[int, int]]:
    """(open, close) positions of the CJK quotations that close in the text (「」, 『』, “”, ‘’); a quotation left
    open is no quotation (a typo must not swallow the rest of a paragraph)."""
    spans, stack = [], []
    for m in _QUOTE.finditer(sentence):
        mark = m.group()
        if mark in _QUOTE_PAIRS:
            stack.append((mark, m.start()))
        elif stack and _QUOTE_PAIRS[stack[-1][0]] == mark:
            spans.append((stack.pop()[1], m.start()))
        elif any(_QUOTE_PAIRS[o] == mark for o, _ in stack):  # closes an outer one: the inner ones never closed
            while _QUOTE_PAIRS[stack[-1][0]] != mark:
                stack.pop()
            spans.append((stack.pop()[1], m.start()))
    return spans


def _inside_quotation(spans: list[tuple[int, int]], at: int, closed_to: int) -> bool:
    """Whether a stop at `at`, with its closers up to `closed_to`, lies inside a quotation it does not close."""
    return any(open_at < at and close_at > closed_to for open_at, close_at in spans)


def _split_at_script_stops(sentence: str) -> list[str]:
    """A sentence cut after each run of the terminators of _SCRIPT_STOPS (and its closing quotes), whatever
    follows, but inside a quotation that goes on (『大奇！大奇！』 is one sentence: the stops inside speech end
    none), where a quotation closed by the stop goes on with a particle (Japanese 「…。」と言った) or a full-width
    full stop stands between digits."""
    cuts: list[tuple[int, int]] = []  # (end of a sentence, start of the next)
    spans = _quoted_spans(sentence) if _QUOTE.search(sentence) else []
    for m in _SCRIPT_BOUNDARY.finditer(sentence):
        after = sentence[m.end() : m.end() + 1]
        if m.group(2) and _HIRAGANA.match(after):
            continue
        if spans and _inside_quotation(spans, m.start(1), m.end(2) - 1):
            continue
        if m.group(1) == _FULLWIDTH_STOP and after.isdigit() and sentence[m.start(1) - 1 : m.start(1)].isdigit():
            continue
        cuts.append((m.end(2), m.end()))
    return _pieces_with_words(sentence, cuts)


def _pieces_with_words(sentence: str, cuts: list[tuple[int, int]]) -> list[str]:
    """The sentence cut at `cuts`, but a piece of nothing but punctuation (the second ！ of 期待回复！！, the 〉 or
    the 。 after a closer at a paragraph's end) stays with the piece before it: alone it would be a segment of one
    token."""
    spans: list[list[int]] = []
    start = 0
    for end, following in [*cuts, (len(sentence), len(sentence))]:
        if end > start:
            if spans and _HAS_WORD.search(sentence, start, end) is None:
                spans[-1][1] = end
            else:
                spans.append([start, end])
        start = following
    return [sentence[a:b] for a, b in spans]


def document_sentences(text: str) -> list[str]:
    """All sentences of a document whose paragraphs are separated by blank lines."""
    return [s for p in split_paragraphs(text) for s in _split_line(p)]


def unsplit_sentences(sentences: list[str]) -> int:
    """How many of the sentences hold a script that marks no sentence end (Thai, Lao): each is a paragraph, or what
    the stops of another script in it left of one, that no boundary could be found in."""
    return sum(1 for sentence in sentences if _UNSTOPPED_SCRIPT.search(sentence))
