"""`bertcorpus vocab --model wordpiece` (the default): word counts → a WordPiece vocab.txt in the BERT,
bert-chinese or compact layout, with tokenizer.json, tokenizer_config.json and the manifest beside it.

    training words ─ HF WordPiece trainer (deterministic, wordpiece/training.py) ─ layout ─ vocab.txt
    held-out words ─ [UNK] rate, wordpieces per word, each language's too
"""

from __future__ import annotations

import hashlib
import sys
import time

from bertcorpus.pipeline.cli.job_skeleton import print_summary
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.pipeline.vocab.counting import CorpusCounts, VocabConfig
from bertcorpus.pipeline.vocab.files import TOKENIZER_FILES, write_vocab_files
from bertcorpus.pipeline.vocab.languages import language_report, language_rows
from bertcorpus.pipeline.vocab.report import counting_record, held_out_record, held_out_sample, input_rows
from bertcorpus.wordpiece.cjk import is_ideograph
from bertcorpus.wordpiece.training import Quality, TrainedVocab, measure, train

# --fill-to-size padding past this share of the lines is warned about: the corpus is then too small for the size asked
# (bert-base-chinese's own file is 0.5% [unused] lines, bert-base-uncased's 3.3%), where a corpus a few hundred lines
# short of 21,128 is not. Filler of any kind past the larger share is warned about too: reserved slots asked for that
# outnumber the tokens learned.
PADDING_WARNING_SHARE = 0.1
FILLER_WARNING_SHARE = 0.5


def train_and_write(
    cfg: VocabConfig, counts: CorpusCounts, smoothing: dict, inputs_skipped: dict, started: float
) -> None:
    """Train, measure, write the files and print the summary."""
    print(
        f"training a {cfg.training.vocab_size:,}-token vocab from {len(counts.train.counts):,} distinct words",
        file=sys.stderr,
    )
    trained = train(counts.train.counts, cfg.training, counts.train.pruned_symbols)
    for line in size_notes(trained, cfg.training.vocab_size):
        print(line, file=sys.stderr)
    quality = measure(trained.tokens, counts.held_out.counts)
    languages = language_report(lambda held: measure(trained.tokens, held), counts, smoothing, quality)
    data = trained.file_bytes()
    record = {**_record(cfg, counts, trained, quality), "languages": languages, "inputs_skipped": inputs_skipped}
    write_vocab_files(cfg.output, data, cfg.training.lowercase, record)
    rows = _summary_rows(cfg, counts, trained, quality, data, time.time() - started)
    rows[-2:-2] = language_rows(languages)
    print_summary("vocab", rows[:1] + documents.skipped_rows(inputs_skipped) + rows[1:])


def size_notes(trained: TrainedVocab, vocab_size: int) -> list[str]:
    """A note where the trainer learned fewer tokens than the size asks, and a warning instead where [unusedN] filler
    is a large share of the lines: --fill-to-size padding past PADDING_WARNING_SHARE, or any filler (reserved slots
    too) past FILLER_WARNING_SHARE."""
    lines = len(trained.tokens)
    if trained.padding > PADDING_WARNING_SHARE * lines or trained.filler > FILLER_WARNING_SHARE * lines:
        padded = f", {trained.padding:,} of them --fill-to-size padding" if trained.padding else ""
        advice = (
            f"train on more text, or leave out --fill-to-size for a vocab of the {lines - trained.padding:,} lines made"
            if trained.padding
            else "lower --vocab-size or --reserved-tokens, or train on more text"
        )
        return [
            f"warning: {trained.filler:,} of the vocab's {lines:,} lines ({trained.filler / lines:.0%}) are "
            f"[unusedN] filler{padded}: a model would spend those embedding rows on nothing "
            f"(the trainer learned {trained.learned:,} tokens from this text); {advice}"
        ]
    if not trained.short:
        return []
    if trained.padding:
        made = f"the last {trained.padding:,} lines are [unusedN] padding"
    else:
        made = f"the vocab has {lines:,} lines, not {vocab_size:,} (--fill-to-size pads it)"
    return [
        f"note: the trainer learned only {trained.learned:,} tokens; {made}; more text or a lower --min-frequency "
        "would give more"
    ]


