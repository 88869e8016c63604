"""Each stage's size, from what it reads: documents, buckets, shards, instances, CPU, memory, shuffle and output.

A stage is estimated in two steps. Its size and its CPU on this machine, in memory, come from its input
(`extract_wiki`, `extract_books`, `dedup`, `vocab`, `create`); `on_workers` then moves the CPU to the engine that
runs it and adds the wall time. Buckets and shards are the jobs' own: the same sizing code decides them from the
same listing. The rates are those of rates.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from bertcorpus.pipeline.create.config import RECORD_BYTES_PER_TEXT_BYTE, CreateConfig
from bertcorpus.pipeline.extract.wiki_command import ARTICLE_TEXT_PER_XML_BYTE
from bertcorpus.pipeline.inputs.streams import TEXT_PER_STORED_BYTE, estimated_text_bytes
from bertcorpus.pipeline.plan import rates
from bertcorpus.pipeline.plan.prices import Workers, engine_cpu_seconds, wall_seconds
from bertcorpus.pipeline.sinks.documents import default_num_shards

PARQUET_TEXT_PER_BYTE = TEXT_PER_STORED_BYTE[".parquet"]
LAUNCHER = Workers("local", 1, 1, 0.0)  # the machine that runs the command, in one process


@dataclass
class Input:
    """What a stage reads: files as listed (path, size), the text they are estimated to hold, their documents
    where known, and the patterns left unlisted (a dry run lists no remote input)."""

    files: list[tuple[str, int]] = field(default_factory=list)
    text_bytes: float = 0.0
    documents: int | None = None
    not_listed: list[str] = field(default_factory=list)

    @classmethod
    def listed(cls, files: list[tuple[str, int]], documents: int | None = None, not_listed=()) -> Input:
        text = sum(estimated_text_bytes(path, size) for path, size in files)
        return cls(list(files), text, documents, list(not_listed))

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.files)


@dataclass
class Stage:
    name: str
    input: Input
    work_mb: float  # the MB the stage's CPU rate is per: dump XML, book bytes or text
    start_cpu_s: float
    work_cpu_s: float
    documents: int | None = None
    buckets: int | None = None
    shards: int | None = None
    instances: dict[str, dict[str, int]] = field(default_factory=dict)
    peak_memory_bytes: int = 0
    shuffle_bytes: int = 0
    output_bytes: int = 0
    output_text_bytes: float = 0.0  # for the next stage of a chain
    output_documents: int | None = None
    notes: list[str] = field(default_factory=list)
    runs_here: bool = False  # on the launching machine whatever the runner (vocab without --count-with-beam)
    cpu_seconds: float = 0.0  # on its workers: set by on_workers
    wall_seconds: float = 0.0

    def on_workers(self, workers: Workers) -> Stage:
        workers = LAUNCHER if self.runs_here else workers
        self.cpu_seconds = engine_cpu_seconds(self.start_cpu_s, self.work_cpu_s, workers)
        self.wall_seconds = wall_seconds(self.cpu_seconds, workers)
        return self

    def record(self) -> dict:
        """The stage for --json: sizes in bytes, times in seconds."""
        return {
            "name": self.name,
            "input_files": len(self.input.files),
            "input_bytes": self.input.bytes,
            "input_text_bytes": round(self.input.text_bytes),
            "inputs_not_listed": self.input.not_listed,
            "work_mb": round(self.work_mb, 3),
            "documents": self.documents,
            "buckets": self.buckets,
            "shards": self.shards,
            "instances": self.instances,
            "cpu_seconds": round(self.cpu_seconds, 1),
            "cpu_hours": round(self.cpu_seconds / 3600, 4),
            "wall_seconds": round(self.wall_seconds, 1),
            "peak_memory_bytes": int(self.peak_memory_bytes),
            "shuffle_bytes": int(self.shuffle_bytes),
            "output_bytes": int(self.output_bytes),
            "notes": self.notes,
        }


def _documents_shard_memory(text_bytes: float, shards: int, workers: Workers) -> int:
    """A worker writing a documents shard holds its rows: on a remote runner one shard's text; a local run keeps
    every document of the grouping in its one process."""
    held = text_bytes if workers.engine == "local" else text_bytes / max(shards, 1)
    return int(rates.WORKER_BASE_BYTES + rates.DOCUMENT_SHARD_BYTES_PER_TEXT_BYTE * held)


def _extraction(name: str, read: Input, rate, text: float, documents: int, num_shards: int, workers, note) -> Stage:
    """An extraction: its documents cross one shuffle to the shard writers, which write them as Parquet."""
    mb = read.text_bytes / rates.MB
    return Stage(
        name,
        read,
        mb,
        rate.start_s,
        rate.per_mb_s * mb,
        documents=documents,
        shards=num_shards,
        peak_memory_bytes=_documents_shard_memory(text, num_shards, workers),
        shuffle_bytes=int(text),
        output_bytes=int(text / PARQUET_TEXT_PER_BYTE),
        output_text_bytes=text,
        output_documents=documents,
        notes=[note],
    )


def extract_wiki(dumps: Input, num_shards: int, workers: Workers) -> Stage:
    """A dump's "text" is its XML (a .bz2 holds 3.5 bytes of it per byte), of which articles keep a share."""
    articles = round(rates.WIKI_ARTICLES_PER_XML_MB * dumps.text_bytes / rates.MB)
    note = (
        f"articles and text as a full pages-articles dump yields them ({rates.WIKI_ARTICLES_PER_XML_MB:g} per MB of "
        f"XML, {ARTICLE_TEXT_PER_XML_BYTE:.0%} of it text); a small sample's differ"
    )
    text = ARTICLE_TEXT_PER_XML_BYTE * dumps.text_bytes
    return _extraction("extract-wiki", dumps, rates.EXTRACT_WIKI, text, articles, num_shards, workers, note)


