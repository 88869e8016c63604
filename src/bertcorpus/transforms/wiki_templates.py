"""The templates that show words of the sentence around them, and the words each shows.

clean_wikitext (wikitext.py) removes every template, but a template of the few below leaves the text a reader sees
in its place: a word in another language, a transcription, a quantity, a styled or annotated phrase. Removed
whole, they leave holes such as "日本語（、）は", "(born, Kyiv)" or "At, Alabama has". Nothing is expanded further
than the words a reader sees.
"""

from __future__ import annotations

import re

from bertcorpus.transforms.languages import LANGUAGE_NAMES

# Templates that only style their text or annotate it after it: {{nowrap|...}}, {{要出典範囲|claim|date=...}}.
# fmt: off
_STYLED_TEMPLATES = (
    "nowrap", "nobr", "small", "smaller", "big", "larger", "mono", "sic", "vanchor", "abbr", "em", "strong",
    "inline-block", "unicode", "iast", "math", "mvar", "ruby", "ilq", "nihongo2",
    "要出典範囲", "要検証範囲", "独自研究範囲",
)
# fmt: on
# Templates whose output is words of the sentence around them, in English Wikipedia and in the other wikis of the
# samples (ja, vi, el, bn, uk): removed, they leave holes such as "日本語（、）は" or "(born, Kyiv)". Each keeps
# the text a reader sees, not expanded further than that: by name (lower case, "_" as " "), how its arguments make
# the text. Every other template still goes whole.
_TEXT_TEMPLATES = {
    # a word in another language: {{lang|ko|이}}, {{langx|fr|mot}}; {{lang-en|word}} by _LANG_X below
    **dict.fromkeys(("lang", "langx"), "second"),
    # an interlanguage link shows its label: {{仮リンク|label|en|Target}}, {{ill|label|de|Ziel}}; ukwiki's
    # {{не перекладено|title|shown|ru|...}} shows its second argument where it has one
    **dict.fromkeys(("仮リンク", "ill", "interlanguage link"), "first"),
    **dict.fromkeys(("не перекладено", "нп", "iw"), "second_or_first"),
    # styled or annotated text, and a quotation ({{ilq|...}})
    **dict.fromkeys(_STYLED_TEMPLATES, "first"),
    "color": "second",
    "resize": "last",
    "transl": "last",
    "ipa": "ipa",
    # a Japanese word with its reading: {{nihongo|English|漢字|rōmaji}} → English (漢字, rōmaji), and jawiki's
    # {{読み仮名|物理学|ぶつりがく|英: physics}} → 物理学（ぶつりがく、英: physics）
    "nihongo": "nihongo",
    **dict.fromkeys(("読み仮名", "読み仮名 ruby不使用"), "reading"),
    # a quantity: {{convert|58|km|mi|abbr=on}} shows 58 km (and its conversion, which is left out)
    **dict.fromkeys(("convert", "cvt", "রূপান্তর"), "convert"),
    # jawiki's {{要出典|範囲=claim|date=...}} marks its claim, which it shows
    "要出典": "claim",
    "読み": "first",
    "nbsp": "space",
}
# {{lang-en|word}}, {{lang-en-short|word}}, {{lang-cu2|и}}: the word (the language's name before it is left out);
# {{IPA-es|...}}: the transcription. jawiki's {{en|word}}, {{zh|s=...|t=...}}: a word in the language the name is
# the code of (without an argument, as in other wikis' {{en}} after a link, they show a mark and go).
_LANG_X = re.compile(
    r"(?:lang|ipa)-[a-z]{2,3}(?:-[a-z]{2,8})*\d?|(?:" + "|".join(sorted(LANGUAGE_NAMES)) + r")(?=[ \t]*\|)"
)
_LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z]{2,8})*")
# The opening of a template of _TEXT_TEMPLATES, its name in group 1: one match per template tells the few apart.
_TEXT_TEMPLATE = re.compile(
    r"\{\{[ \t]*(?:template[ \t]*:[ \t]*)?("
    + "|".join(
        [_LANG_X.pattern]
        + [re.escape(name).replace(r"\ ", "[ _]+") for name in sorted(_TEXT_TEMPLATES, key=len, reverse=True)]
    )
    + r")[ \t]*(?:\||\}\}|\n)",
    re.I,
)
_ARGUMENT_TOKEN = re.compile(r"\{\{|\}\}|\[\[|\]\]|\|")
_NUMBER = re.compile(r"[-+−]?\d[\d.,]*")
_CONVERT_RANGES = {"-", "–", "to", "and", "or", "x", "×", "by", "to(-)", "and(-)"}
# {{convert|22|e6acre}} shows "22 million acre": a unit may carry a power of ten in front
_CONVERT_SCALE = re.compile(r"e(3|6|9|12)(\S+)")
_SCALE_WORDS = {"3": "thousand", "6": "million", "9": "billion", "12": "trillion"}


