"""`bertcorpus create`, the command: its flags, its run (the inputs listed, the vocab read, the job of job.py run to
its end) and its summary. config.py turns the flags into the run's config."""

from __future__ import annotations

import shlex
import sys

from bertcorpus.pipeline.cli.shared_flags import (
    LOCAL_FOLDERS_HELP,
    BooleanFlag,
    add_document_cap,
    add_error_limits,
    add_input_and_output,
    add_input_format,
    add_language,
    add_lower_case,
    add_overwrite,
    add_reuse,
    positive_int,
)
from bertcorpus.pipeline.create.config import MASKING_MODES, MEGATRON_SEQUENCES, RECORD_FORMATS, config_from_args
from bertcorpus.pipeline.create.job import CreatePretrainingData
from bertcorpus.pipeline.create.job_vocab import read_job_tokenizer, read_job_vocab
from bertcorpus.pipeline.create.publish import languages_without_instances, output_notes
from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.engines.run_progress import ProgressPlan
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.sinks import documents
from bertcorpus.pipeline.vocab.files import recorded_unk_share
from bertcorpus.transforms.bucket_instances import PAIR_OBJECTIVES
from bertcorpus.transforms.instance_mds import ID_ENCODINGS
from bertcorpus.transforms.word_segmentation import SEGMENTERS
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile
from bertcorpus.wordpiece.vocab_checks import casing_mismatch, unk_share_mismatch

# The ids each record format can hold: TFRecords and MDS store int64 ids, Parquet uint32 (uint16 where they fit),
# Megatron's indexed datasets int32 (uint16 below 65,500 ids).
ID_LIMITS = {"tfrecord": 2**63, "mds": 2**32, "parquet": 2**32, "megatron": 2**31}


# What `create --help` shows first: the flags of the common recipe (BERT's records from documents and a vocab), so
# that they fit on one screen; every other flag has a default and stands under its heading after them.
USAGE = (
    "%(prog)s --input GLOB [GLOB ...] --output DIR\n"
    "         (--vocab FILE | --tokenizer PATH) [--seq-configs L:P,...]\n"
    "         [--masking {static,dynamic}] [--dupe-factor N] [--num-shards N]\n"
    "         [the flags under the headings below] [Beam pipeline options]"
)


def add_arguments(parser) -> None:
    add_common_recipe(parser.add_argument_group("the common recipe (every other flag has a default, below)"))
    add_more_files(
        parser.add_argument_group(
            "more on input and output",
            f"what --input takes: {LOCAL_FOLDERS_HELP}",
        )
    )
    add_tokens(
        parser.add_argument_group(
            "vocabulary and tokenizer",
            "what --tokenizer takes: a tokenizer.json of BPE (byte-level or not), Unigram or WordPiece, or a model's "
            "folder holding one with its tokenizer_config.json and special_tokens_map.json: ids as Tokenizer.encode "
            "gives them, its templates and special tokens (docs/pretraining_data.md, 'Any tokenizer')",
        )
    )
    add_recipe(parser.add_argument_group("recipe: objective, masking, record formats"))
    add_instance_shape(
        parser.add_argument_group(
            "instances",
            "with --pair-objective none, --seq-configs takes L:P:MIN: a third number keeps only documents of at "
            "least MIN tokens for that config, e.g. 1024:308,8192:2458:2048",
        )
    )
    add_layout(parser.add_argument_group("layout and scale"))
    add_languages(parser.add_argument_group("languages"))
    add_error_limits(
        parser,
        "exit non-zero when the records that could not be read (errors-*.jsonl) are more than "
        "this share of the records read; the output is written and complete either way",
    )


