"""`bertcorpus vocab`: documents → word counts → a WordPiece vocab.txt (BERT, bert-chinese or compact layout) with
the tokenizer files beside it, or a byte-level BPE's or Unigram's tokenizer folder; the manifest last.

    input files ─ read documents ─ sample by id hash ─ hold out lines ─ count words (or pre-tokens)
        ├─ training words ─ the model's trainer (deterministic) ─ ids ─ vocab.txt or tokenizer.json, configs, manifest
        └─ held-out words ─ [UNK] (and byte) shares, pieces per word, each language's too

This module is the command: its flags, their checks and the run up to the counts. Counting is in
pipeline/vocab/counting.py (in this process) and pipeline/vocab/job.py (--count-with-beam); what follows in
pipeline/vocab/wordpiece_run.py (--model wordpiece) or pipeline/vocab/subword_run.py (bpe, unigram), which train
with wordpiece/training.py or wordpiece/subword_vocab.py; each language's measure in pipeline/vocab/languages.py;
the files written in pipeline/vocab/files.py.
"""

from __future__ import annotations

import os
import posixpath
import time

from bertcorpus.pipeline.cli.shared_flags import (
    LOCAL_FOLDERS_HELP,
    add_files,
    add_input_format,
    add_lower_case,
    add_reuse,
)
from bertcorpus.pipeline.inputs.discovery import find_inputs
from bertcorpus.pipeline.sinks import output
from bertcorpus.pipeline.sinks.up_to_date import Reuse
from bertcorpus.pipeline.vocab import subword_run, wordpiece_run
from bertcorpus.pipeline.vocab.counting import WORDPIECE, VocabConfig, count_in_process
from bertcorpus.pipeline.vocab.files import FOLDER_FILES, JOB, check_outputs, folder_outputs, vocab_file_outputs
from bertcorpus.pipeline.vocab.job import count_with_beam
from bertcorpus.pipeline.vocab.report import no_words
from bertcorpus.wordpiece.special_sets import BERT, ROBERTA, SPECIAL_SETS
from bertcorpus.wordpiece.subword_vocab import MODELS, SubwordConfig
from bertcorpus.wordpiece.training import BERT_DEFAULT_RESERVED, LAYOUTS, MIN_IDEOGRAPH_COUNT, TrainingConfig
from bertcorpus.wordpiece.unigram_training import DEFAULT_CHARACTER_COVERAGE