def _record(cfg: VocabConfig, counts: CorpusCounts, trained: TrainedVocab, quality: Quality) -> dict:
    """What the manifest records beside the files: settings, inputs, counts and the held-out measurement."""
    words, alphabet = counts.train, trained.alphabet
    measured = quality.words > 0
    return {
        **counting_record(cfg, counts),
        "words": {
            "corpus": words.words,
            "distinct_trained_on": trained.trained_words,
            "too_long": words.too_long,
            "pruned": words.pruned_occurrences,
            "beyond_alphabet": alphabet.dropped_occurrences,
            "trainer_scale": trained.scale,
        },
        "tokens": {
            "lines": len(trained.tokens),
            "layout": trained.layout,
            "learned": trained.learned,
            "padding": trained.padding,
            "not_learned": trained.short,
            "filler": trained.filler,
            "filler_share": trained.filler / len(trained.tokens),
            "alphabet": len(alphabet.chars),
            "ideographs": sum(1 for c in alphabet.chars if is_ideograph(c)),
            "continuations": len(alphabet.continuations),
        },
        "held_out": {
            **held_out_record(cfg, counts),
            "unk_word_rate": quality.unk_rate if measured else None,
            "unk_token_share": quality.unk_token_share if measured else None,
            "pieces_per_word": quality.pieces_per_word if measured else None,
        },
    }


def _held_out_rows(cfg: VocabConfig, counts: CorpusCounts, quality: Quality) -> list[tuple[str, str]]:
    if not cfg.holdout_fraction:
        return [("held-out sample", "none (--holdout-fraction 0): the vocab was not measured")]
    sample = held_out_sample(cfg, counts, f"{counts.held_out.words:,} words")
    if not quality.words:
        return [("held-out sample", f"{sample}: too little text to measure the vocab on")]
    if counts.held_out.sampled:
        sample += " (rates from a hash sample of its distinct words)"
    return [
        ("held-out sample", sample),
        ("[UNK] rate", f"{quality.unk_rate:.4%} of words, {quality.unk_token_share:.4%} of wordpieces"),
        ("wordpieces per word", f"{quality.pieces_per_word:.4f}"),
    ]


def _summary_rows(
    cfg: VocabConfig, counts: CorpusCounts, trained: TrainedVocab, quality: Quality, data: bytes, seconds: float
) -> list[tuple[str, str]]:
    words, alphabet = counts.train, trained.alphabet
    rows = input_rows(cfg, counts)
    rows.append(("corpus words", f"{words.words:,} ({trained.trained_words:,} distinct trained on)"))
    dropped = []
    if words.too_long:
        dropped.append(f"{words.too_long:,} over 200 characters")
    if alphabet.dropped_occurrences:
        dropped.append(
            f"{alphabet.dropped_occurrences:,} occurrences of {alphabet.dropped_words:,} words with one of "
            f"{alphabet.dropped_chars:,} characters beyond --limit-alphabet (or ideographs seen fewer than "
            "--min-ideograph-count times)"
        )
    if words.pruned_occurrences:
        dropped.append(f"{words.pruned_occurrences:,} of {words.pruned_words:,} rare words (--max-words)")
    if dropped:
        rows.append(("words not trained on", "; ".join(dropped)))
    if trained.scale > 1:
        rows.append(("trainer counts", f"divided by {trained.scale} (corpus beyond the trainer's word budget)"))
    rows.append(("alphabet", f"{len(alphabet.chars):,} characters + {len(alphabet.continuations):,} ##continuations"))
    # one count of [unusedN] filler, as the warning gives it: reserved slots, padding and alignment together
    special = len(trained.tokens) - trained.learned - trained.filler
    filler = f" + {trained.filler:,} [unusedN] filler" if trained.filler else ""
    parts = [f"{trained.padding:,} --fill-to-size padding"] if trained.padding else []
    if trained.aligned:
        parts.append(f"{trained.aligned:,} to a multiple of {cfg.training.pad_to_multiple}")
    if parts:
        filler += f" ({', '.join(parts)})"
    rows.append(
        (
            "vocab",
            f"{len(trained.tokens):,} lines ({trained.layout} layout: {special:,} special"
            f" + {trained.learned:,} learned{filler})",
        )
    )
    rows += _held_out_rows(cfg, counts, quality)
    rows += [
        (
            "output",
            f"{cfg.output} (sha256 {hashlib.sha256(data).hexdigest()[:16]}…), with "
            f"{', '.join(TOKENIZER_FILES)} and {output.MANIFEST} beside it",
        ),
        ("time", f"{seconds:.1f} s"),
    ]
    return rows