def add_common_recipe(group) -> None:
    """--input, --output, --vocab or --tokenizer, and the four flags of the recipe that a run most often sets."""
    add_input_and_output(
        group,
        metavar="GLOB",
        inputs="input files, globs or directories (local or any Beam filesystem, e.g. gs://); an extraction's "
        "output directory stands for the documents its manifest lists",
        output="output directory: seq{L}/train-*.tfrecord (or .parquet with --masking dynamic), "
        "seq{L}/eval-*, manifest.json",
        output_metavar="DIR",
    )
    tokens = group.add_mutually_exclusive_group(required=True)
    tokens.add_argument(
        "--vocab",
        metavar="FILE",
        help="a WordPiece vocab.txt (one token per line), tokenised as the reference's FullTokenizer does",
    )
    tokens.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="instead of --vocab: a Hugging Face tokenizer.json or a model's folder holding one, as it is (below)",
    )
    group.add_argument(
        "--seq-configs",
        metavar="L:P,...",
        help="tokens per instance and masked-LM predictions at most, several from one tokenisation pass, e.g. "
        "128:20,512:80 (default: --max-seq-length:--max-predictions-per-seq, 128:20)",
    )
    group.add_argument(
        "--masking",
        choices=MASKING_MODES,
        default=None,
        help="static: masks drawn here, --dupe-factor times, into TFRecords in the reference layout (BERT as "
        "published); dynamic: each instance stored once, unmasked, as Parquet, and masked anew every epoch by the "
        "loader (RoBERTa) (default: static; dynamic with --record-format megatron)",
    )
    group.add_argument(
        "--dupe-factor",
        type=int,
        default=None,
        metavar="N",
        help="passes over the data, each paired anew (and, with static masking, masked anew) "
        "(default: 10 with --masking static, 1 with dynamic)",
    )
    group.add_argument(
        "--num-shards",
        type=positive_int,
        default=None,
        metavar="N",
        help="train shards per seq config (default: ~256 MB each, at least 4)",
    )


def add_more_files(group) -> None:
    add_overwrite(group)
    add_reuse(group)
    add_input_format(group)


def add_tokens(group) -> None:
    """What tokenises: special tokens for --tokenizer, and lower-casing for --vocab."""
    group.add_argument(
        "--special-token",
        action="append",
        metavar="ROLE=TOKEN",
        help="with --tokenizer, a special token its files do not name (or name otherwise): ROLE is cls, sep, mask, "
        "pad, unk, bos or eos, e.g. --special-token mask='<mask>'; repeat for several",
    )
    add_lower_case(
        group,
        "lower-case and strip accents, for an uncased vocab; --no-do-lower-case for a cased one (default: lower-case)",
    )


def add_recipe(group) -> None:
    """What the instances are and how they are stored, besides --masking and --dupe-factor."""
    group.add_argument(
        "--pair-objective",
        choices=PAIR_OBJECTIVES,
        default="nsp",
        help="nsp: B follows A or is a random next (label 1); sop: B always follows A, the two "
        "swapped in half of the instances (label 1 = swapped; ALBERT); none: one segment of "
        "whole sentences packed across documents, label unused (RoBERTa) (default: nsp)",
    )
    group.add_argument(
        "--masked-lm-prob",
        type=float,
        default=0.15,
        metavar="P",
        help="share of each instance's tokens to predict (default: %(default)s)",
    )
    add_whole_words(group)
    group.add_argument(
        "--bin-size",
        type=int,
        default=None,
        metavar="N",
        help="give every instance a length bin of N tokens, so that a loader can batch instances "
        "of similar length and pad less (default: no bins)",
    )
    add_record_formats(group)
    group.add_argument(
        "--provenance",
        action=BooleanFlag,
        default=False,
        help="every instance records where its tokens came from: per segment the pieces of document text (document "
        "id, first and end character); Parquet and MDS get a provenance column, TFRecords a Parquet beside each shard "
        "(docs/pretraining_data.md, 'Provenance') (default: off)",
    )


