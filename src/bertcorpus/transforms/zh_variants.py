"""Chinese Wikipedia's language-converter markup, resolved as MediaWiki resolves it, and the text converted to one
script or regional variant with MediaWiki's own conversion tables (through zhconv-rs).

zhwiki stores each article once, in whatever mix of simplified and traditional characters its editors wrote, and
MediaWiki converts it for each reader. Three kinds of markup steer that conversion:

- inline blocks `-{FLAGS|RULES}-`: `-{zh-hans:计算机;zh-hant:電腦}-` shows the text for the reader's variant (or
  its nearest fallback), `-{text}-` shows text unconverted; flags add the rules to the whole page (A shows them
  too, H only adds them), remove them (-), set the title (T), show text raw (R), or limit it to some variants;
- `{{NoteTA|1=zh-cn:激光;zh-tw:雷射|G1=IT|T=...}}`: page-wide rules, and common conversion groups by name;
- after both, every character the rules did not settle is converted by the variant's table.

resolve_converter_markup replaces every well-formed block by what it shows, before any other wikitext is cleaned
(so that links, templates and tables inside a block are cleaned as usual). What a block shows is final: it is
wrapped in two private-use characters (PROTECT_START, PROTECT_END) that the cleaner keeps and `PageRules.convert`
honours, so that the variant table never converts it again. Malformed markup (a block never closed, a variant no
table has) costs only itself: it is removed and counted (MarkupCounts), and the page is kept.

The conversion tables are MediaWiki's ZhConversion tables as zhconv-rs ships them (GPL-2.0-or-later, an optional
extra: pip install 'bertcorpus[zh]'); the common conversion groups are a snapshot of zhwiki's Module:CGroup pages
(transforms/conversion-groups/zh_cgroups.json.zst, CC BY-SA 4.0).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources

from bertcorpus.transforms.wiki_page_items import TextTooLarge
from bertcorpus.wordpiece.cjk import count_ideographs

# MediaWiki's Chinese variants, and the order in which each falls back on the others (LanguageZh).
FALLBACKS = {
    "zh": ("zh-hans", "zh-hant", "zh-cn", "zh-tw", "zh-hk", "zh-sg", "zh-mo", "zh-my"),
    "zh-hans": ("zh-cn", "zh-sg", "zh-my"),
    "zh-hant": ("zh-tw", "zh-hk", "zh-mo"),
    "zh-cn": ("zh-hans", "zh-sg", "zh-my"),
    "zh-sg": ("zh-hans", "zh-cn", "zh-my"),
    "zh-my": ("zh-hans", "zh-sg", "zh-cn"),
    "zh-tw": ("zh-hant", "zh-hk", "zh-mo"),
    "zh-hk": ("zh-hant", "zh-mo", "zh-tw"),
    "zh-mo": ("zh-hant", "zh-hk", "zh-tw"),
}
VARIANTS = tuple(FALLBACKS)
# The variants a run may ask for (--zh-variant): keep is MediaWiki's "zh", no conversion; both writes zh-hans and
# zh-hant. Each with its BCP 47 language tag and zhconv-rs's name of its table.
CHOICES = ("zh-hans", "zh-hant", "zh-cn", "zh-tw", "zh-hk", "keep", "both")
LANGUAGE_TAGS = {
    "zh-hans": "zh-Hans",
    "zh-hant": "zh-Hant",
    "zh-cn": "zh-Hans-CN",
    "zh-tw": "zh-Hant-TW",
    "zh-hk": "zh-Hant-HK",
    "zh": "zh",
}
_TABLES = {"zh-hans": "zh-Hans", "zh-hant": "zh-Hant", "zh-cn": "zh-CN", "zh-tw": "zh-TW", "zh-hk": "zh-HK"}
INSTALL_HINT = "pip install 'bertcorpus[zh]'"

PROTECT_START, PROTECT_END = "\ue000", "\ue001"
_PROTECTED = re.compile(f"{PROTECT_START}([^{PROTECT_START}{PROTECT_END}]*){PROTECT_END}")
_MARKERS = re.compile(f"[{PROTECT_START}{PROTECT_END}]")

# A block opens at -{ and closes at }- (not at the }}- that ends a template followed by a hyphen).
_BLOCK_TOKEN = re.compile(r"-\{|(?<!\})\}-")
_FLAG_LETTERS = frozenset("ATRDHN-")
# Rules are split at a ; only where a rule for a zh variant follows (or the end): a ; inside a rule's text stays.
# Variants no table has (zh-yue:) are split off too, so that they can be dropped and counted.
_VARIANT_NAME = r"zh(?:-[a-z]+)*"
_ZH_VARIANT = re.compile(_VARIANT_NAME)
_RULE_SEPARATOR = re.compile(rf";\s*(?=(?:{_VARIANT_NAME})\s*:|[^;]*?=>\s*(?:{_VARIANT_NAME})\s*:|\s*$)", re.I)
_ANY_VARIANT = re.compile(r"^\s*(zh(?:-[a-z]+)?|[a-z]{2,3}(?:-[a-z]+)?)\s*$", re.I)
_NOTETA = re.compile(r"\{\{\s*(?:template\s*:\s*)?(?:noteta|notea|字词转换|字詞轉換)\s*(?=[|}])", re.I)
_RESIDUE = re.compile(r"-\{|\}-")
# The names in a rule (zh-hans:, X=>zh-tw:), removed from the line of a block that never closes.
_RULE_NAME = re.compile(r"(?:(?<=;)|^)\s*(?:[^;:\n]*?=>\s*)?zh(?:-[a-z]+)?\s*:", re.I)


# `both` writes each document once per script, its id suffixed with the script's tag.
BOTH_SCRIPTS = ("zh-hans", "zh-hant")
SCRIPT_SUFFIX = re.compile("@(?:" + "|".join(re.escape(LANGUAGE_TAGS[v]) for v in BOTH_SCRIPTS) + ")$")


def variants_asked(zh_variant: str) -> list[tuple[str, str, str]]:
    """(MediaWiki variant, language tag, id suffix) of each script --zh-variant asks for: `both` gives zh-hans and
    zh-hant, each document's id suffixed with its tag; every other value one, unsuffixed (`keep`: as written)."""
    variants = BOTH_SCRIPTS if zh_variant == "both" else ("zh" if zh_variant == "keep" else zh_variant,)
    return [(v, LANGUAGE_TAGS[v], f"@{LANGUAGE_TAGS[v]}" if zh_variant == "both" else "") for v in variants]


