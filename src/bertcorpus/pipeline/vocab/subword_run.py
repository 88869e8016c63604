"""`bertcorpus vocab --model bpe|unigram`: pre-token counts → a tokenizer's folder, as a model's tokenizer is
published: tokenizer.json, tokenizer_config.json and special_tokens_map.json, then the manifest.

    training pre-tokens ─ BpeTrainer or SentencePiece's trainer (deterministic) ─ ids ─ tokenizer.json, configs
    held-out units ─ pieces per word and per character, [UNK] and byte shares, each language's too

The training is wordpiece/subword_vocab.py's, the measure wordpiece/subword_quality.py's. create --tokenizer reads
the folder with no flag (its configs name every special token), and so does AutoTokenizer.from_pretrained.
"""

from __future__ import annotations

import hashlib
import sys
import time

from bertcorpus.pipeline.cli.job_skeleton import print_summary
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.pipeline.vocab.counting import CorpusCounts, VocabConfig
from bertcorpus.pipeline.vocab.files import VocabFiles, write_files
from bertcorpus.pipeline.vocab.languages import language_report, language_rows
from bertcorpus.pipeline.vocab.report import counting_record, held_out_record, held_out_sample, input_rows
from bertcorpus.wordpiece.pre_tokens import BPE, MAX_PRE_TOKEN_CHARS
from bertcorpus.wordpiece.special_sets import config_files
from bertcorpus.wordpiece.subword_quality import PieceQuality, measure_units
from bertcorpus.wordpiece.subword_vocab import SubwordConfig, SubwordVocab, train_subword

MODEL_NAMES = {BPE: "byte-level BPE", "unigram": "Unigram model"}
# Reserved ids past this share of all are warned about: they outnumber what was learned.
RESERVED_WARNING_SHARE = 0.5


def train_and_write(
    cfg: VocabConfig,
    counts: CorpusCounts,
    files: VocabFiles,
    smoothing: dict,
    inputs_skipped: dict,
    started: float,
) -> None:
    """Train, measure, write the folder and print the summary."""
    config: SubwordConfig = cfg.training
    print(
        f"training a {config.vocab_size:,}-id {MODEL_NAMES[config.model]} from {len(counts.train.counts):,} "
        "distinct pre-tokens",
        file=sys.stderr,
    )
    trained = train_subword(counts.train.counts, config)
    for line in size_notes(trained, config):
        print(line, file=sys.stderr)

    def measure(held: dict[str, int]) -> PieceQuality:
        return measure_units(trained.tokenizer, held, trained.specials.get("unk"), trained.byte_pieces)

    quality = measure(counts.held_out.counts)
    languages = language_report(measure, counts, smoothing, quality, counted="units")
    contents = {"tokenizer.json": trained.json_bytes(), **config_files(config.specials, config.lowercase)}
    record = {
        **_record(cfg, counts, trained, quality),
        "languages": languages,
        "inputs_skipped": inputs_skipped,
        "tokenizer_file": files.main,
    }
    write_files(files, contents, record)
    rows = _summary_rows(cfg, counts, trained, quality, files, contents, time.time() - started)
    rows[-2:-2] = language_rows(languages)
    print_summary("vocab", rows[:1] + documents.skipped_rows(inputs_skipped) + rows[1:])


def size_notes(trained: SubwordVocab, config: SubwordConfig) -> list[str]:
    """A note where the trainer learned fewer tokens than the size leaves room for, and a warning where reserved ids
    are most of the vocab."""
    ids = len(trained.tokens)
    lines = []
    if trained.reserved + trained.aligned > RESERVED_WARNING_SHARE * ids:
        lines.append(
            f"warning: {trained.reserved + trained.aligned:,} of the tokenizer's {ids:,} ids are reserved: a model "
            "would spend most of its embedding rows on nothing; lower --reserved-tokens or --pad-to-multiple"
        )
    if trained.short:
        lower = " (or a lower --min-frequency)" if config.model == BPE else ""
        lines.append(
            f"note: the trainer learned only {trained.learned:,} tokens; the tokenizer has {ids:,} ids, not "
            f"{config.vocab_size:,}; more text{lower} would give more"
        )
    return lines