def add_whole_words(group) -> None:
    group.add_argument(
        "--whole-word-mask",
        action=BooleanFlag,
        default=False,
        help="mask whole words: a word's ## pieces with it, and the characters of a Chinese word together (words "
        "by --segmenter), one 80/10/10 draw per word (default: off)",
    )
    group.add_argument(
        "--segmenter",
        default="jieba",
        metavar="NAME",
        help=f"with --whole-word-mask: what groups Chinese characters (each a token) into words: "
        f"{' or '.join(SEGMENTERS)} (every character a word of its own, as the reference) (default: jieba, its "
        "dictionary as rjieba ships it; needs pip install 'bertcorpus[zh]')",
    )
    group.add_argument(
        "--segmenter-dict",
        metavar="FILE",
        help="with --segmenter jieba: your own words, in jieba's format (word [frequency] [tag], a line), added to "
        "its dictionary (default: none)",
    )


def add_record_formats(group) -> None:
    """--record-format, and the settings of the MDS and Megatron forms."""
    group.add_argument(
        "--record-format",
        choices=RECORD_FORMATS,
        default=None,
        help="tfrecord: the reference's records (static masking only); parquet: unmasked instances, one row "
        "each; mds: the same instances as MosaicML streaming shards and an index.json in seq{L}/{split}/, "
        "for ModernBERT-class trainers (StreamingDataset reads them as they are); megatron: Megatron-LM's indexed "
        "datasets (.bin/.idx) in megatron/, a sequence per sentence, which Megatron pairs and masks at load "
        "(docs/pretraining_data.md, 'Megatron') (default: tfrecord with --masking static, parquet with dynamic)",
    )
    group.add_argument(
        "--mds-ids",
        choices=ID_ENCODINGS,
        default=None,
        help="with --record-format mds, how input_ids are stored: int64 (ndarray:int64), as ModernBERT's "
        "StreamingTextDataset reads them (np.frombuffer(..., np.int64)); compact: uint16 (uint32 for a vocab past "
        "65,536 ids), a quarter of the ids' bytes, which MosaicML's StreamingDataset and bertcorpus's loader read "
        "but ModernBERT's StreamingTextDataset does not (default: int64)",
    )
    group.add_argument(
        "--megatron-sequences",
        choices=MEGATRON_SEQUENCES,
        default=None,
        help="with --record-format megatron: a sequence per sentence (Megatron's BERT dataset; --pair-objective "
        "none: its --bert-no-binary-head) or per document (what its GPT dataset reads; needs --pair-objective none) "
        "(default: sentences)",
    )


def add_instance_shape(group) -> None:
    """One seq config's length and predictions (--seq-configs names several), the short pairs, and the seed."""
    group.add_argument(
        "--max-seq-length",
        type=int,
        default=128,
        metavar="L",
        help="tokens per instance, [CLS] and [SEP] included, where --seq-configs is not given (default: %(default)s)",
    )
    group.add_argument(
        "--max-predictions-per-seq",
        type=int,
        default=20,
        metavar="P",
        help="masked-LM predictions per instance at most, where --seq-configs is not given (default: %(default)s)",
    )
    group.add_argument(
        "--short-seq-prob",
        type=float,
        default=0.1,
        metavar="P",
        help="share of pairs given a shorter target length, uniform in [2, L-3] "
        "(default: %(default)s; not used by --pair-objective none)",
    )
    group.add_argument(
        "--seed",
        type=int,
        default=12345,
        help="every random choice derives from it: the same seed gives the same bytes (default: %(default)s)",
    )


def add_layout(group) -> None:
    """The eval split, the buckets that bound a worker's memory, and the cap on a document's length."""
    group.add_argument(
        "--eval-fraction",
        type=float,
        default=None,
        metavar="F",
        help="share of documents held out for eval shards; 0 disables the eval split (default: "
        "1%%, raised up to 10%% so that it holds at least 256 KB of text, and none for an "
        "input under ~320 KB)",
    )
    group.add_argument(
        "--num-buckets",
        type=positive_int,
        default=None,
        metavar="N",
        help="document buckets; each is one worker's unit of memory (default: one per --bucket-mb of input)",
    )
    group.add_argument(
        "--bucket-mb",
        type=float,
        default=1.0,
        metavar="MB",
        help="MB of text per bucket when --num-buckets is not given: a bucket is what a worker "
        "holds at once (default: %(default)s)",
    )
    add_document_cap(group, "a document of its own, in the split of the document it comes from")


