"""`bertcorpus vocab`: documents → word counts → a WordPiece vocab.txt (BERT or compact layout), with the
tokenizer files and manifest beside it.

    input files ─ read documents ─ sample by id hash ─ hold out lines ─ count words
        ├─ training words ─ HF WordPiece trainer (deterministic) ─ layout ─ vocab.txt, tokenizer files, manifest
        └─ held-out words ─ [UNK] rate, wordpieces per word

This module is the command: its flags, the run and the summary. Counting is in pipeline/vocab/counting.py (in
this process) and pipeline/vocab/job.py (--count-with-beam); training in wordpiece/training.py; each language's
measure in pipeline/vocab/languages.py; the files it writes in pipeline/vocab/files.py.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections import Counter

from bertcorpus.pipeline.cli.shared_flags import (
    LOCAL_FOLDERS_HELP,
    add_files,
    add_input_format,
    add_lower_case,
    add_reuse,
)
from bertcorpus.pipeline.inputs.discovery import find_inputs
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.pipeline.sinks.up_to_date import Reuse
from bertcorpus.pipeline.vocab.counting import CorpusCounts, VocabConfig, count_in_process
from bertcorpus.pipeline.vocab.files import JOB, TOKENIZER_FILES, beside, check_outputs, write_vocab_files
from bertcorpus.pipeline.vocab.job import count_with_beam
from bertcorpus.pipeline.vocab.languages import language_report, language_rows
from bertcorpus.wordpiece.cjk import is_ideograph
from bertcorpus.wordpiece.training import (
    BERT_DEFAULT_RESERVED,
    LAYOUTS,
    MIN_IDEOGRAPH_COUNT,
    Quality,
    TrainedVocab,
    TrainingConfig,
    measure,
    train,
)

ACCEPTS_BEAM_OPTIONS = True
# Far beyond any BERT vocab. HF's trainer allocates memory for every line before it starts, so a size mistyped by
# a few digits would abort it (a Rust panic, not one line) after all the counting.
MAX_VOCAB_SIZE = 1 << 20
# --fill-to-size padding past this share of the lines is warned about: the corpus is then too small for the size asked
# (bert-base-chinese's own file is 0.5% [unused] lines, bert-base-uncased's 3.3%), where a corpus a few hundred lines
# short of 21,128 is not. Filler of any kind past the larger share is warned about too: reserved slots asked for that
# outnumber the tokens learned.
PADDING_WARNING_SHARE = 0.1
FILLER_WARNING_SHARE = 0.5


# ------------------------------------------------------------------------------------------- command line


def add_arguments(parser) -> None:
    from bertcorpus.pipeline.cli.shared_flags import BooleanFlag

    files = add_files(
        parser,
        metavar="GLOB",
        output_default="vocab.txt",
        inputs="input files, globs or directories (local or any Beam filesystem, e.g. gs://); "
        f"{LOCAL_FOLDERS_HELP}; an extraction's output directory stands for the documents its "
        "manifest lists",
        output="the vocab file to write, in a folder of its own: tokenizer.json, "
        "tokenizer_config.json and manifest.json go beside it (default: vocab.txt)",
    )
    add_reuse(files)
    add_input_format(files)
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument(
        "--vocab-size",
        type=int,
        default=30000,
        help="lines in vocab.txt: special, reserved and learned tokens together (default: 30000)",
    )
    add_lower_case(
        vocab,
        "lower-case and strip accents, like bert-base-uncased; --no-do-lower-case keeps case and "
        "accents (default: lower-case)",
    )
    vocab.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="auto",
        help="bert: [PAD]=0, [unused0..98]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, "
        "[unused99..] after them, then learned tokens; bert-chinese: bert-base-chinese's, [PAD]=0, "
        "[unused1..99]=1..99, [UNK]..[MASK]=100..103, <S>, <T>, then learned tokens; compact: the five special "
        "tokens first, then any reserved slots, then learned tokens; auto: bert-chinese where most words are "
        "CJK ideographs, else bert (default: auto)",
    )
    vocab.add_argument(
        "--reserved-tokens",
        type=int,
        default=None,
        metavar="N",
        help=f"[unusedN] slots to keep free for later use (default: {BERT_DEFAULT_RESERVED} for "
        "bert, as in the original vocab; 0 for compact; bert-chinese has its own 99)",
    )
    vocab.add_argument(
        "--fill-to-size",
        action="store_true",
        help="where the trainer learns fewer tokens than --vocab-size asks, fill the rest with [unusedN] lines so "
        "that the file has exactly --vocab-size lines (default: off, the vocab is as long as what was learned)",
    )
    vocab.add_argument(
        "--min-ideograph-count",
        type=int,
        default=MIN_IDEOGRAPH_COUNT,
        metavar="N",
        help="every CJK ideograph seen at least N times gets a line, beyond --limit-alphabet: Chinese text needs "
        "thousands of them, each a token of its own (default: %(default)s)",
    )
    vocab.add_argument(
        "--pad-to-multiple",
        type=int,
        default=1,
        metavar="N",
        help="add [unusedN] lines after the --vocab-size lines until their count is a multiple of N, e.g. 64 for "
        "tensor-core shapes as ModernBERT advises; the layout of the lines before is unchanged (default: 1, "
        "no padding)",
    )
    vocab.add_argument(
        "--min-frequency",
        type=int,
        default=2,
        help="least count of a symbol pair for the trainer to merge it (default: 2)",
    )
    vocab.add_argument(
        "--limit-alphabet",
        type=int,
        default=1000,
        help="keep the N most frequent characters other than CJK ideographs (see --min-ideograph-count); words "
        "with any other character are not trained on (they become [UNK]) (default: 1000)",
    )
    scale = parser.add_argument_group("sampling and scale")
    scale.add_argument(
        "--sample-fraction",
        type=float,
        default=1.0,
        help="train on this share of the documents, chosen by a stable hash of their ids (default: 1.0, all)",
    )
    scale.add_argument(
        "--max-documents",
        type=int,
        default=0,
        help="stop after this many sampled documents, in input order (files sorted by path); in-process "
        "counting only (default: 0, no limit)",
    )
    scale.add_argument(
        "--holdout-fraction",
        type=float,
        default=0.01,
        help="share of the lines of each sampled document held out of training (drawn with --seed) "
        "to measure the vocab on (default: 0.01; 0 skips the measurement)",
    )
    scale.add_argument(
        "--seed", type=int, default=12345, help="salt of the sampling and hold-out hashes (default: 12345)"
    )
    scale.add_argument(
        "--max-words",
        type=int,
        default=1_000_000,
        help="distinct words held while counting and trained on; past it the rarest are pruned. "
        "Training needs ~1.6 KB per distinct word (default: 1M)",
    )
    scale.add_argument(
        "--language-sampling-alpha",
        type=float,
        default=1.0,
        metavar="A",
        help="scale each language's word counts to its smoothed share of the words, p^A renormalised, as "
        "multilingual BERT's vocab was (0.7): rare languages get more of the vocab; in-process counting only "
        "(default: 1, every word as it comes)",
    )
    scale.add_argument(
        "--count-with-beam",
        action=BooleanFlag,
        default=False,
        help="count words with a Beam job (Beam options such as --runner apply), then train here (default: off)",
    )
    scale.add_argument(
        "--counts-dir",
        help="where the Beam job writes its counts; required for remote runners (default: a temporary "
        "directory, removed afterwards)",
    )


def config_from_args(args) -> VocabConfig:
    layout = args.layout
    if layout == "bert-chinese" and args.reserved_tokens is not None:
        raise ValueError("--layout bert-chinese has bert-base-chinese's 99 reserved lines; leave --reserved-tokens out")
    reserved = (
        args.reserved_tokens
        if args.reserved_tokens is not None
        else (BERT_DEFAULT_RESERVED if layout in ("bert", "auto") else 0)
    )
    training = TrainingConfig(
        vocab_size=args.vocab_size,
        lowercase=args.do_lower_case,
        layout=layout,
        reserved_tokens=reserved,
        min_frequency=args.min_frequency,
        limit_alphabet=args.limit_alphabet,
        pad_to_multiple=args.pad_to_multiple,
        min_ideograph_count=args.min_ideograph_count,
        fill_to_size=args.fill_to_size,
    )
    checks = [
        (args.vocab_size <= MAX_VOCAB_SIZE, f"--vocab-size must be at most {MAX_VOCAB_SIZE:,}"),
        # before training.check, which lists the reserved lines
        (reserved <= MAX_VOCAB_SIZE, f"--reserved-tokens must be at most {MAX_VOCAB_SIZE:,}"),
        (0 < args.sample_fraction <= 1, "--sample-fraction must be in (0, 1]"),
        (0 <= args.holdout_fraction < 1, "--holdout-fraction must be in [0, 1)"),
        (args.max_documents >= 0, "--max-documents must be >= 0"),
        (args.max_words >= 1000, "--max-words must be at least 1000"),
        (
            not (args.count_with_beam and args.max_documents),
            "--max-documents needs in-process counting (input order); use --sample-fraction with --count-with-beam",
        ),
        (
            0 < args.language_sampling_alpha <= 1,
            f"--language-sampling-alpha must be in (0, 1], not {args.language_sampling_alpha:g} (1 counts every "
            "word as it comes, 0.7 is multilingual BERT's)",
        ),
        (
            not (args.count_with_beam and args.language_sampling_alpha != 1),
            "--language-sampling-alpha counts each language apart in this process; leave out --count-with-beam",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    training.check()
    return VocabConfig(
        inputs=list(args.input),
        output=args.output,
        training=training,
        input_format=args.input_format,
        sample_fraction=args.sample_fraction,
        max_documents=args.max_documents,
        holdout_fraction=args.holdout_fraction,
        seed=args.seed,
        max_words=args.max_words,
        count_with_beam=args.count_with_beam,
        counts_dir=args.counts_dir,
        language_sampling_alpha=args.language_sampling_alpha,
    )


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import print_summary
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.errors import UserError

    started = time.time()
    cfg = config_from_args(args)
    if beam_args and not cfg.count_with_beam:
        raise UserError(f"Beam options ({' '.join(beam_args)}) apply only with --count-with-beam")
    options = runners.pipeline_options(beam_args)
    output.check_apart([cfg.output, cfg.counts_dir], cfg.inputs)
    if not output.is_remote(cfg.output) and os.path.isdir(cfg.output):
        raise UserError(f"--output {cfg.output} is a directory; name the vocab file, e.g. {cfg.output}/vocab.txt")
    dry_run = runners.is_dry_run(options)
    found, outcome = None, "run"
    if args.reuse and not dry_run:
        found = find_inputs(cfg.inputs)
        outcome = Reuse(cfg.describe(), found.files).outcome(JOB, cfg.output, beside(cfg.output, output.MANIFEST))
        if outcome == "keep":
            return 0
    if not dry_run:
        check_outputs(cfg.output, args.overwrite or outcome == "replace")
        output.check_writable(cfg.output, output.temporary_name(cfg.output))
    found = found or find_inputs(cfg.inputs, allow_missing=dry_run)
    found.print_note()
    if not found.files and not dry_run:
        raise UserError("no input files given")
    if cfg.count_with_beam:
        # A dry run needs only the job's shape: remote patterns stay as given.
        counts = count_with_beam(
            cfg, [p for p, _ in found.files] or list(cfg.inputs), options, sum(size for _, size in found.files)
        )
        if counts is None:
            return 0
    else:
        counts = count_in_process(found.files, cfg)
    smoothing = counts.smoothed_training(cfg.language_sampling_alpha) if counts.train_by_language is not None else {}
    if not counts.train.counts:
        skipped = "".join(
            f"; {n:,} {kind} {reason}"
            for kind, set_aside in (("skipped as", "skipped"), ("unreadable:", "errors"))
            for reason, n in sorted(_set_aside(counts, set_aside).items())
        )
        raise UserError(
            f"no words to train on: {counts.tallies['documents_read']:,} documents read from "
            f"{', '.join(cfg.inputs)} ({counts.tallies['documents_sampled']:,} for training{skipped}); "
            "nothing was written"
        )
    print(
        f"training a {cfg.training.vocab_size:,}-token vocab from {len(counts.train.counts):,} distinct words",
        file=sys.stderr,
    )
    trained = train(counts.train.counts, cfg.training, counts.train.pruned_symbols)
    for line in size_notes(trained, cfg.training.vocab_size):
        print(line, file=sys.stderr)
    quality = measure(trained.tokens, counts.held_out.counts)
    languages = language_report(trained.tokens, counts, smoothing, quality)
    data = trained.file_bytes()
    record = {
        **_record(cfg, counts, trained, quality),
        "languages": languages,
        "inputs_skipped": found.skipped_counts(),
    }
    write_vocab_files(cfg.output, data, cfg.training.lowercase, record)
    rows = _summary_rows(cfg, counts, trained, quality, data, time.time() - started)
    rows[-2:-2] = language_rows(languages)
    print_summary("vocab", rows[:1] + documents.skipped_rows(record["inputs_skipped"]) + rows[1:])
    return 0


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


def _set_aside(counts: CorpusCounts, kind: str) -> Counter:
    """Records of the input files that were not documents, by reason: skipped (a null text), or errors (records
    that could not be read)."""
    total = Counter()
    for f in counts.files:
        total.update(f.get(kind, {}))
    return total


def _record(cfg: VocabConfig, counts: CorpusCounts, trained: TrainedVocab, quality: Quality) -> dict:
    """What the manifest records beside the files: settings, inputs, counts and the held-out measurement."""
    tallies, words, alphabet = counts.tallies, counts.train, trained.alphabet
    measured = quality.words > 0
    return {
        "config": cfg.describe(),
        "inputs": counts.files,
        "documents": {
            "read": tallies["documents_read"],
            "sampled": tallies["documents_sampled"],
            "not_sampled": tallies["documents_unsampled"],
            "skipped": dict(_set_aside(counts, "skipped")),
            "errors": dict(_set_aside(counts, "errors")),
            "files_not_read": counts.files_not_read,
        },
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
            "fraction_of_lines": cfg.holdout_fraction,
            "lines": tallies["heldout_lines"],
            "documents": tallies["heldout_documents"],
            "words": counts.held_out.words,
            "distinct_words_sampled": counts.held_out.sampled,
            "unk_word_rate": quality.unk_rate if measured else None,
            "unk_token_share": quality.unk_token_share if measured else None,
            "pieces_per_word": quality.pieces_per_word if measured else None,
        },
    }


def _held_out_rows(cfg: VocabConfig, counts: CorpusCounts, quality: Quality) -> list[tuple[str, str]]:
    if not cfg.holdout_fraction:
        return [("held-out sample", "none (--holdout-fraction 0): the vocab was not measured")]
    tallies = counts.tallies
    sample = (
        f"{tallies['heldout_lines']:,} lines ({cfg.holdout_fraction:.2%} of the lines, drawn per document) "
        f"from {tallies['heldout_documents']:,} documents, {counts.held_out.words:,} words"
    )
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
    tallies, words, alphabet = counts.tallies, counts.train, trained.alphabet
    replaced = sum(f.get("replaced_chars", 0) for f in counts.files)
    rows = [
        ("input", f"{len(counts.files):,} files, {sum(f['size'] for f in counts.files) / 1e6:,.1f} MB"),
        ("documents read", f"{tallies['documents_read']:,}"),
    ]
    if tallies["documents_unsampled"]:
        rows.append(("  not sampled", f"{tallies['documents_unsampled']:,}"))
    rows += [(f"  skipped ({reason})", f"{n:,}") for reason, n in sorted(_set_aside(counts, "skipped").items())]
    rows += [
        (f"  unreadable records ({reason})", f"{n:,}") for reason, n in sorted(_set_aside(counts, "errors").items())
    ]
    if cfg.max_documents and tallies["documents_sampled"] >= cfg.max_documents:
        rows.append(
            ("stopped", f"at --max-documents {cfg.max_documents:,}; {counts.files_not_read:,} files not opened")
        )
    if replaced:
        rows.append(("invalid UTF-8", f"{replaced:,} characters replaced by U+FFFD"))
    if unknown := sum(f.get("unknown_language_tags", 0) for f in counts.files):
        rows.append(("language tags", f"{unknown:,} unknown, read as und"))
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
    head = len(trained.tokens) - trained.learned - trained.padding - trained.aligned
    padding = f" + {trained.padding:,} [unusedN] padding" if trained.padding else ""
    if trained.aligned:
        padding += f" + {trained.aligned:,} [unusedN] to a multiple of {cfg.training.pad_to_multiple}"
    rows.append(
        (
            "vocab",
            f"{len(trained.tokens):,} lines ({trained.layout} layout: {head:,} special/reserved"
            f" + {trained.learned:,} learned{padding})",
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
