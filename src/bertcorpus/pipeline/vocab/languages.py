"""The vocab measured for each language apart, on its own held-out words, and the languages it serves badly."""

from __future__ import annotations

from bertcorpus.pipeline.vocab.counting import CorpusCounts
from bertcorpus.wordpiece.training import Quality, measure

# A language is served badly when more of its held-out wordpieces are [UNK] than this, or its words take this many
# times the pieces of the best-served language's.
BAD_UNK_SHARE = 0.01
BAD_PIECES_RATIO = 2.0


def language_report(
    tokens: list[str], counts: CorpusCounts, smoothing: dict[str, dict], overall: Quality
) -> dict[str, dict]:
    """{language: its training words and shares (smoothed ones with --language-sampling-alpha), and the vocab
    measured on its held-out words: [UNK] rates and wordpieces per word}. `overall` is the measure of every
    held-out word, which is a language's own where it holds them all."""
    report = {}
    for language in sorted(set(counts.held_out_by_language) | set(smoothing)):
        entry = dict(smoothing.get(language, {}))
        held = counts.held_out_by_language.get(language)
        if held is None:
            quality = Quality(0, 0.0, 0.0)
        elif held.words == counts.held_out.words:  # the same words, added alike: the same sample and measure
            quality = overall
        else:
            quality = measure(tokens, held.counts)
        entry["held_out_words"] = held.words if held is not None else 0
        measured = quality.words > 0
        entry["unk_word_rate"] = round(quality.unk_rate, 6) if measured else None
        entry["unk_token_share"] = round(quality.unk_token_share, 6) if measured else None
        entry["pieces_per_word"] = round(quality.pieces_per_word, 4) if measured else None
        report[language] = entry
    return report


def served_badly(report: dict[str, dict]) -> list[str]:
    """The languages the vocab serves badly, each with why: a high [UNK] share, or many pieces per word."""
    measured = _measured(report)
    if not measured:
        return []
    best = min(e["pieces_per_word"] for e in measured.values())
    bad = []
    for lang, e in measured.items():
        why = []
        if e["unk_token_share"] > BAD_UNK_SHARE:
            why.append(f"{e['unk_token_share']:.2%} [UNK]")
        if e["pieces_per_word"] > BAD_PIECES_RATIO * best:
            why.append(f"{e['pieces_per_word']:.2f} pieces per word, against {best:.2f} at best")
        if why:
            bad.append(f"{lang} ({', '.join(why)})")
    return bad


def language_rows(report: dict[str, dict]) -> list[tuple[str, str]]:
    if len(report) < 2:
        return []
    measured = _measured(report)
    rows = [
        (
            "by language",
            ", ".join(
                f"{lang} {e['unk_token_share']:.2%} [UNK], {e['pieces_per_word']:.2f} pieces/word"
                for lang, e in measured.items()
            ),
        )
    ]
    if bad := served_badly(report):
        rows.append(("languages served badly", "; ".join(bad)))
    return rows


def _measured(report: dict[str, dict]) -> dict[str, dict]:
    """The languages that had held-out words to measure the vocab on."""
    return {lang: e for lang, e in report.items() if e["pieces_per_word"] is not None}
