"""What a stage costs and yields per MB of its input, as this project measures it: the one place `bertcorpus plan`
takes its figures from.

The CPU rates come from benchmarks/bench_plan.py, which runs each local stage in memory on real inputs (the
bundled Wikipedia sample and the shared Gutenberg books) at 2× and 8×, fits a start-up cost and a cost per MB
to the two runs, and checks the fit against runs at 1× and 4× (docs/benchmarks.md, "bertcorpus plan", gives the
command, the machine and the figures). The yields and memory figures are the measurements docs/dataflow.md and
docs/benchmarks.md cite beside them. MB is 10^6 bytes throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 1_000_000
MIB = 2**20


@dataclass(frozen=True)
class CpuRate:
    """CPU of a local run in memory: a fixed start-up (the interpreter, Beam, the graph, publishing) and a cost per
    MB of what the stage reads."""

    start_s: float
    per_mb_s: float


# --- CPU, fitted by benchmarks/bench_plan.py --fit --repeat 2 (2× and 8×; 2026-11-28, load average 3–5) ---------
EXTRACT_WIKI = CpuRate(start_s=1.56, per_mb_s=0.0845)  # per MB of dump XML (a .bz2 holds 3.5 bytes of XML per byte)
EXTRACT_BOOKS = CpuRate(start_s=1.99, per_mb_s=0.0750)  # per MB of book files, decompressed
DEDUP = CpuRate(start_s=2.59, per_mb_s=0.0521)  # per MB of document text, every source together
VOCAB = CpuRate(start_s=2.33, per_mb_s=0.0971)  # per MB of sampled text: counting and training in this process
VOCAB_BEAM_PER_MB_S = 0.28  # per MB of sampled text with --count-with-beam (docs/benchmarks.md, vocab)
CREATE = CpuRate(start_s=0.94, per_mb_s=0.1331)  # per MB of text: reading and tokenising it once
CREATE_PASS_PER_MB_S = 0.0308  # per MB of text, for each dupe pass of each seq config: pairs, masks, records
# Each local worker process (--direct_running_mode multi_processing) starts its own interpreter and Beam: 1.6 CPU-s
# (docs/benchmarks.md, vocab: 20 documents in memory and on 2 worker processes).
LOCAL_WORKER_START_S = 1.6

# dedup's cost per MB varies with what the corpus holds: the project's earlier sizing of the chain measured up to
# 0.13 CPU-s per MB on ordinary text, and 3.7–6.3 on corpora of near-identical bot-written stubs, whose clusters
# are large and every candidate pair of which is measured.
DEDUP_ORDINARY_HIGH_PER_MB_S = 0.13
DEDUP_BOT_STUBS_PER_MB_S = (3.7, 6.3)
# Decontamination against benchmark files: extra CPU-s per MB of text, from 10% to 100% of a SQuAD v2 file's
# paragraphs present in the corpus (docs/benchmarks.md, dedup).
DECONTAMINATION_PER_MB_S = (0.111, 0.487)

# --- Yields ----------------------------------------------------------------------------------------------------
# A full pages-articles dump: ≈ 6.2 M articles kept of ≈ 100 GB of XML (docs/dataflow.md §7).
WIKI_ARTICLES_PER_XML_MB = 62.0
# Book files keep ≈ 0.97 of their bytes as text (licence headers, tables of contents and page furniture removed).
BOOK_TEXT_PER_FILE_BYTE = 0.97
# Records per MB of text, for each dupe pass, by sequence length with NSP (the bundled wiki + books corpus; the
# records manifest's counts); lengths between are interpolated on a log scale.
INSTANCES_PER_TEXT_MB = {128: 2_280.0, 512: 800.0}
# WordPiece tokens per MB of English text with a 30k uncased vocab (without [CLS] and [SEP]).
TOKENS_PER_TEXT_MB = 245_000.0
# Bytes of records per byte of text per seq config, per dupe pass: static TFRecords (create's own sizing),
# dynamic Parquet and MDS (docs/benchmarks.md, "The recipes of create").
DYNAMIC_RECORD_BYTES_PER_TEXT_BYTE = {"parquet": 0.48, "mds": 0.61}
# The records of a shuffle piece, zstd-compressed columns.
RECORDS_PER_SHUFFLED_BYTE = 3.2
# A vocab folder: vocab.txt, tokenizer.json, tokenizer_config.json and the manifest, per line of the vocab (the
# 8,000-line vocab folder of bench_plan's runs: 237 kB).
VOCAB_FOLDER_BYTES_PER_TOKEN = 30.0
# What crosses dedup's shuffles per document: its id, 160 MinHash values, 20 band keys and the pairs they match.
DEDUP_SHUFFLE_BYTES_PER_DOCUMENT = 2_000.0

# --- Memory per worker -----------------------------------------------------------------------------------------
WORKER_BASE_BYTES = 350 * MB  # a Python SDK worker with Beam, pyarrow and numpy loaded, before any data
DOCUMENT_SHARD_BYTES_PER_TEXT_BYTE = 2.5  # a documents shard being written: its rows, then its Parquet buffer
CREATE_BUCKET_BYTES_PER_TEXT_MIB = 65 * MIB  # building a bucket at 128/20 + 512/80 (tests/test_scale_plan.py)
CREATE_LARGEST_BUCKET = 3.2  # the largest bucket over the mean, books being few and large (docs/dataflow.md §7)
CREATE_SHARD_BYTES_PER_RECORD_BYTE = 1.1  # writing a shard: its pieces, their columns, a sort order
CREATE_SHARD_BASE_BYTES = 20 * MIB
VOCAB_BYTES_PER_DISTINCT_WORD = 1_600  # the word counts and the trainer's tables
# Distinct words in n words of English text (Heaps' law, fitted to the vocab runs of docs/vocab.md).
HEAPS_K, HEAPS_BETA = 44.0, 0.49
WORDS_PER_TEXT_MB = 170_000.0

# --- Engines ---------------------------------------------------------------------------------------------------
# CPU of the same work on an engine over the direct runner's in memory (docs/benchmarks.md, "Flink and Spark
# clusters": 1.6–2.2×; Spark is taken to cost as Flink does), and what a job costs to start.
ENGINE_CPU_FACTOR = {"local": 1.0, "dataflow": 1.0, "flink": 2.2, "spark": 2.2, "portable": 1.0}
ENGINE_START_CPU_S = {"local": 0.0, "dataflow": 0.0, "flink": 55.0, "spark": 55.0, "portable": 10.0}
ENGINE_START_WALL_S = {"local": 0.0, "dataflow": 240.0, "flink": 30.0, "spark": 30.0, "portable": 10.0}
# The share of its workers' vCPUs a remote job keeps busy once running (its shuffles and its stragglers).
REMOTE_UTILISATION = 0.5
