"""Offline language identification (`--language auto`), with lingua's models as pip installs them.

A document is judged on a few windows of its text spread from start to end, not on all of it: a long document's
language is clear from a few thousand characters, and the windows make a mixed document's majority language win.
Each window's confidence values are summed, weighted by the window's length; the document gets the language with
the largest sum, and that language's share of the sums as its confidence. Below the caller's minimum confidence
the document is `und`: never silently assigned to a language it may not be in.

With `languages` (--languages), the detector chooses among those alone, and would give a document in any other
language the listed one it looks most like, with full confidence (Kabyle came out Finnish at 0.996). So the verdict
is checked with lingua's light detector of all its languages (its trigram models: about 90 MB, loaded in half a
second): where that one's majority language is another, the document is `und`.

Without a detector (no langid extra), `guess_from_script` names the language of a document's script where one
language is the usual one (Latin letters en, CJK ideographs zh, kana ja, Hangul ko): good enough to tell English
books from Chinese ones, and named as a guess wherever it is used.

Chinese is told apart by script (zh-Hans or zh-Hant) where zhconv-rs is installed, from the share of characters
that only one script uses.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from bertcorpus.transforms.languages import UNDETERMINED, LanguageTagError, normalize_tag, primary_language

WINDOW_CHARS = 600  # characters a window holds: lingua is sure of a language from a few hundred
MAX_WINDOWS = 6
# The windows a restricted verdict is checked on: the light detector of all languages is the dearer one per window
# (it weighs 75 languages), and three are as right as six on the articles of six Wikipedias; two are not.
CHECK_WINDOWS = 3
INSTALL_HINT = "pip install 'bertcorpus[langid]'"
# The setting of a job that finds each document's language on its own (extract-books by default): lingua's light
# detector where it is installed, else the guess from the script. How each language was had is its Detected.method.
DETECT = "detect"
BY_DETECTOR, BY_LIGHT_DETECTOR, BY_SCRIPT = "lingua", "lingua-light", "script"


class LanguageIdUnavailable(ValueError):
    """lingua is not installed, or does not know a language asked for."""


@dataclass(frozen=True)
class Detected:
    language: str  # a BCP 47 tag, or und
    confidence: float | None  # in [0, 1]: the language's share of the summed confidence values; None where given
    method: str | None = None  # BY_DETECTOR, BY_LIGHT_DETECTOR or BY_SCRIPT; None where the language was given


def supported_languages() -> list[str]:
    """The ISO 639-1 codes lingua can tell apart."""
    lingua = _lingua()
    return sorted(language.iso_code_639_1.name.lower() for language in lingua.Language.all())


def check_detector(languages: tuple[str, ...] = ()) -> None:
    """Raise LanguageIdUnavailable, in one line, where a detector for these languages cannot be had: before any
    work, without loading a model."""
    _lingua()
    known = set(supported_languages())
    unknown = [code for code in languages if code not in known]
    if unknown:
        raise LanguageIdUnavailable(
            f"language identification does not know {', '.join(unknown)}; it knows these {len(known)}: "
            f"{', '.join(sorted(known))}"
        )
    if len(languages) == 1:
        raise LanguageIdUnavailable(
            f"--languages needs at least two languages to tell apart; for documents that are all in one, pass "
            f"--language {languages[0]} instead of auto"
        )


@functools.cache
def detector(languages: tuple[str, ...] = ()):
    """A lingua detector for these ISO 639-1 codes (all it knows when empty), models loaded once per process."""
    check_detector(languages)
    lingua = _lingua()
    if languages:
        codes = [getattr(lingua.IsoCode639_1, code.upper()) for code in languages]
        builder = lingua.LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
    else:
        builder = lingua.LanguageDetectorBuilder.from_all_languages()
    return builder.with_preloaded_language_models().build()


@functools.cache
def light_detector():
    """lingua's detector of all its languages in low-accuracy mode (trigram models alone, about 90 MB): what a
    restricted verdict is checked with, and what finds a book's language by default. A few hundred characters
    are enough for it, and books and articles have thousands."""
    lingua = _lingua()
    return lingua.LanguageDetectorBuilder.from_all_languages().with_low_accuracy_mode().build()


def _lingua():
    try:
        import lingua
    except ImportError:
        raise LanguageIdUnavailable(f"--language auto needs lingua: {INSTALL_HINT}") from None
    return lingua


@functools.cache  # looked up once: a missing package is not sought again for every document
def detector_installed() -> bool:
    try:
        _lingua()
    except LanguageIdUnavailable:
        return False
    return True


def windows(text: str, size: int = WINDOW_CHARS, count: int = MAX_WINDOWS) -> list[str]:
    """Up to `count` windows of `size` characters spread evenly over the text, cut at spaces where there are
    some; the whole text when it is short."""
    if len(text) <= size * count:
        return [text[i : i + size] for i in range(0, len(text), size)] or [""]
    step = (len(text) - size) / (count - 1)
    out = []
    for k in range(count):
        start = round(k * step)
        if k and (space := text.find(" ", start, start + 40)) >= 0:
            start = space + 1
        out.append(text[start : start + size])
    return out


def detect_language(text: str, languages: tuple[str, ...] = (), min_confidence: float = 0.0) -> Detected:
    """The document's majority language and the confidence in it; und when there is no text to judge, the
    confidence is below min_confidence, or, with `languages`, the light detector of all languages finds another
    majority language (its confidence is then the share that detector gives the listed one)."""
    code, confidence = _majority(detector(languages), text)
    if code is None or confidence < min_confidence:
        return Detected(UNDETERMINED, confidence, BY_DETECTOR)
    if languages:
        outside, share = _majority(light_detector(), text, of=code, count=CHECK_WINDOWS)
        if outside != code:
            return Detected(UNDETERMINED, share, BY_DETECTOR)
    return Detected(with_script(code, text) if code == "zh" else code, confidence, BY_DETECTOR)


def detect_language_lightly(text: str, min_confidence: float = 0.0) -> Detected:
    """The document's majority language by the light detector of all languages; und as detect_language says."""
    code, confidence = _majority(light_detector(), text)
    if code is None or confidence < min_confidence:
        return Detected(UNDETERMINED, confidence, BY_LIGHT_DETECTOR)
    return Detected(with_script(code, text) if code == "zh" else code, confidence, BY_LIGHT_DETECTOR)


