"""Offline language identification (`--language auto`), with lingua's models as pip installs them.

A document is judged on a few windows of its text spread from start to end, not on all of it: a long document's
language is clear from a few thousand characters, and the windows make a mixed document's majority language win.
Each window's confidence values are summed, weighted by the window's length; the document gets the language with
the largest sum, and that language's share of the sums as its confidence. Below the caller's minimum confidence
the document is `und`: never silently assigned to a language it may not be in.

Chinese is told apart by script (zh-Hans or zh-Hant) where zhconv-rs is installed, from the share of characters
that only one script uses.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from bertcorpus.transforms.languages import UNDETERMINED, LanguageTagError, normalize_tag, primary_language

WINDOW_CHARS = 600  # characters a window holds: lingua is sure of a language from a few hundred
MAX_WINDOWS = 6
INSTALL_HINT = "pip install 'bertcorpus[langid]'"


class LanguageIdUnavailable(ValueError):
    """lingua is not installed, or does not know a language asked for."""


@dataclass(frozen=True)
class Detected:
    language: str  # a BCP 47 tag, or und
    confidence: float | None  # in [0, 1]: the language's share of the summed confidence values; None where given


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


def _lingua():
    try:
        import lingua
    except ImportError:
        raise LanguageIdUnavailable(f"--language auto needs lingua: {INSTALL_HINT}") from None
    return lingua


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
    """The document's majority language and the confidence in it; und when there is no text to judge or the
    confidence is below min_confidence."""
    model = detector(languages)
    totals: dict[str, float] = {}
    weight = 0.0
    for window in windows(text):
        if not window.strip():
            continue
        for value in model.compute_language_confidence_values(window):
            code = value.language.iso_code_639_1.name.lower()
            totals[code] = totals.get(code, 0.0) + value.value * len(window)
        weight += len(window)
    if not weight:
        return Detected(UNDETERMINED, 0.0)
    code, best = max(sorted(totals.items()), key=lambda kv: kv[1])
    confidence = best / weight
    if confidence < min_confidence:
        return Detected(UNDETERMINED, confidence)
    return Detected(with_script(code, text) if code == "zh" else code, confidence)


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
    """What a job does for documents that carry no language: a fixed tag, or detection (`auto`)."""

    language: str = UNDETERMINED  # a BCP 47 tag, or auto
    languages: tuple[str, ...] = ()  # with auto: the ISO 639-1 codes to tell apart, all when empty
    min_confidence: float = 0.5

    def resolve(self, given: str | None, text_of: Callable[[], str]) -> Detected | None:
        """The language of a document that carries `given` (None or und where it carries none): None where it is
        given, else the setting's tag (no confidence: nothing was detected) or the detector's verdict on its text,
        which `text_of` gives only then."""
        if given and given != UNDETERMINED:
            return None
        if self.language != "auto":
            return Detected(self.language, None)
        return detect_language(text_of(), self.languages, self.min_confidence)


def parse_language_list(text: str) -> tuple[str, ...]:
    """--languages en,zh,ja → ('en', 'ja', 'zh'): primary subtags, sorted, each a code lingua knows."""
    codes = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            codes.add(primary_language(normalize_tag(part)))
        except LanguageTagError as e:
            raise LanguageIdUnavailable(str(e)) from None
    return tuple(sorted(codes))