class ConverterUnavailable(ValueError):
    """zhconv-rs, which holds the conversion tables, is not installed."""


@dataclass
class MarkupCounts:
    """What a page's converter markup held: blocks resolved, and the malformed parts removed."""

    blocks: int = 0
    page_rules: int = 0
    unclosed: int = 0  # a -{ with no }-: the -{ is removed, its text kept
    unknown_variant: int = 0  # a rule for a variant no table has: that rule is dropped
    unknown_group: int = 0  # a NoteTA conversion group that the snapshot does not hold
    residue: int = 0  # -{ or }- left after cleaning, removed by the last sweep

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in self.__dict__.items() if v}


@dataclass
class Rule:
    """One rule's texts: bidirectional {variant: text} and unidirectional {variant: {from: to}}."""

    bid: dict[str, str] = field(default_factory=dict)
    unid: dict[str, dict[str, str]] = field(default_factory=dict)
    dropped: int = 0  # rules for zh variants that no table has (zh-yue:): a block of nothing else is no text

    def __bool__(self) -> bool:
        return bool(self.bid or self.unid)

    def own(self, variant: str) -> str | None:
        """The bidirectional text of `variant` or of its first fallback that has one."""
        return next((self.bid[v] for v in (variant, *FALLBACKS[variant]) if v in self.bid), None)

    def shown(self, variant: str) -> str | None:
        """The text shown to a reader of `variant`: its own, a fallback's, its unidirectional target, or the
        first text the rule has (MediaWiki's order)."""
        if (own := self.own(variant)) is not None:
            return own
        if variant in self.unid:
            return next(iter(self.unid[variant].values()))
        if self.bid:
            return next(iter(self.bid.values()))
        if self.unid:
            return next(iter(next(iter(self.unid.values())).values()))
        return None

    def pairs(self, variant: str) -> dict[str, str]:
        """What the rule adds to the page's conversion table for `variant`: every variant's text → the shown one
        (where the variant or a fallback has one), and the unidirectional rules of the variant."""
        out = {}
        if (own := self.own(variant)) is not None:
            out.update({text: own for text in self.bid.values() if text})
        out.update(self.unid.get(variant, {}))
        return out