def _majority(model, text: str, of: str | None = None, count: int = MAX_WINDOWS) -> tuple[str | None, float]:
    """(the language with the largest confidence summed over `count` windows of the text, weighted by their lengths,
    its share of the sums); None and 0 where there is nothing to judge. With `of`, the share is that language's."""
    totals: dict[str, float] = {}
    weight = 0.0
    for window in windows(text, count=count):
        if not window.strip():
            continue
        for value in model.compute_language_confidence_values(window):
            code = value.language.iso_code_639_1.name.lower()
            totals[code] = totals.get(code, 0.0) + value.value * len(window)
        weight += len(window)
    if not weight:
        return None, 0.0
    code, best = max(sorted(totals.items()), key=lambda kv: kv[1])
    return code, (totals.get(of, 0.0) if of else best) / weight


# The letters of the scripts whose usual language guess_from_script names, and the language.
_SCRIPT_LETTERS = (
    ("ja", re.compile("[\u3040-\u30ff]")),  # kana: Japanese, whose text has CJK ideographs too
    ("zh", re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")),
    ("ko", re.compile("[\uac00-\ud7a3\u1100-\u11ff]")),
    ("en", re.compile("[A-Za-z\u00c0-\u024f]")),
)
_KANA_SHARE = 0.1  # of a text's letters, in kana: Japanese, however many ideographs it has
_GUESS_SAMPLE = 100_000


def guess_from_script(text: str) -> Detected:
    """The usual language of the script most of the text's letters are in: en for Latin letters, zh (zh-Hans or
    zh-Hant) for CJK ideographs, ja where a tenth of them are kana, ko for Hangul; und for any other script or no
    letters. Its confidence is that script's share of the letters. A guess, not a detection: a French book is en."""
    sample = text[:_GUESS_SAMPLE]
    letters = sum(1 for c in sample if c.isalpha())
    if not letters:
        return Detected(UNDETERMINED, 0.0, BY_SCRIPT)
    counts = {code: len(pattern.findall(sample)) for code, pattern in _SCRIPT_LETTERS}
    if counts["ja"] >= _KANA_SHARE * letters:
        return Detected("ja", (counts["ja"] + counts["zh"]) / letters, BY_SCRIPT)
    code = max(("zh", "ko", "en"), key=lambda c: counts[c])
    share = counts[code] / letters
    if share <= 0.5:
        return Detected(UNDETERMINED, share, BY_SCRIPT)
    return Detected(with_script(code, sample) if code == "zh" else code, share, BY_SCRIPT)


@functools.cache  # looked up once: a missing package is not sought again for every Chinese document
def _hans_confidence() -> Callable[[str], float] | None:
    try:
        from zhconv_rs import is_hans_confidence
    except ImportError:
        return None
    return is_hans_confidence


def with_script(code: str, text: str) -> str:
    """zh → zh-Hans or zh-Hant by the text's characters, where zhconv-rs can tell; zh where it cannot."""
    hans_confidence = _hans_confidence()
    if hans_confidence is None:
        return code
    share = hans_confidence(text[: WINDOW_CHARS * MAX_WINDOWS])
    if share != share:  # NaN: too little Chinese to tell
        return code
    return "zh-Hans" if share >= 0.5 else "zh-Hant"


@dataclass(frozen=True)
class LanguageSetting:
    """What a job does for documents that carry no language: a fixed tag, detection (`auto`), or DETECT: the light
    detector where lingua is installed, else the guess from the script."""

    language: str = UNDETERMINED  # a BCP 47 tag, auto or DETECT
    languages: tuple[str, ...] = ()  # with auto: the ISO 639-1 codes to tell apart, all when empty
    min_confidence: float = 0.5

    def resolve(self, given: str | None, text_of: Callable[[], str]) -> Detected | None:
        """The language of a document that carries `given` (None or und where it carries none): None where it is
        given, else the setting's tag (no confidence: nothing was detected) or the verdict on its text, which
        `text_of` gives only then."""
        if given and given != UNDETERMINED:
            return None
        if self.language == "auto":
            return detect_language(text_of(), self.languages, self.min_confidence)
        if self.language == DETECT:
            if detector_installed():
                return detect_language_lightly(text_of(), self.min_confidence)
            return guess_from_script(text_of())
        return Detected(self.language, None)


def parse_language_list(text: str) -> tuple[str, ...]:
    """--languages en,zh,ja → ('en', 'ja', 'zh'): primary subtags, sorted, each a code lingua knows. A list that
    names none ('', ',') is refused: taken as no list, it would load the detector of all languages instead."""
    codes = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            codes.add(primary_language(normalize_tag(part)))
        except LanguageTagError as e:
            raise LanguageIdUnavailable(str(e)) from None
    if not codes:
        raise LanguageIdUnavailable(
            f"{text!r} names no language: give the languages to tell apart (en,zh,ja), or leave --languages out "
            "to tell apart all the detector knows"
        )
    return tuple(sorted(codes))
