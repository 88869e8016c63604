"""Words of Chinese text for whole-word masking: the tokenizer gives every CJK ideograph a token of its own (as the
reference does, and as it must stay), so a word of several characters is several tokens; a segmenter says which of
them belong together, and masking takes a word's tokens together (Chinese-BERT-wwm's method).

The default segmenter is jieba's dictionary and HMM through rjieba (a Rust port that ships its dictionary: no
download at run time). That dictionary is of simplified characters, and it cuts traditional text worse: of the gold
words of UD_Chinese-GSD's test set, 88% lie inside one of its words in traditional characters, 96% in simplified.
So jieba cuts a simplified copy of each run, of the same length, and its cuts are taken back to the run as written.
`none` leaves every ideograph a word of its own, as the reference's whole-word masking does. A user's dictionary
(`--segmenter-dict`, jieba's format: `word [frequency] [tag]` a line) adds words. Segmenters that fetch a model at
run time (LTP, pkuseg, THULAC, HanLP) are refused: a job must run offline.

word_continues aligns the segmenter's words with the tokens: the ideograph tokens of a text come in the order of
its ideographs, one each, so the n-th ideograph token is the n-th ideograph of the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.zh_variants import (  # the zh extra: zhconv-rs and rjieba
    INSTALL_HINT,
    ConverterUnavailable,
    check_converter,
    variant_table,
)
from bertcorpus.wordpiece.cjk import IDEOGRAPH_RUN

SEGMENTERS = ("jieba", "none")
# Segmenters people ask for that download their models at run time, and so cannot run here or on a sealed worker.
NEEDS_DOWNLOAD = ("ltp", "pkuseg", "thulac", "hanlp", "stanza")


class SegmenterError(ValueError):
    """A segmenter that cannot be used: unknown, needing a model download, not installed, or a bad dictionary."""


@dataclass(frozen=True)
class SegmenterSpec:
    """Which segmenter groups Chinese characters into words, with the words of a user's dictionary."""

    name: str = "jieba"
    user_words: tuple[tuple[str, int | None], ...] = ()  # (word, frequency or None) from --segmenter-dict
    user_dict_sha256: str | None = None

    def describe(self) -> dict:
        return {"name": self.name, "user_dict_sha256": self.user_dict_sha256, "user_words": len(self.user_words)}


def check_segmenter_name(name: str) -> str:
    """The name, or SegmenterError in one line."""
    key = name.strip().lower()
    if key in NEEDS_DOWNLOAD:
        raise SegmenterError(
            f"--segmenter {name} downloads its model at run time, and bertcorpus runs offline on every worker; "
            f"use jieba (its dictionary comes with {INSTALL_HINT}) with --segmenter-dict for your own words"
        )
    if key not in SEGMENTERS:
        raise SegmenterError(f"unknown --segmenter {name!r}; choose one of {', '.join(SEGMENTERS)}")
    return key


# A frequency is a count: jieba keeps it as an unsigned 64-bit number.
MAX_FREQUENCY = 2**64 - 1
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def parse_user_dict(text: str, name: str) -> tuple[tuple[str, int | None], ...]:
    """jieba's dictionary format: a word, then optionally its frequency and a tag, a line; # starts a comment."""
    words = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        frequency = (
            _frequency(fields[1], f"{name} line {number}: the frequency after {fields[0]!r}")
            if len(fields) > 1
            else None
        )
        words.append((fields[0], frequency))
    if not words:
        raise SegmenterError(f"{name} holds no words (jieba's format: word [frequency] [tag], one a line)")
    return tuple(words)


def _frequency(field: str, what: str) -> int:
    """A dictionary line's frequency: ASCII digits (str.isdigit also takes ² and other digits int() refuses), from 0
    to MAX_FREQUENCY; else SegmenterError saying which of these it is not."""
    if not _WHOLE_NUMBER.fullmatch(field):
        raise SegmenterError(f"{what} is {field!r}, not a whole number")
    value = int(field)
    if not 0 <= value <= MAX_FREQUENCY:
        raise SegmenterError(f"{what} is {value:,}; a frequency is a count, from 0 to {MAX_FREQUENCY:,}")
    return value


@functools.cache
def _jieba(user_words: tuple[tuple[str, int | None], ...]):
    try:
        import rjieba
    except ImportError:
        raise SegmenterError(f"--segmenter jieba needs rjieba: {INSTALL_HINT}") from None
    segmenter = rjieba.Jieba()
    for word, frequency in user_words:
        segmenter.add_word(word, frequency, None)
        # jieba cuts simplified copies: a word written in traditional characters is found by its copy
        copy = simplified_copy(word)
        if copy != word:
            segmenter.add_word(copy, frequency, None)
    return segmenter


def check_segmenter(spec: SegmenterSpec) -> None:
    """SegmenterError, in one line, before any work, where the segmenter cannot be had."""
    if spec.name != "none":
        try:
            check_converter()
        except ConverterUnavailable:
            raise SegmenterError(f"--segmenter jieba needs zhconv-rs: {INSTALL_HINT}") from None
        _jieba(spec.user_words)


def simplified_copy(run: str) -> str:
    """The run in simplified characters, character for character: by MediaWiki's zh-Hans table, phrases and all,
    where that keeps its length (every conversion of these texts does), else one character at a time (every single
    character's conversion is one character). Simplified text comes back as it is."""
    copy = variant_table("zh-hans")(run)
    if len(copy) == len(run):
        return copy
    return "".join(_simplified_character(char) for char in run)


@functools.lru_cache(maxsize=1 << 16)
def _simplified_character(char: str) -> str:
    copy = variant_table("zh-hans")(char)
    return copy if len(copy) == 1 else char


def segmenter_of(spec: SegmenterSpec) -> Callable[[str], list[str]]:
    """The words of a run of ideographs, by the spec's segmenter: looked up once per document, not per run (the
    cache's key is the user's whole dictionary)."""
    if spec.name == "none":
        return list
    jieba = _jieba(spec.user_words)
    return lambda run: words_as_written(run, jieba.cut(simplified_copy(run), True))


def words_as_written(run: str, copy_words: list[str]) -> list[str]:
    """The words of a run, cut where the words of its copy (of the same length) are cut."""
    words, at = [], 0
    for word in copy_words:
        words.append(run[at : at + len(word)])
        at += len(word)
    return words


def run_continuations(text: str, spec: SegmenterSpec, words_of: Callable[[str], list[str]] | None = None) -> np.ndarray:
    """Per ideograph of the text, in order: True where it continues the segmenter's word of the one before."""
    words_of = words_of or segmenter_of(spec)
    flags = []
    for run in IDEOGRAPH_RUN.finditer(text):
        for word in words_of(run.group()):
            flags.append(False)
            flags.extend([True] * (len(word) - 1))
    return np.array(flags, bool)


def word_continues(sentences: list[str], ideograph_tokens: np.ndarray, spec: SegmenterSpec) -> np.ndarray | None:
    """Per token of the sentences' ids: True where the token continues a word of the segmenter (never for a token
    that is no ideograph: `##` pieces mark those words). None where the text and the tokens disagree on their
    ideographs (a character the tokenizer removed), so that nothing is grouped wrongly."""
    out = np.zeros(len(ideograph_tokens), bool)
    at = np.flatnonzero(ideograph_tokens)
    if not len(at):
        return out
    words_of = segmenter_of(spec)
    continues = np.concatenate([run_continuations(s, spec, words_of) for s in sentences])
    if len(continues) != len(at):
        return None
    out[at] = continues
    return out