def parse_rules(body: str, counts: MarkupCounts) -> Rule:
    """`zh-hans:A;zh-hant:B` and `X=>zh-cn:Y` items → a Rule; an empty Rule where the body holds no rule (then it
    is text). An item for a variant no table has is dropped and counted."""
    rule = Rule()
    for item in _RULE_SEPARATOR.split(body):
        name, sep, text = item.partition(":")
        if not sep:
            continue
        source, arrow, name = name.rpartition("=>") if "=>" in name else ("", "", name)
        variant = name.strip().lower()
        text = text.strip()
        if variant not in FALLBACKS:
            if _ANY_VARIANT.match(name) and text:
                counts.unknown_variant += 1
                rule.dropped += bool(_ZH_VARIANT.fullmatch(variant))
            continue
        if not text:
            continue
        if arrow:
            rule.unid.setdefault(variant, {})[source.strip()] = text
        else:
            rule.bid[variant] = text
    return rule


@dataclass
class PageRules:
    """The conversion one page asks for, for one variant: its page-wide pairs (from A and H blocks, NoteTA and its
    groups) and its title rule. `convert` applies them, then the variant's table, to everything not protected."""

    variant: str
    pairs: dict[str, str] = field(default_factory=dict)
    title: str | None = None

    def add(self, rule: Rule) -> None:
        self.pairs.update(rule.pairs(self.variant))

    def remove(self, rule: Rule) -> None:
        for source in rule.pairs(self.variant):
            self.pairs.pop(source, None)

    def convert(self, text: str, max_chars: int | None = None) -> str:
        """The text in the variant: protected spans as they are, the page's pairs (longest first), then the table;
        the protection marks removed. A page's rules may map one character to a long text, so the result is
        counted as it is built: longer than `max_chars`, it raises TextTooLarge before it is joined."""
        if self.variant == "zh":
            return _MARKERS.sub("", text)
        table = variant_table(self.variant)
        pattern = _pairs_pattern(tuple(sorted(self.pairs))) if self.pairs else None
        out = _CappedPieces(max_chars, self.variant)
        last = 0
        for found in _PROTECTED.finditer(text):
            self._convert_free(text[last : found.start()], table, pattern, out)
            out.add(found.group(1))
            last = found.end()
        self._convert_free(text[last:], table, pattern, out)
        return _MARKERS.sub("", "".join(out.pieces))

    def _convert_free(self, text: str, table, pattern, out: _CappedPieces) -> None:
        if not text:
            return
        if pattern is None:
            out.add(table(text))
            return
        last = 0
        for found in pattern.finditer(text):
            out.add(table(text[last : found.start()]))
            out.add(self.pairs[found.group()])
            last = found.end()
        out.add(table(text[last:]))

    def convert_title(self, title: str, max_chars: int | None = None) -> str:
        return self.title if self.title else self.convert(title, max_chars)


class _CappedPieces:
    """The pieces of a converted text and their length so far, which may not pass `limit` (None: no limit). The
    pieces a rule gives are the same string object each time, so the list stays small while the text would not."""

    def __init__(self, limit: int | None, variant: str):
        self.limit, self.variant = limit, variant
        self.pieces: list[str] = []
        self.length = 0

    def add(self, piece: str) -> None:
        self.length += len(piece)
        if self.limit is not None and self.length > self.limit:
            raise TextTooLarge(f"its text converted to {self.variant} is longer than {self.limit:,} characters")
        self.pieces.append(piece)


@functools.lru_cache(maxsize=256)
def _pairs_pattern(sources: tuple[str, ...]) -> re.Pattern:
    """One alternation of a page's rule sources, longest first: the leftmost, longest match wins, as in MediaWiki."""
    return re.compile("|".join(re.escape(s) for s in sorted(sources, key=len, reverse=True)))


@functools.cache
def variant_table(variant: str):
    """The conversion function of a variant's table (zhconv-rs, loaded once per process)."""
    try:
        from zhconv_rs import zhconv
    except ImportError:
        raise ConverterUnavailable(f"converting Chinese text needs zhconv-rs: {INSTALL_HINT}") from None
    target = _TABLES[variant]
    return functools.partial(_convert_with, zhconv, target)


def _convert_with(zhconv, target: str, text: str) -> str:
    return zhconv(text, target) if text else text