def add_languages(group) -> None:
    add_language(group, "documents")
    group.add_argument(
        "--language-sampling-alpha",
        type=float,
        default=1.0,
        metavar="A",
        help="mix the languages by smoothed shares: each language's share of the instances, p, becomes p^A "
        "renormalised, at about the same total: frequent languages are under-sampled, rare ones repeated with new "
        "pairs and masks; per output and split (0.7 as multilingual BERT, 0.3 as XLM-R) (default: 1, each "
        "language as it comes)",
    )


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import finish, run_job
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.pipeline.inputs.discovery import find_inputs
    from bertcorpus.pipeline.sinks.up_to_date import Reuse

    options = runners.pipeline_options(beam_args)
    dry_run = runners.is_dry_run(options)
    config = config_from_args(args)
    found = find_inputs(config.inputs, allow_missing=dry_run)
    found.print_note()
    files = found.files
    if not files and not dry_run:
        raise UserError("no input files given")
    if files and not any(size for _, size in files):
        raise UserError(f"the input files ({len(files)}) are all empty; nothing to do")
    rendering = runners.is_rendering(options)
    if config.tokenizer is None:
        vocab, vocab_sha = read_job_vocab(config.vocab, dry_run, rendering)
        if vocab.data is not None and (
            problem := casing_mismatch(vocab.load().tokens, config.do_lower_case, config.vocab)
        ):
            print(f"warning: {problem}", file=sys.stderr)
    else:
        vocab, vocab_sha = read_job_tokenizer(config.tokenizer, dict(config.special_tokens), dry_run, rendering)
        if vocab.data is not None:
            check_tokenizer(vocab.load(), config)
    config = config.resolved(sum(estimated_text_bytes(path, size) for path, size in files))
    job = "create pretraining data" >> CreatePretrainingData(
        config, vocab, vocab_sha, [p for p, _ in files] or list(config.inputs), found.skipped_counts()
    )
    plan = ProgressPlan(
        sum(size for _, size in files),
        ("create/documents_read", "documents"),
        ("progress/instances_written", "instances"),
    )
    # Apart from the vocab or tokenizer too: a run publishes a copy of it under the output's own name.
    digest_key = "vocab.sha256" if config.tokenizer is None else "tokenizer.sha256"
    reuse = Reuse(config.describe(), files, {digest_key: vocab_sha}) if args.reuse else None
    run = run_job(
        "create", options, job, config.output, [*config.inputs, config.tokenizer_path], args.overwrite, plan, reuse
    )
    if run is None:
        return 0
    manifest = run.manifest
    counts = manifest["counts"]
    for note in output_notes(manifest):
        print(f"warning: {note}", file=sys.stderr)
    if config.tokenizer is None and (
        problem := unk_share_mismatch(
            counts["unk_tokens"], counts["tokens"], recorded_unk_share(config.vocab, vocab_sha), config.vocab
        )
    ):
        print(f"warning: {problem}", file=sys.stderr)
    problem = documents.error_check(manifest, config.strict, config.max_error_rate)
    return finish(
        "create",
        run,
        _summary_rows(manifest),
        [
            problem
            and (f"{problem}; the output is complete, and {config.output}/errors-*.jsonl says what could not be read")
        ],
    )


