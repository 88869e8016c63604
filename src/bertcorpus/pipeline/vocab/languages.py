"""The vocab measured for each language apart, on its own held-out words, and the languages it serves badly.

A measure is a function of held-out counts: WordPiece's of words (wordpiece/training.py, Quality), a BPE's or
Unigram's of units (wordpiece/subword_quality.py, PieceQuality); each gives the figures its manifest records. A
language mostly of CJK characters is measured per character, as a BPE's or Unigram's words are its sentences there.
"""

from __future__ import annotations

from collections.abc import Callable

from bertcorpus.pipeline.vocab.counting import CorpusCounts

# A language is served badly when more of its held-out wordpieces are [UNK] than this, or its words take this many
# times the pieces of the best-served language's.
BAD_UNK_SHARE = 0.01
BAD_PIECES_RATIO = 2.0


def language_report(
    measure: Callable[[dict], object], counts: CorpusCounts, smoothing: dict[str, dict], overall, counted: str = "words"
) -> dict[str, dict]:
    """{language: its training words and shares (smoothed ones with --language-sampling-alpha), how many held-out
    `counted` it has, and the measure of those (its `record()`)}. `overall` is the measure of every held-out word,
    which is a language's own where it holds them all."""
    report = {}
    for language in sorted(set(counts.held_out_by_language) | set(smoothing)):
        entry = dict(smoothing.get(language, {}))
        held = counts.held_out_by_language.get(language)
        if held is None:
            quality = measure({})
        elif held.words == counts.held_out.words:  # the same words, added alike: the same sample and measure
            quality = overall
        else:
            quality = measure(held.counts)
        entry[f"held_out_{counted}"] = held.words if held is not None else 0
        entry.update(quality.record())
        report[language] = entry
    return report


def served_badly(report: dict[str, dict]) -> list[str]:
    """The languages the vocab serves badly, each with why: a high share of [UNK] (or of bytes of a character), or
    many pieces per word (among the languages measured per word)."""
    measured = _measured(report)
    by_word = [e["pieces_per_word"] for e in measured.values() if not e.get("cjk")]
    best = min(by_word, default=0.0)
    bad = []
    for lang, e in measured.items():
        why = []
        if e["unk_token_share"] > BAD_UNK_SHARE:
            why.append(f"{e['unk_token_share']:.2%} [UNK]")
        if (e.get("byte_fallback_share") or 0) > BAD_UNK_SHARE:
            why.append(f"{e['byte_fallback_share']:.2%} pieces of a character")
        if not e.get("cjk") and e["pieces_per_word"] > BAD_PIECES_RATIO * best:
            why.append(f"{e['pieces_per_word']:.2f} pieces per word, against {best:.2f} at best")
        if why:
            bad.append(f"{lang} ({', '.join(why)})")
    return bad


def language_rows(report: dict[str, dict]) -> list[tuple[str, str]]:
    if len(report) < 2:
        return []
    measured = _measured(report)
    rows = [("by language", ", ".join(_figures(lang, e) for lang, e in measured.items()))]
    if bad := served_badly(report):
        rows.append(("languages served badly", "; ".join(bad)))
    return rows


def _figures(lang: str, e: dict) -> str:
    if "pieces_per_character" not in e:
        return f"{lang} {e['unk_token_share']:.2%} [UNK], {e['pieces_per_word']:.2f} pieces/word"
    pieces = f"{e['pieces_per_character']:.2f} pieces/char" if e["cjk"] else f"{e['pieces_per_word']:.2f} pieces/word"
    return f"{lang} {e['unk_token_share']:.2%} [UNK], {e['byte_fallback_share']:.2%} bytes, {pieces}"


def _measured(report: dict[str, dict]) -> dict[str, dict]:
    """The languages that had held-out words to measure the vocab on."""
    return {lang: e for lang, e in report.items() if e["pieces_per_word"] is not None}