def extract_books(books: Input, num_shards: int, workers: Workers) -> Stage:
    note = "one document per book file; copies that the job removes are counted"
    text = rates.BOOK_TEXT_PER_FILE_BYTE * books.text_bytes
    return _extraction("extract-books", books, rates.EXTRACT_BOOKS, text, len(books.files), num_shards, workers, note)


def dedup(sources: Input, num_shards: int, decontaminate: bool, workers: Workers) -> Stage:
    mb = sources.text_bytes / rates.MB
    documents = sources.documents or _documents_in(sources.text_bytes)
    work = rates.DEDUP.per_mb_s * mb
    low, high = rates.DEDUP_BOT_STUBS_PER_MB_S
    notes = [
        f"{rates.DEDUP.per_mb_s:g} CPU-s per MB of ordinary text (up to {rates.DEDUP_ORDINARY_HIGH_PER_MB_S:g} "
        f"measured: {_cpu(rates.DEDUP_ORDINARY_HIGH_PER_MB_S * mb)} here); a corpus of near-identical bot-written "
        f"stubs costs {low:g}–{high:g} ({_cpu(high * mb)} here)"
    ]
    if decontaminate:
        least, most = rates.DECONTAMINATION_PER_MB_S
        work += least * mb
        notes.append(
            f"decontamination counted at {least:g} CPU-s per MB; up to {most:g} where most benchmark text is found"
        )
    return Stage(
        "dedup",
        sources,
        mb,
        rates.DEDUP.start_s,
        work,
        documents=documents,
        shards=num_shards,
        peak_memory_bytes=_documents_shard_memory(sources.text_bytes, num_shards, workers),
        shuffle_bytes=int(documents * rates.DEDUP_SHUFFLE_BYTES_PER_DOCUMENT),
        output_bytes=int(sources.text_bytes / PARQUET_TEXT_PER_BYTE),
        output_text_bytes=sources.text_bytes,
        output_documents=documents,
        notes=notes + ["output as large as the input: what is removed is not known before the run"],
    )


def distinct_words(text_bytes: float, max_words: int) -> int:
    """Distinct words in that much English text (Heaps' law), at most what counting keeps."""
    words = rates.WORDS_PER_TEXT_MB * text_bytes / rates.MB
    return int(min(max_words, rates.HEAPS_K * words**rates.HEAPS_BETA))


def vocab(text: Input, sample_fraction: float, vocab_size: int, max_words: int, with_beam: bool) -> Stage:
    mb = sample_fraction * text.text_bytes / rates.MB
    per_mb = rates.VOCAB_BEAM_PER_MB_S if with_beam else rates.VOCAB.per_mb_s
    words = distinct_words(sample_fraction * text.text_bytes, max_words)
    return Stage(
        "vocab",
        text,
        mb,
        rates.VOCAB.start_s,
        per_mb * mb,
        documents=text.documents or _documents_in(text.text_bytes),
        # Training runs in this process, whatever runs the counting.
        peak_memory_bytes=int(rates.WORKER_BASE_BYTES + rates.VOCAB_BYTES_PER_DISTINCT_WORD * words),
        shuffle_bytes=int(words * 30) if with_beam else 0,
        output_bytes=int(vocab_size * rates.VOCAB_FOLDER_BYTES_PER_TOKEN),
        notes=[
            f"≈ {words:,} distinct words trained on (--max-words {max_words:,})"
            + ("" if with_beam else "; counted and trained on this machine (--count-with-beam counts on the runner)")
        ],
        runs_here=not with_beam,
    )


