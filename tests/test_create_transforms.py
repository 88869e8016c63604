"""create's steps one at a time, each in a TestPipeline with assert_that, on real text: bucketing, the ring that
NSP negatives travel around, tokenising buckets, building instances and writing shards."""

from __future__ import annotations

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import BeamAssertException, assert_that, equal_to, is_not_empty

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import CreateConfig
from bertcorpus.pipeline.create.job_vocab import JobVocab
from bertcorpus.pipeline.create.publish import Publish, random_next_bound
from bertcorpus.pipeline.create.shard_writing import WriteShards
from bertcorpus.pipeline.create.steps import (
    NEGATIVE_TARGETS,
    BuildInstances,
    TokenizeBuckets,
    UnbalancedSplitError,
    assign_buckets,
    fragment_targets,
    plan_negatives,
)
from bertcorpus.pipeline.create.values import BucketMessage
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.transforms.instances import (
    Bucket,
    InstanceBatch,
    RandomNexts,
    create_instances_from_document,
    sample_fragments,
)
from bertcorpus.transforms.seeding import python_rng
from bertcorpus.wordpiece.vocab import read_vocab_bytes

from conftest import BOOKS, SAMPLE_TEXT, VOCAB, book_sections

LOCAL = ["--runner=DirectRunner"]


def config(**overrides) -> CreateConfig:
    settings = {
        "inputs": [],
        "output": "",
        "vocab": str(VOCAB),
        "num_buckets": 4,
        "num_shards": 2,
        "eval_fraction": 0.1,
        "dupe_factor": 2,
        **overrides,
    }
    return CreateConfig(**settings)


def job_vocab() -> JobVocab:
    return JobVocab(str(VOCAB), None, read_vocab_bytes(str(VOCAB)))


def documents() -> list[SourceDocument]:
    return [SourceDocument(doc_id, text) for doc_id, text in book_sections()]


def all_true(found: list) -> None:
    if not found or not all(found):
        raise BeamAssertException(f"expected only True, found {found}")


def test_assign_buckets_keys_every_document_by_split_and_bucket():
    cfg = config()
    expected = [key for doc in documents() for key, _ in assign_buckets(doc, cfg)]
    assert len(expected) == len(documents()) and {k.split("/")[0] for k in expected} == {"train", "eval"}
    with TestPipeline(argv=LOCAL) as p:
        assigned = (
            p | beam.Create(documents()) | beam.FlatMap(assign_buckets, cfg).with_outputs(tally.TALLY, main="docs")
        )
        assert_that(assigned.docs | beam.Keys(), equal_to(expected))