def check_converter() -> None:
    """Raise ConverterUnavailable, in one line, before any work, where the tables cannot be had."""
    variant_table("zh-hans")


@functools.cache
def conversion_groups() -> dict:
    """The snapshot of zhwiki's common conversion groups: {"groups": {name: [rules]}, "aliases": {alias: name}}."""
    import zstandard

    data = resources.files("bertcorpus.transforms").joinpath("conversion-groups/zh_cgroups.json.zst").read_bytes()
    return json.loads(zstandard.ZstdDecompressor().decompress(data))


def _group_key(name: str, counts: MarkupCounts) -> str | None:
    """The conversion group a NoteTA G parameter names (by key or alias); an unknown one is counted."""
    table = conversion_groups()
    key = name.strip()
    key = key if key in table["groups"] else table["aliases"].get(key)
    if key is None:
        counts.unknown_group += 1
    return key


@functools.cache  # a group (IT holds about 1,600 rules) is parsed once, not on every page that names it
def _group_pairs(key: str, variant: str) -> tuple[dict[str, str], int, int]:
    """A conversion group's pairs for `variant`, its rule count, and its items for variants no table has."""
    counts, pairs = MarkupCounts(), {}
    group = conversion_groups()["groups"][key]
    for group_rule in group:
        pairs.update(parse_rules(group_rule, counts).pairs(variant))
    return pairs, len(group), counts.unknown_variant


@dataclass
class Resolved:
    """A page's wikitext with every converter block replaced by what it shows (protected), its rules for the
    variant, and what its markup held."""

    wikitext: str
    rules: PageRules
    counts: MarkupCounts


def resolve_converter_markup(wikitext: str, variant: str) -> Resolved:
    """Resolve a zhwiki page's converter markup for `variant` (a MediaWiki variant, or zh for none)."""
    counts = MarkupCounts()
    rules = PageRules(variant)
    _note_ta_rules(wikitext, rules, counts)
    stack: list[list[str]] = [[]]
    last = 0
    for token in _BLOCK_TOKEN.finditer(wikitext):
        if token.group() == "-{":
            stack[-1].append(wikitext[last : token.start()])
            stack.append([])
        elif len(stack) > 1:
            stack[-1].append(wikitext[last : token.start()])
            body = "".join(stack.pop())
            stack[-1].append(_block(_MARKERS.sub("", body), rules, counts))
        else:
            continue  # a }- with no block open: text (the last sweep removes it from the clean text)
        last = token.end()
    stack[-1].append(wikitext[last:])
    while len(stack) > 1:  # blocks never closed: their -{ goes, with the flags and rule names on its line
        counts.unclosed += 1
        inner = "".join(stack.pop())
        line, newline, rest = inner.partition("\n")
        stack[-1].append(_unclosed_line(line) + newline + rest)
    return Resolved("".join(stack[0]), rules, counts)


def _unclosed_line(line: str) -> str:
    """What the first line of a block that never closes leaves: its text without flags or rule names, or nothing
    where its flags show nothing (H, -, N, or T alone: a cut rule is no prose)."""
    flags, text = _flags(line)
    if flags & {"H", "-", "N"} or flags == {"T"}:
        return ""
    return _RULE_NAME.sub("", text)


def _block(body: str, rules: PageRules, counts: MarkupCounts) -> str:
    """What one -{...}- block shows (protected), its rules given to the page."""
    counts.blocks += 1
    flags, text = _flags(body)
    variant = rules.variant
    if "R" in flags:
        return _protect(text)
    if "N" in flags:
        return ""
    rule = parse_rules(text, counts)
    if not rule and flags & {"A", "H", "-"}:
        rule = Rule(bid={v: text.strip() for v in VARIANTS}) if text.strip() else rule  # protect the term as it is
    if "-" in flags:
        rules.remove(rule)
        return ""
    if flags & {"A", "H"}:
        rules.add(rule)
        counts.page_rules += 1
    if "T" in flags and rule:
        rules.title = rule.shown(variant)
    if "H" in flags or flags == {"T"}:
        return ""
    variants = flags & set(VARIANTS)
    if variants:  # -{zh-hans;zh-hant|text}-: the text, converted, for those variants (and their fallbacks) only
        return text if variant in variants or variants & set(FALLBACKS[variant]) else ""
    if not rule:  # text, unless all it held were rules for variants no table has: those are dropped
        return "" if rule.dropped else _protect(text)
    return _protect(rule.shown(variant) or "")


