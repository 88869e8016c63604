"""create's sizing at full scale, simulated: the listing of an 18.5 GB Wikipedia + BooksCorpus input goes through the
launch code's sizing, and what it decides is checked against the bounds docs/dataflow.md states. No 18 GB run: a
bucket's memory is measured on a real bucket of the bundled books, and the records' size on a real run."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest

from bertcorpus.pipeline.create.config import RECORD_BYTES_PER_TEXT_BYTE, SHARD_TARGET_MB, CreateConfig, bucket_key
from bertcorpus.pipeline.create.job_vocab import JobVocab
from bertcorpus.pipeline.create.steps import BuildInstances, TokenizeBuckets
from bertcorpus.pipeline.create.values import BucketMessage, InstancePieceCoder
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.transforms.instances import SeqConfig
from bertcorpus.wordpiece.vocab import read_vocab_bytes

from conftest import VOCAB, book_sections

MB = 2**20
DATAFLOW_DOC = Path(__file__).resolve().parent.parent / "docs" / "dataflow.md"
# The full corpus as extract-wiki and extract-books leave it (docs/dataflow.md): 14 GB of article text in about
# 6.2 M articles, 4.5 GB of books in about 11,000 books, as zstd Parquet shards of ~128 MB of text each.
WIKI_TEXT, WIKI_DOCUMENTS = 14e9, 6_200_000
BOOKS_TEXT, BOOKS = 4.5e9, 11_000
SEQ_CONFIGS = [SeqConfig(128, 20), SeqConfig(512, 80)]


def full_corpus_listing() -> list[tuple[str, int]]:
    """(path, size) of every documents file, as FileSystems.match lists them: ~145 Parquet shards."""
    listing = []
    for source, text in (("wiki", WIKI_TEXT), ("books", BOOKS_TEXT)):
        shards = round(text / (128 * MB))
        listing += [
            (f"gs://corpus/{source}/documents-{i:05d}-of-{shards:05d}.parquet", round(text / shards / 2.5))
            for i in range(shards)
        ]
    return listing


def documented(name: str) -> float:
    """A bound docs/dataflow.md states in its plan, e.g. 'memory per bucket: at most 512 MB'."""
    found = re.search(rf"{name}: (?:at most |about )?([\d,.]+) MB", DATAFLOW_DOC.read_text())
    assert found, f"docs/dataflow.md states no '{name}'"
    return float(found.group(1).replace(",", ""))


@pytest.fixture(scope="module")
def plan() -> CreateConfig:
    config = CreateConfig(
        inputs=["gs://corpus/*/documents-*.parquet"], output="gs://corpus/records", vocab="v", seq_configs=SEQ_CONFIGS
    )
    return config.resolved(sum(estimated_text_bytes(path, size) for path, size in full_corpus_listing()))


def largest_bucket_text(config: CreateConfig) -> float:
    """The most text one bucket receives, with documents placed by create's own bucket hash. Books, few and large,
    make the tail: all 11,000 are placed. Articles are many and small, so their share per bucket varies little: a
    1/32 slice is placed over 1/32 of the buckets, which keeps their number per bucket."""
    books = Counter(bucket_key(f"books:book-{i:05d}", "train", config) for i in range(BOOKS))
    slice_ = CreateConfig(inputs=[], output="", vocab="", num_buckets=config.num_buckets // 32)
    articles = Counter(bucket_key(f"enwiki:{i}", "train", slice_) for i in range(WIKI_DOCUMENTS // 32))
    return max(books.values()) * BOOKS_TEXT / BOOKS + max(articles.values()) * WIKI_TEXT / WIKI_DOCUMENTS


def peak_memory(steps) -> tuple[list, int]:
    """What the steps yield, and the peak memory traced while they ran."""
    tracemalloc.start()
    try:
        made = list(steps)
        return made, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bucket_memory_per_text_mb() -> float:
    """Peak memory of one real bucket of ~1 MB of book text at 128/20 and 512/80, dupe factor 10, per MB of its
    text, in each of its two steps: tokenising it (and cutting the fragments it sends to four other buckets),
    then building its instances with the fragments four buckets sent it. Instances are encoded as they come, as a
    runner takes them."""
    docs = [SourceDocument(doc_id, text) for doc_id, text in book_sections()]
    size = sum(len(doc.text.encode()) for doc in docs)
    config = CreateConfig(
        inputs=[],
        output="",
        vocab=str(VOCAB),
        seq_configs=SEQ_CONFIGS,
        num_buckets=5,
        num_shards=1448,
        eval_fraction=0.0,
    )
    vocab = JobVocab(str(VOCAB), None, read_vocab_bytes(str(VOCAB)))
    tokenize, build = TokenizeBuckets(config, vocab), BuildInstances(config, vocab)
    tokenize.setup()
    build.setup()
    others = [f"train/{i:06d}" for i in range(1, 5)]
    targets = {"train/000000": (5, others)}
    list(tokenize.process(("train/000000", docs[:2]), targets))  # the tokenizer's own tables, made once per worker
    made, tokenizing = peak_memory(
        kv for kv in tokenize.process(("train/000000", docs), targets) if isinstance(kv, tuple)
    )
    bucket = [value for key, value in made if key == "train/000000"]
    # The four buckets before it send it what it sends the four after it: as many fragments, of the same text.
    sent = [value for key, value in made if key != "train/000000"]
    received = [BucketMessage(fragments.bucket, sender=sender) for sender, fragments in zip(others, sent)]
    assert len(bucket) == 1 and len(received) == 4 and all(len(f.bucket) > 20 for f in received)
    coder = InstancePieceCoder()
    instances, building = peak_memory(
        coder.encode(piece)
        for key, piece in (i for i in build.process(("train/000000", bucket + received)) if isinstance(i, tuple))
    )
    assert len(instances) > 100
    return max(tokenizing, building) / (size / MB)


def test_buckets_hold_the_documented_text_and_fit_the_documented_memory(plan):
    text_mb = (WIKI_TEXT + BOOKS_TEXT) / MB
    assert abs(plan.num_buckets - text_mb / plan.bucket_mb) <= 1  # ~1 MB of text each, not of compressed Parquet
    largest = largest_bucket_text(plan) / MB
    assert 1 < largest < documented("largest bucket")
    per_mb = bucket_memory_per_text_mb() / MB
    assert per_mb * largest < documented("memory per bucket")


def test_shards_come_out_near_the_documented_size(plan, records_dir):
    # The records' bytes per byte of text per dupe pass, on a real run of the bundled text.
    manifest = json.loads((records_dir / "manifest.json").read_text())
    text = sum(f["size"] for f in manifest["inputs"])  # JSONL and plain text: their size is their text, near enough
    records = sum(s["bytes"] for split in ("train", "eval") for s in manifest["outputs"]["seq128"][split]["shards"])
    measured = records / text / manifest["config"]["dupe_factor"]
    assert abs(measured / RECORD_BYTES_PER_TEXT_BYTE - 1) < 0.15
    shard_mb = measured * (WIKI_TEXT + BOOKS_TEXT) * plan.dupe_factor / plan.num_shards / MB
    assert documented("train shard size") == SHARD_TARGET_MB
    assert 0.85 * SHARD_TARGET_MB < shard_mb < 1.15 * SHARD_TARGET_MB
    assert plan.num_shards % 4 == 0 and plan.eval_shards >= 1