def test_a_document_over_the_cap_goes_to_buckets_as_pieces_of_its_split(tmp_path):
    """A real book cut at 20,000 characters as it is read: its pieces end at paragraphs, have ids of their own and
    buckets of their own, but all stay in the split of the book, and together they are the book."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bertcorpus.pipeline.inputs.formats import ReadStats
    from bertcorpus.pipeline.inputs.reads import read_documents

    cfg = config(max_document_mb=0.02, num_buckets=16, eval_fraction=0.5)
    text = BOOKS[1].read_text(encoding="utf-8")
    path = tmp_path / "books.parquet"
    columns = {"id": ["84-0"], "text": [text], "language": ["en"], "language_confidence": [0.97]}
    pq.write_table(pa.table(columns), path)
    stats = ReadStats(str(path))
    pieces = list(read_documents(str(path), "auto", stats, cap=cfg.max_document_chars))
    assert "".join(p.text for p in pieces) == text and all(len(p.text) <= 20_000 for p in pieces)
    assert all(p.text.endswith("\n\n") for p in pieces[:-1])  # at paragraph boundaries
    assert [p.id for p in pieces] == [f"84-0#part-{n}" for n in range(1, len(pieces) + 1)]
    assert {(p.whole_id, p.language, p.language_confidence) for p in pieces} == {("84-0", "en", 0.97)}
    assert (stats.documents, stats.split, stats.pieces) == (1, 1, len(pieces))
    for seed in range(4):
        cfg.seed = seed
        keyed = [key for piece in pieces for key, _ in assign_buckets(piece, cfg)]
        assert len({key.split("/")[0] for key in keyed}) == 1
        # a bucket each, beside the planned ones: however few were planned (a compressed file's one huge line),
        # a worker holds one piece at a time
        assert len(set(keyed)) == len(pieces)
    cfg.num_buckets = 1
    assert len({key for piece in pieces for key, _ in assign_buckets(piece, cfg)}) == len(pieces)


def test_a_split_of_one_document_is_refused_as_buckets_are_planned():
    """Before any document is tokenised: NSP has no random next segment for the only document of a split."""
    cfg = config()
    buckets = [("train/000001", (1, "a")), ("train/000002", (1, "b")), ("eval/000000", (2, "c"))]
    assert plan_negatives(buckets, cfg) == fragment_targets([key for key, _ in buckets], cfg.seed)
    with pytest.raises(UnbalancedSplitError, match=r"^the eval split holds a single document \(c\), .*--eval-fraction"):
        plan_negatives([*buckets[:2], ("eval/000000", (0, None)), ("eval/000001", (1, "c"))], cfg)
    assert plan_negatives([("train/000001", (1, "a"))], config(pair_objective="sop"))  # SOP swaps, draws nothing


def test_every_bucket_draws_negatives_from_as_many_other_buckets_of_its_split():
    keys = [f"train/{i:06d}" for i in range(9)] + ["eval/000000", "eval/000001"]
    targets = fragment_targets(keys, seed=12345)
    senders = {key: [] for key in keys}
    for key, (ring_size, receivers) in targets.items():
        assert ring_size == (9 if key.startswith("train") else 2)
        assert key not in receivers and all(r.split("/")[0] == key.split("/")[0] for r in receivers)
        for receiver in receivers:
            senders[receiver].append(key)
    assert all(len(senders[k]) == NEGATIVE_TARGETS for k in keys if k.startswith("train"))
    assert senders["eval/000000"] == ["eval/000001"] and senders["eval/000001"] == ["eval/000000"]
    assert fragment_targets(["train/000003"], seed=1) == {"train/000003": (1, [])}  # alone: its own documents
    assert fragment_targets(keys, seed=1) != targets  # the ring's order follows the seed


def test_tokenize_buckets_sends_fragments_of_its_own_documents_to_its_receivers():
    cfg = config()
    docs = documents()[:12]
    targets = {"train/000000": (3, ["train/000001", "train/000002"])}
    with TestPipeline(argv=LOCAL) as p:
        out = (
            p
            | beam.Create([("train/000000", docs)])
            | beam.ParDo(TokenizeBuckets(cfg, job_vocab()), targets=targets).with_outputs(tally.TALLY, main="out")
        )
        sent = out.out | beam.Filter(lambda kv: kv[1].sender is not None)
        assert_that(
            sent | "receivers" >> beam.Map(lambda kv: (kv[0], kv[1].sender)),
            equal_to([("train/000001", "train/000000"), ("train/000002", "train/000000")]),
            label="fragments go to the receivers",
        )
        own_ids = {doc.id for doc in docs}
        donors = sent | "donors" >> beam.FlatMap(lambda kv: kv[1].bucket.doc_ids)
        assert_that(
            donors | beam.Map(lambda donor: donor in own_ids),
            all_true,
            label="fragments come from the bucket's documents",
        )
        assert_that(
            out.out
            | beam.Filter(lambda kv: kv[1].sender is None)
            | beam.Map(lambda kv: (len(kv[1].bucket), kv[1].ring_size)),
            equal_to([(12, 3)]),
            label="the bucket itself",
        )


def test_random_next_segments_come_from_the_pool_only():
    rng = python_rng(1, "test")
    tokens = np.arange(1000, 1000 + 40 * 30, dtype=np.int32)
    own = [(f"own{i}", tokens[i * 30 : (i + 1) * 30], np.full(3, 10, np.int32)) for i in range(20)]
    donor = Bucket.from_documents(
        [(f"other{i}", tokens[600 + i * 30 : 630 + i * 30], np.full(3, 10, np.int32)) for i in range(20)]
    )
    fragments = sample_fragments(donor, 30, 20, rng)
    assert all(donor_id.startswith("other") for donor_id in fragments.doc_ids)
    bucket = Bucket.concatenate([Bucket.from_documents(own), fragments])
    pool = RandomNexts(range(len(own), len(own) + len(fragments)), from_pool=True)
    batch = InstanceBatch()
    for doc in range(len(own)):
        create_instances_from_document(bucket, doc, 25, 0.1, rng, batch, pool)
    _, a_end, b_start, b_end, random_next = batch.columns()
    pool_tokens = bucket.sentence_starts[bucket.doc_first_sentence[len(own)]]
    assert random_next.sum() > 0 and (random_next == 0).sum() > 0
    assert (b_start[random_next == 1] >= pool_tokens).all() and (b_end[random_next == 1] <= len(bucket.tokens)).all()
    assert (b_end[random_next == 0] <= pool_tokens).all() and (a_end <= pool_tokens).all()
    assert abs(random_next.mean() - 0.5) <= 1 / len(random_next) + 1e-9  # labels in balanced pairs


def test_build_instances_makes_pieces_for_every_shard_from_a_bucket_and_its_negatives():
    cfg = config()
    build = TokenizeBuckets(cfg, job_vocab())
    build.setup()
    build.vocab_ready()
    docs = documents()
    own, _, _, _ = build.tokenize(docs[:10])
    donor = Bucket.from_documents(build.tokenize(docs[10:30])[0])
    fragments = sample_fragments(donor, 20, 256, python_rng(1, "fragments"))
    element = (
        "train/000000",
        [
            BucketMessage(Bucket.from_documents(own), ring_size=2),
            BucketMessage(fragments, sender="train/000001"),
        ],
    )
    with TestPipeline(argv=LOCAL) as p:
        built = (
            p
            | beam.Create([element])
            | beam.ParDo(BuildInstances(cfg, job_vocab())).with_outputs(tally.TALLY, main="pieces")
        )
        assert_that(
            built.pieces | beam.Map(lambda kv: kv[0]),
            equal_to([("seq128", "train", 0), ("seq128", "train", 1)]),
            label="one piece per shard",
        )
        assert_that(
            built.pieces | beam.Map(lambda kv: len(kv[1].sort_keys) == len(kv[1].instances) > 0),
            equal_to([True, True]),
            label="pieces hold instances",
        )
        assert_that(built[tally.TALLY], is_not_empty(), label="counts")


def test_write_shards_writes_each_shard_once_sorted(tmp_path):
    cfg = config(output=str(tmp_path), num_shards=1, eval_fraction=0.0)
    build = BuildInstances(cfg, job_vocab())
    build.setup()
    build.vocab_ready()
    tokenizer = TokenizeBuckets(cfg, job_vocab())
    tokenizer.setup()
    tokenizer.vocab_ready()
    own, _, _, _ = tokenizer.tokenize(
        [
            SourceDocument(f"s{i}", sentences=block.split("\n"))
            for i, block in enumerate(SAMPLE_TEXT.read_text().split("\n\n"))
        ]
    )
    pieces = [
        kv
        for kv in build.process(("train/000000", [BucketMessage(Bucket.from_documents(own), ring_size=1)]))
        if isinstance(kv, tuple)
    ]
    with TestPipeline(argv=LOCAL) as p:
        infos = p | beam.Create(pieces) | beam.GroupByKey() | beam.ParDo(WriteShards(cfg, job_vocab()))
        assert_that(
            infos | beam.Map(lambda info: (info["path"], info["records"] > 0)),
            equal_to([("seq128/train-00000-of-00001.tfrecord", True)]),
        )
    assert (tmp_path / ".staging" / "seq128" / "train-00000-of-00001.tfrecord").stat().st_size > 0


def test_publish_refuses_an_output_whose_random_next_share_strays(tmp_path):
    assert random_next_bound(10_000) == random_next_bound(1_000_000) == 0.01
    assert random_next_bound(100) == pytest.approx(0.2) and random_next_bound(40_000 // 16) == pytest.approx(0.04)
    cfg = config(output=str(tmp_path), num_shards=1, eval_fraction=0.0)
    staged = tmp_path / ".staging" / "seq128" / "train-00000-of-00001.tfrecord"
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"")
    shard = {"path": "seq128/train-00000-of-00001.tfrecord", "records": 0, "bytes": 0, "sha256": ""}
    counts = {
        "documents_read": 3,
        "documents_kept": 3,
        "seq128:train:instances": 20_000,
        "seq128:train:positive_labels": 10_250,
    }
    with pytest.raises(UnbalancedSplitError, match=r"seq128/train 0\.5125 over 20,000 instances"):
        list(
            Publish(cfg, job_vocab(), "sha", {}).process(
                {"counts": counts, "files": [], "shards": [shard], "errors": []}
            )
        )
    assert not (tmp_path / "manifest.json").exists() and not list(tmp_path.rglob("*.tfrecord"))
    counts["seq128:train:positive_labels"] = 10_150  # 0.5075: within 0.01
    [manifest] = Publish(cfg, job_vocab(), "sha", {}).process(
        {"counts": counts, "files": [], "shards": [shard], "errors": []}
    )
    assert manifest["outputs"]["seq128"]["train"]["random_next_share"] == 0.5075


def test_a_bucket_crosses_the_shuffle_unchanged():
    tokenize = TokenizeBuckets(config(), job_vocab())
    tokenize.setup()
    tokenize.vocab_ready()
    own, _, languages, _ = tokenize.tokenize(documents()[:5])
    own.append(("odd\nid é", np.array([70_000, 3], np.int32), np.array([2], np.int32)))  # ids past 16 bits
    bucket = Bucket.from_documents(own, [*languages[:-1], "zh-Hant", "ja"])
    coder = beam.coders.registry.get_coder(BucketMessage)
    message = coder.decode(coder.encode(BucketMessage(bucket, sender="train/000007")))
    back = message.bucket
    assert message.sender == "train/000007" and coder.is_deterministic()
    assert back.doc_ids == bucket.doc_ids and back.languages == bucket.languages == ["und"] * 4 + ["zh-Hant", "ja"]
    for a, b in (
        (back.tokens, bucket.tokens),
        (back.sentence_starts, bucket.sentence_starts),
        (back.doc_first_sentence, bucket.doc_first_sentence),
    ):
        assert np.array_equal(a, b)
    both = Bucket.concatenate([back, Bucket.from_documents(own[:2])])
    assert both.doc_ids == bucket.doc_ids + bucket.doc_ids[:2] and len(both.tokens) == len(bucket.tokens) + sum(
        len(d[1]) for d in own[:2]
    )


def test_documents_cross_the_bucket_shuffle_as_they_were_read():
    """Text stays text and sentences stay a list of sentences, byte for byte, through the coder."""
    from bertcorpus.pipeline.create.values import SourceDocumentCoder

    coder = SourceDocumentCoder()
    sentences = [line for line in SAMPLE_TEXT.read_text().splitlines()[:40] if line] + ["", "naïve café 日本語"]
    for doc in [
        *documents()[:3],
        SourceDocument("s0", sentences=sentences),
        SourceDocument("s1", sentences=[]),
        SourceDocument("lone \udc80 surrogate in an id", text=""),
        SourceDocument("t", text="a\nb\n\nc"),
    ]:
        assert coder.decode(coder.encode(doc)) == doc
    assert coder.is_deterministic()
