"""What a `create` run is asked to make: its config (from the flags command.py adds), and the sizes it decides
from its input.

Buckets (documents grouped by a stable hash of their id) are the unit of memory and of randomness; shards are
the output files. Both are sized from the input's estimated text, which comes from the file sizes the
filesystem lists, so that a local and a remote copy of the same input make the same output.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.cli.shared_flags import (
    MAX_DOCUMENT_MB,
    check_error_rate,
    check_language_flags,
)
from bertcorpus.transforms.bucket_instances import InstanceRecipe
from bertcorpus.transforms.instance_mds import MdsColumns
from bertcorpus.transforms.instances import SeqConfig
from bertcorpus.transforms.language_id import LanguageSetting
from bertcorpus.transforms.seeding import stable_hash, unit_interval
from bertcorpus.transforms.word_segmentation import (
    SegmenterSpec,
    check_segmenter,
    check_segmenter_name,
    parse_user_dict,
)
from bertcorpus.transforms.zh_variants import SCRIPT_SUFFIX
from bertcorpus.wordpiece.sequence_layout import SequenceLayout
from bertcorpus.wordpiece.tokenizer_file import SPECIAL_ROLES

MASKING_MODES = ("static", "dynamic")
# static masks: tfrecord; instances masked at load: parquet or mds; megatron: sentences that Megatron pairs and masks
RECORD_FORMATS = ("tfrecord", "parquet", "mds", "megatron")
MEGATRON_SEQUENCES = ("sentences", "documents")
MAX_STORED_LENGTH = 65_535  # Parquet and MDS store lengths and segment starts as uint16
SHARD_TARGET_MB = 256  # of records, per train shard when --num-shards is left to the job
RECORD_BYTES_PER_TEXT_BYTE = 2  # per dupe pass, at 128/20 and at 512/80 alike
# The automatic eval split: 1% of the documents, but at least EVAL_TEXT_BYTES of text where the input allows (up to
# 10%), so that a small corpus's eval split holds enough documents for random next segments; none below
# MIN_EVAL_TEXT_BYTES of eval text, where a split of a few documents would measure nothing.
EVAL_TEXT_BYTES = 256 * 1024
MIN_EVAL_TEXT_BYTES = 32 * 1024
DUPE_FACTOR = {"static": 10, "dynamic": 1}  # dynamic masking draws new masks every epoch: one pass suffices


def auto_eval_fraction(text_bytes: float) -> float:
    fraction = min(0.1, max(0.01, EVAL_TEXT_BYTES / max(text_bytes, 1)))
    return fraction if fraction * text_bytes >= MIN_EVAL_TEXT_BYTES else 0.0


@dataclass
class CreateConfig:
    inputs: list[str]
    output: str
    vocab: str | None  # a WordPiece vocab.txt, or None where a tokenizer.json is given
    input_format: str = "auto"
    seq_configs: list[SeqConfig] = field(default_factory=lambda: [SeqConfig(128, 20)])
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    seed: int = 12345
    do_lower_case: bool = True
    whole_word_mask: bool = False
    masking: str = "static"  # static: masks drawn here, TFRecords; dynamic: unmasked Parquet, masked at load
    pair_objective: str = "nsp"  # nsp, sop or none
    bin_size: int | None = None  # length bins of this many tokens, for batches of similar lengths
    record_format: str | None = None  # None: tfrecord for static masking, parquet for dynamic; or mds (dynamic)
    mds_ids: str | None = None  # mds only: int64 (what ModernBERT's reader expects) or compact (uint16/uint32)
    num_shards: int = 0  # train shards per seq config; 0 = sized from the input
    eval_fraction: float | None = None  # None = sized from the input (auto_eval_fraction)
    num_buckets: int = 0  # 0 = sized from the input (bucket_mb of text per bucket)
    bucket_mb: float = 1.0
    max_document_mb: float = MAX_DOCUMENT_MB  # longer documents are cut into pieces, million characters
    strict: bool = False  # exit 1 on any unreadable record
    max_error_rate: float = 0.01  # exit 1 when errors / records read is above this
    # Whole-word masking's words in Chinese text (transforms/word_segmentation.py): the segmenter, and the words of
    # the user's dictionary with its sha256.
    segmenter: str = "jieba"
    segmenter_words: tuple = ()
    segmenter_dict_sha256: str | None = None
    # The language of documents that carry none (transforms/language_id.py's LanguageSetting).
    language: str = "und"
    languages: tuple = ()
    min_language_confidence: float = 0.5
    # Languages mixed by smoothed shares (transforms/language_sampling.py); 1 makes each as it comes.
    language_sampling_alpha: float = 1.0
    # A tokenizer.json (or a folder holding one) used as it is instead of a vocab.txt, with the special tokens the
    # flags name (role → token) over what its files name.
    tokenizer: str | None = None
    special_tokens: tuple = ()
    # --record-format megatron: a sequence per sentence (Megatron's BERT dataset) or per document (its GPT dataset)
    megatron_sequences: str | None = None
    # every instance records where its tokens came from (transforms/provenance.py)
    provenance: bool = False

    @property
    def segmentation(self) -> SegmenterSpec | None:
        """The segmenter that groups Chinese characters into words for whole-word masking; None where none does."""
        if not self.whole_word_mask or self.segmenter == "none":
            return None
        return SegmenterSpec(self.segmenter, tuple(map(tuple, self.segmenter_words)), self.segmenter_dict_sha256)

    @property
    def language_setting(self) -> LanguageSetting:
        return LanguageSetting(self.language, tuple(self.languages), self.min_language_confidence)

    def resolved(self, text_bytes: float) -> CreateConfig:
        """A copy with the automatic sizes decided from the inputs' estimated text, so the manifest records what
        actually ran."""
        mb = max(text_bytes, 1) / 2**20
        buckets = self.num_buckets or max(1, math.ceil(mb / self.bucket_mb))
        # Aim at SHARD_TARGET_MB shards, and at least 4 files so that the reference trainer's 4-way interleave
        # has something to interleave. A multiple of 4 shares the writing evenly between 2 or 4 workers.
        records_mb = RECORD_BYTES_PER_TEXT_BYTE * mb * self.dupe_factor
        shards = self.num_shards or 4 * math.ceil(max(4, records_mb / SHARD_TARGET_MB) / 4)
        if self.record_format == "megatron":  # one file per split, as Megatron's users hold them, unless asked
            shards = self.num_shards or 1
        eval_fraction = auto_eval_fraction(text_bytes) if self.eval_fraction is None else self.eval_fraction
        return CreateConfig(
            **{
                **asdict(self),
                "seq_configs": list(self.seq_configs),
                "num_buckets": buckets,
                "num_shards": shards,
                "eval_fraction": eval_fraction,
            }
        )

    @property
    def max_document_chars(self) -> int:
        return int(self.max_document_mb * 1e6)

    @property
    def eval_buckets(self) -> int:
        return max(1, round(self.num_buckets * self.eval_fraction))

    @property
    def eval_shards(self) -> int:
        return max(1, math.ceil(self.num_shards * self.eval_fraction)) if self.eval_fraction > 0 else 0

    def shards(self, split: str) -> int:
        return self.num_shards if split == "train" else self.eval_shards

    @property
    def file_format(self) -> str:
        return self.record_format or ("tfrecord" if self.masking == "static" else "parquet")

    def mds_columns(self, vocab_size: int, chinese_ref: bool = False) -> MdsColumns:
        return MdsColumns.for_output(
            vocab_size, self.pair_objective, self.mds_ids, chinese_ref, provenance=self.provenance
        )

    def recipe(self, seq: SeqConfig, layout: SequenceLayout, by_sentence: bool = False) -> InstanceRecipe:
        """How a bucket's instances of `seq` are made, in the tokenizer's templates (`layout`); by_sentence: a piece
        of provenance per sentence (transforms/provenance.py)."""
        return InstanceRecipe(
            seq,
            self.dupe_factor,
            self.short_seq_prob,
            self.masked_lm_prob,
            self.whole_word_mask,
            self.pair_objective,
            self.masking == "static",
            self.bin_size,
            layout.pair_frame,
            layout.single_frame[:2],
            ("sentences" if by_sentence else "segments") if self.provenance else None,
        )

    def describe(self) -> dict:
        d = asdict(self)
        d["seq_configs"] = [
            f"{c.max_seq_length}:{c.max_predictions_per_seq}"
            + (f":{c.min_document_tokens}" if c.min_document_tokens else "")
            for c in self.seq_configs
        ]
        del d["output"]  # where the records went is not part of what they are
        d["segmenter_words"] = len(self.segmenter_words)  # the dictionary is known by its sha256
        d["languages"] = list(self.languages)  # as JSON holds it
        if d["mds_ids"] is None:  # other forms than mds: their manifests stay as they were before the option
            del d["mds_ids"]
        if d["megatron_sequences"] is None:
            del d["megatron_sequences"]
        if not self.provenance:  # the config of a run without it as it was before the option
            del d["provenance"]
        if self.tokenizer is None:  # a vocab.txt's run: its config as it was before tokenizer.json was taken
            del d["tokenizer"], d["special_tokens"]
        else:
            del d["vocab"], d["do_lower_case"]  # the tokenizer's own normaliser decides
            d["special_tokens"] = dict(self.special_tokens)
        return d

    @property
    def tokenizer_path(self) -> str:
        """The file the run tokenises with: the vocab.txt or the tokenizer."""
        return self.tokenizer or self.vocab


def split_of(doc_id: str, config: CreateConfig) -> str:
    # A document written once per script (extract-wiki/extract-books --zh-variant both): both forms of it fall in
    # one split, so that the eval split never holds the other script of a train document.
    work = SCRIPT_SUFFIX.sub("", doc_id)
    return "eval" if unit_interval(config.seed, "eval-split", work) < config.eval_fraction else "train"


def bucket_key(doc_id: str, split: str, config: CreateConfig) -> str:
    count = config.num_buckets if split == "train" else config.eval_buckets
    return f"{split}/{stable_hash(config.seed, 'bucket', doc_id) % count:06d}"


def shard_name(config: CreateConfig, seq: SeqConfig, split: str, shard: int) -> str:
    if config.file_format == "mds":  # MDS: a folder per split, its shards listed by an index.json
        return f"{seq.name}/{split}/shard.{shard:05d}.mds"
    return f"{seq.name}/{split}-{shard:05d}-of-{config.shards(split):05d}.{config.file_format}"


# ---------------------------------------------------------------------------------------------- command line


def parse_seq_configs(text: str) -> list[SeqConfig]:
    """'128:20,512:80' → [SeqConfig(128, 20), SeqConfig(512, 80)]; '8192:2458:2048' → documents of 2,048 tokens
    and more only."""
    configs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            length, predictions, *least = (int(x) for x in part.split(":"))
            if len(least) > 1:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"--seq-configs wants LENGTH:PREDICTIONS pairs such as 128:20,512:80 (or "
                f"LENGTH:PREDICTIONS:MIN_DOCUMENT_TOKENS), got {part!r}"
            ) from None
        if length < 8 or predictions < 1 or predictions > length:
            raise ValueError(f"--seq-configs {part!r}: need LENGTH >= 8 and 1 <= PREDICTIONS <= LENGTH")
        if least and least[0] < 1:
            raise ValueError(f"--seq-configs {part!r}: MIN_DOCUMENT_TOKENS must be at least 1")
        configs.append(SeqConfig(length, predictions, least[0] if least else 0))
    if not configs:
        raise ValueError("--seq-configs is empty")
    if len({c.max_seq_length for c in configs}) != len(configs):
        raise ValueError("--seq-configs names the same sequence length twice")
    return configs


def config_from_args(args) -> CreateConfig:
    if args.seq_configs:
        seq_configs = parse_seq_configs(args.seq_configs)
    else:
        if args.max_seq_length < 8:
            raise ValueError(
                f"--max-seq-length {args.max_seq_length} is too short: [CLS] A [SEP] B [SEP] needs at least 8"
            )
        if not 1 <= args.max_predictions_per_seq <= args.max_seq_length:
            raise ValueError(
                f"--max-predictions-per-seq {args.max_predictions_per_seq} must be between 1 and "
                f"--max-seq-length ({args.max_seq_length})"
            )
        seq_configs = [SeqConfig(args.max_seq_length, args.max_predictions_per_seq)]
    check_error_rate(args)
    megatron = args.record_format == "megatron"
    if megatron:
        check_megatron(args, seq_configs)
    masking = args.masking or ("dynamic" if megatron else "static")  # Megatron masks at load time
    dupe_factor = DUPE_FACTOR[masking] if args.dupe_factor is None else args.dupe_factor
    shortest = min(c.max_seq_length for c in seq_configs)
    longest = max(c.max_seq_length for c in seq_configs)
    record_format = args.record_format or ("tfrecord" if masking == "static" else "parquet")
    checks = [
        (
            (record_format == "tfrecord") == (masking == "static"),
            f"--record-format {record_format} needs --masking dynamic (its instances are stored unmasked and "
            f"masked at load time)"
            if record_format != "tfrecord"
            else "--record-format tfrecord holds static masks: it needs --masking static (dynamic masking "
            "writes parquet or mds)",
        ),
        (
            args.mds_ids is None or record_format == "mds",
            f"--mds-ids chooses how MDS shards store input_ids: it needs --record-format mds (not {record_format})",
        ),
        (
            masking == "static" or longest <= MAX_STORED_LENGTH,
            f"--seq-configs: a length of {longest:,} is past the {MAX_STORED_LENGTH:,} tokens that dynamic "
            "masking's records store (uint16 lengths); split it into shorter instances",
        ),
        (
            args.pair_objective == "none" or not any(c.min_document_tokens for c in seq_configs),
            "--seq-configs: a minimum document length (LENGTH:PREDICTIONS:MIN) needs --pair-objective none",
        ),
        (dupe_factor >= 1, "--dupe-factor must be at least 1"),
        (0 < args.masked_lm_prob < 1, "--masked-lm-prob must be between 0 and 1"),
        (0 <= args.short_seq_prob <= 1, "--short-seq-prob must be between 0 and 1"),
        (args.eval_fraction is None or 0 <= args.eval_fraction < 1, "--eval-fraction must be in [0, 1)"),
        (args.bucket_mb > 0, "--bucket-mb must be positive"),
        (
            0 < args.language_sampling_alpha <= 1,
            f"--language-sampling-alpha must be in (0, 1], not {args.language_sampling_alpha:g} (1 keeps each "
            "language's share as it comes, 0.7 is multilingual BERT's, 0.3 XLM-R's)",
        ),
        (
            args.bin_size is None or 0 < args.bin_size < shortest,
            f"--bin-size must be between 1 and the sequence length less one ({shortest - 1})",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    check_language_flags(args)
    segmenter = check_segmenter_name(args.segmenter)
    words, dict_sha256 = (), None
    if args.segmenter_dict:
        if segmenter != "jieba":
            raise ValueError("--segmenter-dict adds words to --segmenter jieba's dictionary")
        words, dict_sha256 = _read_segmenter_dict(args.segmenter_dict)
    if args.whole_word_mask and segmenter != "none":
        check_segmenter(SegmenterSpec(segmenter, words))
    return CreateConfig(
        inputs=list(args.input),
        output=args.output,
        vocab=args.vocab,
        tokenizer=args.tokenizer,
        megatron_sequences=(args.megatron_sequences or "sentences") if megatron else None,
        provenance=args.provenance,
        special_tokens=parse_special_tokens(args.special_token or [], args.tokenizer),
        input_format=args.input_format,
        seq_configs=seq_configs,
        dupe_factor=dupe_factor,
        masked_lm_prob=args.masked_lm_prob,
        short_seq_prob=args.short_seq_prob,
        seed=args.seed,
        do_lower_case=args.do_lower_case,
        whole_word_mask=args.whole_word_mask,
        masking=masking,
        pair_objective=args.pair_objective,
        bin_size=args.bin_size,
        record_format=args.record_format,
        mds_ids=args.mds_ids or ("int64" if record_format == "mds" else None),
        num_shards=args.num_shards or 0,
        eval_fraction=args.eval_fraction,
        num_buckets=args.num_buckets or 0,
        bucket_mb=args.bucket_mb,
        max_document_mb=args.max_document_mb,
        strict=args.strict,
        max_error_rate=args.max_error_rate,
        segmenter=segmenter,
        segmenter_words=words,
        segmenter_dict_sha256=dict_sha256,
        language=args.language,
        languages=tuple(args.languages),
        min_language_confidence=args.min_language_confidence,
        language_sampling_alpha=args.language_sampling_alpha,
    )


def check_megatron(args, seq_configs: list[SeqConfig]) -> None:
    """What --record-format megatron cannot honour, refused in one line: Megatron builds its pairs and draws its
    masks itself, at load time, for the --seq-length it is given."""
    load_time = "Megatron pairs and masks the sentences at load time, with its own options"
    checks = [
        (args.masking != "static", f"--record-format megatron takes no static masks: {load_time}"),
        (args.bin_size is None, f"--bin-size: {load_time} and builds its own samples"),
        (not args.whole_word_mask, f"--whole-word-mask: {load_time} (its --masking-do-full-word)"),
        (
            len(seq_configs) == 1,
            "--record-format megatron writes sentences, not instances of a length: give one --max-seq-length (the "
            "longest a sentence may be, as Megatron's --seq-length) instead of --seq-configs",
        ),
        (
            args.megatron_sequences != "documents" or args.pair_objective == "none",
            "--megatron-sequences documents gives no sentences to pair: it needs --pair-objective none",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def parse_special_tokens(words: list[str], tokenizer: str | None) -> tuple[tuple[str, str], ...]:
    """--special-token ROLE=TOKEN flags → ((role, token), ...), sorted; only with --tokenizer."""
    if words and tokenizer is None:
        raise ValueError(
            "--special-token names a token of a tokenizer.json: it needs --tokenizer (a vocab.txt has BERT's)"
        )
    named = {}
    for word in words:
        role, sep, token = word.partition("=")
        if not sep or not token or role not in SPECIAL_ROLES:
            raise ValueError(
                f"--special-token wants ROLE=TOKEN with ROLE one of {', '.join(SPECIAL_ROLES)}, such as "
                f"mask=<mask>; got {word!r}"
            )
        named[role] = token
    return tuple(sorted(named.items()))


def _read_segmenter_dict(path: str) -> tuple[tuple, str]:
    """(the words of --segmenter-dict, its sha256), read at launch: a missing or bad file stops the run here."""
    try:
        with FileSystems.open(path, compression_type="uncompressed") as f:
            data = f.read()
    except Exception as e:  # each filesystem raises its own types
        raise ValueError(f"--segmenter-dict {path}: cannot read it ({str(e).splitlines()[0]})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError(f"--segmenter-dict {path} is not UTF-8 text") from None
    return parse_user_dict(text, f"--segmenter-dict {path}"), hashlib.sha256(data).hexdigest()