def template_shows(text: str, start: int, end: int) -> str | None:
    """What the template text[start:end] ("{{...}}") shows in its place, which may hold templates of its own; None
    for a template that shows no words of the sentence (it goes whole)."""
    found = _TEXT_TEMPLATE.match(text, start)
    if found is None:
        return None
    name = " ".join(found.group(1).replace("_", " ").split()).lower()
    return _template_text(_TEXT_TEMPLATES.get(name, "first"), _arguments(text[start + 2 : end - 2]))


def _arguments(body: str) -> dict[str, str]:
    """A template's arguments by name, the positional ones by their number ("1", "2", ...) as MediaWiki numbers
    them: split at the pipes outside nested templates and links; an argument with "=" outside them is named."""
    parts = []
    depth = last = 0
    for token in _ARGUMENT_TOKEN.finditer(body):
        tok = token.group()
        if tok in ("{{", "[["):
            depth += 1
        elif tok in ("}}", "]]"):
            depth = max(0, depth - 1)
        elif not depth:
            parts.append(body[last : token.start()])
            last = token.end()
    parts.append(body[last:])
    arguments: dict[str, str] = {}
    number = 0
    for part in parts[1:]:  # parts[0] is the name
        name, equals, value = part.partition("=")
        if equals and "{{" not in name and "[[" not in name:
            arguments[name.strip()] = value.strip()
        else:
            number += 1
            arguments[str(number)] = part.strip()
    return arguments


def _template_text(rule: str, args: dict[str, str]) -> str:
    """What a template of _TEXT_TEMPLATES shows, by its rule; empty where its arguments do not give it."""
    first, second, third = args.get("1", ""), args.get("2", ""), args.get("3", "")
    if rule == "first":  # also {{zh|c=...}}, {{zh|s=...|t=...}}: the characters, simplified first
        return args.get("lt") or first or args.get("c") or args.get("s") or args.get("t", "")
    if rule == "claim":
        return args.get("範囲", "")
    if rule == "second":
        return second
    if rule == "second_or_first":
        return second or first
    if rule == "last":
        numbered = [v for k, v in args.items() if k.isdigit() and v]
        return numbered[-1] if numbered else ""
    if rule == "ipa":  # {{IPA|nʲihoŋŋo}}, or {{IPA|fr|ɛ̃}} with a language first
        return second if second and _LANGUAGE_CODE.fullmatch(first) else first
    if rule == "nihongo":
        given = [v for v in (first, second, third) if v]
        return f"{given[0]} ({', '.join(given[1:])})" if len(given) > 1 else "".join(given)
    if rule == "reading":
        readings = [v for v in (second, third) if v]
        return f"{first}（{'、'.join(readings)}）" if readings else first
    if rule == "convert":  # {{convert|58|km|mi}} → 58 km; {{convert|2|to|5|m}} → 2 to 5 m
        if not _NUMBER.fullmatch(first):
            return ""
        if second in _CONVERT_RANGES and _NUMBER.fullmatch(third):
            joiner = "–" if second in ("-", "–") else f" {second.replace('(-)', '')} "
            return f"{first}{joiner}{third} {args.get('4', '')}".strip()
        if scaled := _CONVERT_SCALE.fullmatch(second):
            second = f"{_SCALE_WORDS[scaled[1]]} {scaled[2]}"
        return f"{first} {second}".strip()
    return " "  # nbsp