def _flags(body: str) -> tuple[set[str], str]:
    """(flags, text): the flags before a block's first | where they are flags (A;H, zh-hans;zh-hant), else none."""
    head, sep, tail = body.partition("|")
    if not sep:
        return set(), body
    names = [f.strip() for f in head.split(";")]
    flags = {f.upper() if len(f) == 1 else f.lower() for f in names if f}
    if flags and all(f in _FLAG_LETTERS or f in FALLBACKS for f in flags):
        return flags, tail
    return set(), body


def _protect(text: str) -> str:
    return f"{PROTECT_START}{text}{PROTECT_END}" if text else ""


def _note_ta_rules(wikitext: str, rules: PageRules, counts: MarkupCounts) -> None:
    """The page-wide rules of every NoteTA template: numbered rules, T= (the title), G1=... (conversion groups)."""
    for start in _NOTETA.finditer(wikitext):
        for name, value in _template_parameters(wikitext, start.end()):
            value = value.strip()
            if value.startswith("-{") and value.endswith("}-"):
                value = value[2:-2]
            name = name.strip()
            if name.upper() == "T":
                if title := parse_rules(_flags(value)[1], counts).shown(rules.variant):
                    rules.title = title
            elif name[:1] in ("G", "g") and name[1:].isdigit():
                if (key := _group_key(value, counts)) is not None:
                    pairs, rule_count, unknown_variants = _group_pairs(key, rules.variant)
                    rules.pairs.update(pairs)
                    counts.page_rules += rule_count
                    counts.unknown_variant += unknown_variants
            elif value and (not name or name.isdigit()):
                rules.add(parse_rules(_flags(value)[1], counts))
                counts.page_rules += 1


def _template_parameters(text: str, at: int) -> list[tuple[str, str]]:
    """(name, value) of a template's parameters from `at` (just past its name) to its closing }}; nested
    templates, links and converter blocks are skipped over. Unnamed parameters have their position as name."""
    params, depth, start, position = [], 0, None, 0
    i = at
    while i < len(text):
        pair = text[i : i + 2]
        if pair in ("{{", "[[", "-{"):
            depth += 1
            i += 2
            continue
        if pair in ("]]", "}-") or (pair == "}}" and depth):
            depth = max(0, depth - 1)
            i += 2
            continue
        if pair == "}}" or (text[i] == "|" and not depth):
            if start is not None:
                raw = text[start:i]
                name, sep, value = raw.partition("=")
                if not sep or "{" in name or ":" in name:
                    position += 1
                    name, value = str(position), raw
                params.append((name, value))
            if pair == "}}":
                break
            start = i + 1
        i += 1
    return params


def sweep_residue(text: str, counts: MarkupCounts) -> str:
    """Clean text without any -{ or }- (the rest of a malformed or unparsed block), each one counted."""
    if "-{" not in text and "}-" not in text:
        return text
    swept, n = _RESIDUE.subn("", text)
    counts.residue += n
    return swept


# A text is Chinese where this share of its letters are CJK ideographs (a Japanese book mixes in kana).
CHINESE_SHARE = 0.5


@dataclass(frozen=True)
class ScriptVersion:
    """A Chinese text converted to one variant, with its language tag and its id suffix (for `both`)."""

    text: str
    variant: str
    language: str
    id_suffix: str

    def convert(self, text: str) -> str:
        return PageRules(self.variant).convert(text)


def is_chinese(text: str) -> bool:
    """Whether most of a text's letters are CJK ideographs."""
    sample = text[:100_000]
    letters = sum(1 for c in sample if c.isalpha())
    return bool(letters) and count_ideographs(sample) >= CHINESE_SHARE * letters


def chinese_versions(text: str, zh_variant: str) -> list[ScriptVersion] | None:
    """A Chinese text (a book, with no converter markup) in the variants `zh_variant` asks for; None where the text
    is not Chinese."""
    if not is_chinese(text):
        return None
    # Only the table: a page's rules and protection marks are wiki markup, and a book's own private-use
    # characters (the marks' code points) are its text.
    return [
        ScriptVersion(text if v == "zh" else variant_table(v)(text), v, tag, suffix)
        for v, tag, suffix in variants_asked(zh_variant)
    ]