def _record(cfg: VocabConfig, counts: CorpusCounts, trained: SubwordVocab, quality: PieceQuality) -> dict:
    """What the manifest records beside the files: settings, inputs, counts, the ids and the held-out measure."""
    words, config = counts.train, cfg.training
    return {
        **counting_record(cfg, counts),
        "pre_tokens": {
            "corpus": words.words,
            "distinct_trained_on": trained.trained_words,
            "too_long": words.too_long,
            "pruned": words.pruned_occurrences,
            "trainer_scale": trained.scale,
        },
        "tokens": {
            "ids": len(trained.tokens),
            "model": config.model,
            "special_tokens": config.special_tokens,
            "specials": trained.specials,
            "learned": trained.learned,
            "reserved": trained.reserved,
            "aligned": trained.aligned,
            "not_learned": trained.short,
            "filler_share": (trained.reserved + trained.aligned) / len(trained.tokens),
            "byte_fallback": config.model == BPE or config.byte_fallback,
        },
        "held_out": {
            **held_out_record(cfg, counts, "units"),
            "words": quality.words,
            "characters": quality.characters,
            **quality.record(),
        },
    }


def _summary_rows(
    cfg: VocabConfig,
    counts: CorpusCounts,
    trained: SubwordVocab,
    quality: PieceQuality,
    files: VocabFiles,
    contents: dict[str, bytes],
    seconds: float,
) -> list[tuple[str, str]]:
    words, config = counts.train, cfg.training
    rows = input_rows(cfg, counts)
    rows.append(("corpus pre-tokens", f"{words.words:,} ({trained.trained_words:,} distinct trained on)"))
    dropped = []
    if words.too_long:
        dropped.append(f"{words.too_long:,} over {MAX_PRE_TOKEN_CHARS:,} characters")
    if words.pruned_occurrences:
        dropped.append(f"{words.pruned_occurrences:,} of {words.pruned_words:,} rare pre-tokens (--max-words)")
    if dropped:
        rows.append(("pre-tokens not trained on", "; ".join(dropped)))
    if trained.scale > 1:
        rows.append(("trainer counts", f"divided by {trained.scale} (corpus beyond the trainer's word budget)"))
    reserved = f" + {trained.reserved:,} reserved" if trained.reserved else ""
    if trained.aligned:
        reserved += f" + {trained.aligned:,} reserved to a multiple of {config.pad_to_multiple}"
    rows.append(
        (
            "tokenizer",
            f"{len(trained.tokens):,} ids ({MODEL_NAMES[config.model]}, {config.special_tokens} special tokens: "
            f"{len(config.specials.tokens)} special + {trained.learned:,} learned{reserved})",
        )
    )
    rows += _held_out_rows(cfg, counts, quality)
    others = [name for name in files.names if name != files.main]
    rows += [
        (
            "output",
            f"{files.folder} ({files.main} sha256 {hashlib.sha256(contents[files.main]).hexdigest()[:16]}…), with "
            f"{', '.join(others)} and {output.MANIFEST}",
        ),
        ("time", f"{seconds:.1f} s"),
    ]
    return rows


def _held_out_rows(cfg: VocabConfig, counts: CorpusCounts, quality: PieceQuality) -> list[tuple[str, str]]:
    if not cfg.holdout_fraction:
        return [("held-out sample", "none (--holdout-fraction 0): the tokenizer was not measured")]
    sample = held_out_sample(cfg, counts, f"{quality.words:,} words")
    if not quality.measured:
        return [("held-out sample", f"{sample}: too little text to measure the tokenizer on")]
    if counts.held_out.sampled:
        sample += " (figures from a hash sample of its distinct units)"
    per = f"{quality.pieces_per_word:.4f}, {quality.pieces_per_character:.4f} per character"
    return [
        ("held-out sample", sample),
        (
            "[UNK] and bytes",
            f"{quality.unk_token_share:.4%} of pieces [UNK], {quality.byte_fallback_share:.4%} pieces of a character",
        ),
        ("pieces per word", per),
    ]