ACCEPTS_BEAM_OPTIONS = True
# Far beyond any BERT vocab. HF's trainer allocates memory for every line before it starts, so a size mistyped by
# a few digits would abort it (a Rust panic, not one line) after all the counting.
MAX_VOCAB_SIZE = 1 << 20
# The special tokens a BPE's or Unigram's folder gets without --special-tokens: RoBERTa's, which both RoBERTa's
# byte-level BPE and XLM-R's Unigram have; ModernBERT's shape is --special-tokens bert.
DEFAULT_SPECIAL_TOKENS = ROBERTA
# Flags of one model only, by their dests: given with another model, they are refused (None or False: not given).
WORDPIECE_ONLY = {
    "layout": "--layout",
    "limit_alphabet": "--limit-alphabet",
    "min_ideograph_count": "--min-ideograph-count",
    "fill_to_size": "--fill-to-size",
}
SUBWORD_ONLY = {"special_tokens": "--special-tokens"}
UNIGRAM_ONLY = {"byte_fallback": "--byte-fallback", "character_coverage": "--character-coverage"}
BPE_AND_WORDPIECE_ONLY = {"min_frequency": "--min-frequency"}


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
        output="wordpiece: the vocab file to write, in a folder of its own: tokenizer.json, "
        "tokenizer_config.json and manifest.json go beside it; bpe and unigram: the folder to write tokenizer.json, "
        "tokenizer_config.json, special_tokens_map.json and manifest.json into, which create --tokenizer and "
        "AutoTokenizer.from_pretrained read (default: vocab.txt for wordpiece; bpe and unigram need one)",
    )
    parser.set_defaults(output=None)  # each model has its own: vocab.txt, or a folder that must be named
    add_reuse(files)
    add_input_format(files)
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument(
        "--model",
        choices=(WORDPIECE, *MODELS),
        default=WORDPIECE,
        help="wordpiece: BERT's vocab.txt; bpe: byte-level BPE as RoBERTa and ModernBERT have it (GPT-2's "
        "pre-tokeniser, every byte a token, no unknown token in use); unigram: SentencePiece's Unigram with "
        "Metaspace ▁ as XLM-R has it, trained by SentencePiece (default: wordpiece)",
    )
    vocab.add_argument(
        "--vocab-size",
        type=int,
        default=30000,
        help="ids of the vocab: special, reserved and learned tokens together, before --pad-to-multiple (default: "
        "30000)",
    )
    add_lower_case(
        vocab,
        "lower-case (wordpiece: and strip accents, like bert-base-uncased); --no-do-lower-case keeps case and "
        "accents (default: lower-case for wordpiece, cased for bpe and unigram, as RoBERTa, ModernBERT and XLM-R "
        "are)",
    )
    parser.set_defaults(do_lower_case=None)  # each model has its own default
    vocab.add_argument(
        "--special-tokens",
        choices=tuple(SPECIAL_SETS),
        default=None,
        help=f"bpe and unigram: {BERT}: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, [CLS] A [SEP] B [SEP] with token "
        f"types 0 and 1 (ModernBERT's specials); {ROBERTA}: <s>=0 <pad>=1 </s>=2 <unk>=3 and <mask> the last id, "
        f"<s> A </s></s> B </s> (RoBERTa's and XLM-R's) (default: {DEFAULT_SPECIAL_TOKENS})",
    )
    vocab.add_argument(
        "--byte-fallback",
        action="store_true",
        help="unigram: a character outside the alphabet becomes its UTF-8 bytes (256 byte pieces, <0x00> to "
        "<0xFF>) instead of the unknown token (default: off, as XLM-R)",
    )
    vocab.add_argument(
        "--character-coverage",
        type=float,
        default=None,
        metavar="SHARE",
        help="unigram: the alphabet holds the most frequent characters that make up this share of the text's "
        f"(SentencePiece's own) (default: {DEFAULT_CHARACTER_COVERAGE})",
    )
    vocab.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=None,
        help="wordpiece: bert: [PAD]=0, [unused0..98]=1..99, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, "
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
        help="ids to keep free for later use, [unusedN] (<unusedN> with --special-tokens roberta): wordpiece: "
        "before the learned tokens, after them for bpe and unigram, never produced by encoding (default: "
        f"{BERT_DEFAULT_RESERVED} for the bert layout, as in the original vocab; 0 for compact; bert-chinese has "
        "its own 99; 0 for bpe and unigram, where ModernBERT keeps 83)",
    )
    vocab.add_argument(
        "--fill-to-size",
        action="store_true",
        help="wordpiece: where the trainer learns fewer tokens than --vocab-size asks, fill the rest with "
        "[unusedN] lines so that the file has exactly --vocab-size lines (default: off, the vocab is as long as "
        "what was learned)",
    )
    vocab.add_argument(
        "--min-ideograph-count",
        type=int,
        default=None,
        metavar="N",
        help="wordpiece: every CJK ideograph seen at least N times gets a line, beyond --limit-alphabet: Chinese "
        f"text needs thousands of them, each a token of its own (default: {MIN_IDEOGRAPH_COUNT})",
    )
    vocab.add_argument(
        "--pad-to-multiple",
        type=int,
        default=1,
        metavar="N",
        help="add reserved ids after the --vocab-size ones until their count is a multiple of N, e.g. 64 for "
        "tensor-core shapes as ModernBERT advises; the ids before are unchanged (default: 1, no padding)",
    )
    vocab.add_argument(
        "--min-frequency",
        type=int,
        default=None,
        help="wordpiece and bpe: least count of a symbol pair for the trainer to merge it (default: 2)",
    )
    vocab.add_argument(
        "--limit-alphabet",
        type=int,
        default=None,
        help="wordpiece: keep the N most frequent characters other than CJK ideographs (see "
        "--min-ideograph-count); words with any other character are not trained on (they become [UNK]) (default: "
        "1000)",
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
        help="distinct words (bpe and unigram: pre-tokens) held while counting and trained on; past it the "
        "rarest are pruned. Training needs ~1.6 KB per distinct word (default: 1M)",
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
    refuse_other_models_flags(args)
    training = wordpiece_config(args) if args.model == WORDPIECE else subword_config(args)
    reserved = training.reserved_tokens
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
        output=output_path(args),
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


def refuse_other_models_flags(args) -> None:
    """A flag of another model than --model's is one line, before any work."""
    flags = {
        WORDPIECE: {**SUBWORD_ONLY, **UNIGRAM_ONLY},
        "bpe": {**WORDPIECE_ONLY, **UNIGRAM_ONLY},
        "unigram": {**WORDPIECE_ONLY, **BPE_AND_WORDPIECE_ONLY},
    }[args.model]
    for dest, flag in flags.items():
        if getattr(args, dest) not in (None, False):
            raise ValueError(f"{flag} does not apply to --model {args.model}: {_whose(dest, args.model)}")


def _whose(dest: str, model: str) -> str:
    """Which model a flag belongs to, and why it means nothing to `model`."""
    if dest in WORDPIECE_ONLY:
        return "it is a WordPiece vocab's (--model wordpiece)"
    if dest in SUBWORD_ONLY:
        return "a WordPiece vocab has BERT's special tokens, laid out by --layout"
    if dest in UNIGRAM_ONLY:
        reason = "; byte-level BPE has a token for every byte" if model == "bpe" else ""
        return f"it is a Unigram model's (--model unigram){reason}"
    return "SentencePiece's trainer keeps the pieces of the highest likelihood, whatever their counts"


def wordpiece_config(args) -> TrainingConfig:
    layout = args.layout or "auto"
    if layout == "bert-chinese" and args.reserved_tokens is not None:
        raise ValueError("--layout bert-chinese has bert-base-chinese's 99 reserved lines; leave --reserved-tokens out")
    reserved = (
        args.reserved_tokens
        if args.reserved_tokens is not None
        else (BERT_DEFAULT_RESERVED if layout in ("bert", "auto") else 0)
    )
    return TrainingConfig(
        vocab_size=args.vocab_size,
        lowercase=args.do_lower_case is not False,
        layout=layout,
        reserved_tokens=reserved,
        min_frequency=_given(args.min_frequency, 2),
        limit_alphabet=_given(args.limit_alphabet, 1000),
        pad_to_multiple=args.pad_to_multiple,
        min_ideograph_count=_given(args.min_ideograph_count, MIN_IDEOGRAPH_COUNT),
        fill_to_size=args.fill_to_size,
    )


def subword_config(args) -> SubwordConfig:
    return SubwordConfig(
        model=args.model,
        vocab_size=args.vocab_size,
        special_tokens=args.special_tokens or DEFAULT_SPECIAL_TOKENS,
        reserved_tokens=_given(args.reserved_tokens, 0),
        pad_to_multiple=args.pad_to_multiple,
        lowercase=bool(args.do_lower_case),
        min_frequency=_given(args.min_frequency, 2),
        byte_fallback=args.byte_fallback,
        character_coverage=_given(args.character_coverage, DEFAULT_CHARACTER_COVERAGE),
    )


def _given(value, default):
    """A flag's value, or its default where it was not given (its dest is None: each model has its own)."""
    return default if value is None else value


def output_path(args) -> str:
    """--output, or the model's default: vocab.txt for WordPiece; a BPE's or Unigram's folder must be named, and
    not as a file."""
    if args.model == WORDPIECE:
        return args.output or "vocab.txt"
    files = ", ".join(FOLDER_FILES)
    if not args.output:
        raise ValueError(f"--model {args.model} writes a tokenizer's folder ({files}); name it with --output FOLDER")
    name = posixpath.basename(args.output.rstrip("/"))
    if name.endswith((".txt", ".json")):
        folder = posixpath.dirname(args.output.rstrip("/")) or "."
        raise ValueError(
            f"--output {args.output} names a file, and --model {args.model} writes a folder ({files}): name the "
            f"folder, e.g. --output {folder}"
        )
    return args.output


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.errors import UserError

    started = time.time()
    cfg = config_from_args(args)
    files = vocab_file_outputs(cfg.output) if cfg.model == WORDPIECE else folder_outputs(cfg.output)
    if beam_args and not cfg.count_with_beam:
        raise UserError(f"Beam options ({' '.join(beam_args)}) apply only with --count-with-beam")
    options = runners.pipeline_options(beam_args)
    output.check_apart([cfg.output, cfg.counts_dir], cfg.inputs)
    if not output.is_remote(cfg.output) and os.path.isdir(cfg.output) and not files.is_folder:
        raise UserError(f"--output {cfg.output} is a directory; name the vocab file, e.g. {cfg.output}/vocab.txt")
    if not output.is_remote(cfg.output) and os.path.isfile(cfg.output) and files.is_folder:
        raise UserError(f"--output {cfg.output} is a file; --model {cfg.model} writes a folder: name one")
    dry_run = runners.is_dry_run(options)
    found, outcome = None, "run"
    if args.reuse and not dry_run:
        found = find_inputs(cfg.inputs)
        outcome = Reuse(cfg.describe(), found.files).outcome(JOB, cfg.output, files.manifest)
        if outcome == "keep":
            return 0
    if not dry_run:
        check_outputs(files, args.overwrite or outcome == "replace")
        output.check_writable(cfg.output, output.temporary_name(files.path(files.main)))
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
        raise no_words(cfg, counts)
    inputs_skipped = found.skipped_counts()
    if cfg.model == WORDPIECE:
        wordpiece_run.train_and_write(cfg, counts, smoothing, inputs_skipped, started)
    else:
        subword_run.train_and_write(cfg, counts, files, smoothing, inputs_skipped, started)
    return 0