def check_tokenizer(tokenizer: TokenizerFile, config) -> None:
    """A tokenizer.json that cannot make this run's records, refused in one line before any work."""
    from bertcorpus.pipeline.errors import UserError

    name = config.tokenizer
    if "mask" not in tokenizer.specials:
        raise UserError(
            f"tokenizer {name} names no mask token (neither its tokenizer.json nor a config beside it does): pass "
            "--special-token mask=TOKEN with a token of its vocabulary"
        )
    if config.whole_word_mask and not tokenizer.marks_words:
        raise UserError(
            f"--whole-word-mask: tokenizer {name} marks no word boundaries (no ## continuations, no Ġ or ▁ before "
            "words), so no word can be masked whole; leave --whole-word-mask out"
        )
    if (limit := ID_LIMITS[config.file_format]) < len(tokenizer):
        raise UserError(
            f"tokenizer {name} has {len(tokenizer):,} ids, more than {config.file_format} records can store ({limit:,})"
        )


def _summary_rows(manifest: dict) -> list[tuple[str, str]]:
    docs, form = manifest["documents"], manifest["form"]
    rows = [("documents read", f"{docs['read']:,}"), ("documents kept", f"{docs['kept']:,}")]
    if split := docs["split"]["documents"]:
        rows.append(
            ("documents cut", f"{split:,} longer than --max-document-mb, into {docs['split']['pieces']:,} pieces")
        )
    rows += [(f"documents skipped ({k})", f"{v:,}") for k, v in docs["skipped"].items()]
    rows += [(f"errors ({k})", f"{v:,} in errors-*.jsonl") for k, v in docs["errors_by_reason"].items()]
    rows += documents.skipped_rows(manifest["inputs_skipped"])
    rows += [(k.replace("_", " "), f"{v:,}") for k, v in manifest["counts"].items()]
    rows.append(
        (
            "form",
            f"{form['masking']} masking ({form['file_format']}), pair objective "
            f"{form['pair_objective']}" + (f", bins of {form['bin_size']}" if form["bin_size"] else ""),
        )
    )
    if form["file_format"] == "megatron":
        return rows + megatron_rows(manifest)
    label = {"random_next": "random-next", "swapped": "swapped"}.get(form["label"])
    for name, out in manifest["outputs"].items():
        for split in ("train", "eval"):
            if split in out:
                o = out[split]
                shards = len(o["shards"])
                share = f", {label} {o['label_share']:.4f}" if label and o["instances"] else ""
                rows.append(
                    (
                        f"{name} {split} instances",
                        f"{o['instances']:,} in {shards} shard{'s' if shards != 1 else ''}{share}",
                    )
                )
                if form.get("language_sampling_alpha", 1) != 1 and o.get("languages"):
                    rows.append((f"{name} {split} languages", _language_shares(o["languages"])))
    if missing := languages_without_instances(manifest):
        named = ", ".join(f"{k} ({v:,} document{'s' * (v != 1)})" for k, v in missing.items())
        rows.append(("languages without instances", named))
    return rows


def megatron_rows(manifest: dict) -> list[tuple[str, str]]:
    """A Megatron output's splits, and the command line that reads them."""
    rows = []
    for split, entry in manifest["outputs"].items():
        files = len(entry["files"])
        rows.append(
            (
                f"megatron {split}",
                f"{entry['documents']:,} documents, {entry['sequences']:,} sequences, {entry['tokens']:,} tokens in "
                f"{files} file{'s' * (files != 1)}",
            )
        )
    megatron = manifest["megatron"]
    rows.append((f"Megatron-LM ({megatron['dataset']})", f"{megatron['script']} {shlex.join(megatron['flags'])}"))
    return rows


def _language_shares(report: dict) -> str:
    """`ja 0.4120 (target 0.4118), vi ...`: each language's achieved and target share, largest first."""
    ranked = sorted(report.items(), key=lambda kv: (-kv[1]["target_share"], kv[0]))
    return ", ".join(f"{lang} {e['achieved_share']:.4f} (target {e['target_share']:.4f})" for lang, e in ranked)