def instances_per_text_mb(length: int, pair_objective: str) -> float:
    """Instances of one dupe pass per MB of text at this sequence length."""
    if pair_objective == "none":  # sentences packed across documents fill nearly every slot
        return rates.TOKENS_PER_TEXT_MB / (length - 2)
    measured = sorted(rates.INSTANCES_PER_TEXT_MB.items())
    (low, at_low), (high, at_high) = measured[0], measured[-1]
    if length <= low:
        return at_low * (low - 3) / (length - 3)
    if length >= high:
        return at_high * (high - 3) / (length - 3)
    share = math.log(length / low) / math.log(high / low)
    return math.exp((1 - share) * math.log(at_low) + share * math.log(at_high))


def _record_bytes_per_text_byte(config: CreateConfig) -> float:
    if config.file_format == "tfrecord":
        return RECORD_BYTES_PER_TEXT_BYTE
    return rates.DYNAMIC_RECORD_BYTES_PER_TEXT_BYTE[config.file_format]


def create(text: Input, config: CreateConfig, workers: Workers) -> Stage:
    """`config` as the job resolves it from the same text (CreateConfig.resolved): its buckets and shards."""
    mb = text.text_bytes / rates.MB
    passes = config.dupe_factor * len(config.seq_configs)
    instances = {}
    for seq in config.seq_configs:
        total = round(instances_per_text_mb(seq.max_seq_length, config.pair_objective) * mb * config.dupe_factor)
        held_out = round(total * config.eval_fraction)
        instances[seq.name] = {"train": total - held_out, "eval": held_out}
    records = _record_bytes_per_text_byte(config) * text.text_bytes * passes
    shard_records = _record_bytes_per_text_byte(config) * text.text_bytes * config.dupe_factor / config.num_shards
    bucket_text_mib = config.bucket_mb * rates.CREATE_LARGEST_BUCKET if workers.engine != "local" else 0
    held = max(
        rates.CREATE_BUCKET_BYTES_PER_TEXT_MIB * bucket_text_mib * len(config.seq_configs) / 2,
        rates.CREATE_SHARD_BYTES_PER_RECORD_BYTE * shard_records + rates.CREATE_SHARD_BASE_BYTES,
    )
    return Stage(
        "create",
        text,
        mb,
        rates.CREATE.start_s,
        rates.CREATE.per_mb_s * mb + rates.CREATE_PASS_PER_MB_S * mb * passes,
        documents=text.documents or _documents_in(text.text_bytes),
        buckets=config.num_buckets + (config.eval_buckets if config.eval_fraction else 0),
        shards=(config.num_shards + config.eval_shards) * len(config.seq_configs),
        instances=instances,
        peak_memory_bytes=int(rates.WORKER_BASE_BYTES + held),
        # the documents to their buckets, each bucket's fragments to four others, the records to their shards
        shuffle_bytes=int(2 * text.text_bytes + records / rates.RECORDS_PER_SHUFFLED_BYTE),
        output_bytes=int(records),
        notes=[f"{config.dupe_factor} dupe passes × {len(config.seq_configs)} seq configs, {config.file_format}"],
    )


def joined(inputs: list[Input]) -> Input:
    """Several inputs read as one: their files, text and documents (unknown if any one's is)."""
    documents = [i.documents for i in inputs]
    return Input(
        [f for i in inputs for f in i.files],
        sum(i.text_bytes for i in inputs),
        None if None in documents else sum(documents),
        [p for i in inputs for p in i.not_listed],
    )


def documents_output(stage: Stage) -> Input:
    """What a later stage of a chain reads from this one: its documents, as Parquet of the predicted size."""
    files = [(f"{stage.name}/documents-*.parquet", stage.output_bytes)] if stage.output_bytes else []
    return Input(files, stage.output_text_bytes, stage.output_documents)


def documents_shards(text_bytes: float) -> int:
    return default_num_shards(math.ceil(text_bytes))


# The mean article of a full dump: 14 GB of text in ≈ 6.2 M articles; used where a documents count is not listed.
_MEAN_DOCUMENT_TEXT = 14e9 / 6.2e6


def _documents_in(text_bytes: float) -> int:
    return max(1, round(text_bytes / _MEAN_DOCUMENT_TEXT))


def _cpu(seconds: float) -> str:
    return f"{seconds / 3600:.2f} CPU-h" if seconds >= 3600 else f"{seconds:,.0f} CPU-s"
