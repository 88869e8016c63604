"""The recipes' instance building without Beam (transforms/): sentence-order pairs, full-sentence packing, the
bucket-level build that runs the dupe passes, and length bins, on real tokenised text."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bertcorpus.transforms.bucket_instances import InstanceRecipe, bin_counts, bin_edges, bucket_instances, shard_rows
from bertcorpus.transforms.instances import Bucket, InstanceBatch, SeqConfig, create_sop_instances_from_document
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.packing import assemble_packed, pack_sentences
from bertcorpus.transforms.sentences import document_sentences
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB, book_sections


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.load(str(VOCAB))


@pytest.fixture(scope="module")
def special(vocab):
    return special_ids(vocab)


@pytest.fixture(scope="module")
def real_bucket(vocab) -> Bucket:
    tokenizer = WordPieceTokenizer(vocab, True)
    docs = []
    for doc_id, text in book_sections():
        ids, lengths = tokenizer.encode_sentences(document_sentences(text))
        docs.append((doc_id, ids, lengths[lengths > 0]))
    # A one-sentence document, which has no sentence-order pair.
    docs.append(("lone", np.array([2023, 2003, 2028, 6251], np.int32), np.array([4], np.int32)))
    return Bucket.from_documents(docs)


def document_of_tokens(bucket: Bucket) -> np.ndarray:
    sentence_doc = np.repeat(np.arange(len(bucket)), np.diff(bucket.doc_first_sentence))
    return np.repeat(sentence_doc, np.diff(bucket.sentence_starts))


def test_sop_pairs_are_consecutive_segments_of_one_document_half_of_them_swapped(real_bucket):
    batch = InstanceBatch()
    rng = random.Random(3)
    for doc in range(len(real_bucket)):
        create_sop_instances_from_document(real_bucket, doc, 125, 0.1, rng, batch)
    first, first_end, second, second_end, swapped = batch.columns()
    assert len(swapped) > 1000
    # In document order, B is what follows A: the first segment shown ends where the second starts, or, where
    # the two are swapped, the second shown ends where the first starts.
    kept, turned = swapped == 0, swapped == 1
    assert (first_end[kept] == second[kept]).all() and (second_end[turned] == first[turned]).all()
    doc = document_of_tokens(real_bucket)
    assert (doc[first] == doc[second]).all() and (doc[first_end - 1] == doc[second_end - 1]).all()
    assert abs(int(swapped.sum()) * 2 - len(swapped)) <= 1  # labels in balanced pairs
    assert batch.skipped == {"single_sentence_document": 1}


def test_bucket_instances_balance_sop_labels_exactly_over_the_passes(real_bucket, special):
    recipe = InstanceRecipe(SeqConfig(128, 20), dupe_factor=3, pair_objective="sop")
    built = bucket_instances(real_bucket, len(real_bucket), None, recipe, special, 7, "train/000001")
    labels = built.instances.next_sentence
    assert built.counts["instances"] == len(labels) > 3000
    assert built.counts["positive_labels"] * 2 == len(labels)  # exactly half swapped
    assert built.skipped["single_sentence_document"] == 3  # once per pass


def test_packed_sentences_fill_instances_with_whole_sentences_across_documents(real_bucket, special):
    packed = pack_sentences(real_bucket, len(real_bucket), 128, random.Random(5))
    sizes = packed.end - packed.start
    # Every token of every document, once.
    assert sizes.sum() == len(real_bucket.tokens)
    covered = np.zeros(len(real_bucket.tokens), int)
    np.add.at(covered, np.concatenate([np.arange(s, e) for s, e in zip(packed.start, packed.end)]), 1)
    assert (covered == 1).all()
    rows = assemble_packed(real_bucket.tokens, packed, 128, special)
    # Whole sentences: an instance is as full as the next sentence allows.
    assert (rows.length <= 128).all() and rows.length.mean() > 100
    assert (rows.separators.sum(axis=1) == np.bincount(packed.instance) - 1).all()
    assert (rows.len_a == rows.length - 2).all()  # one segment
    doc = document_of_tokens(real_bucket)
    for i in range(len(packed)):
        row = rows.input_ids[i, : rows.length[i]]
        assert row[0] == special.cls and row[-1] == special.sep and (row[rows.length[i] :] == 0).all()
        pieces = np.flatnonzero(packed.instance == i)
        # A [SEP] after every piece; the pieces of an instance come from different documents, in turn.
        assert (row == special.sep).sum() == len(pieces)
        assert len({int(doc[packed.start[k]]) for k in pieces}) == len(pieces)
        expected = np.concatenate(
            [np.append(real_bucket.tokens[packed.start[k] : packed.end[k]], special.sep) for k in pieces]
        )
        assert np.array_equal(row[1:], expected)
    # Pieces start and end on sentence boundaries, but for a sentence longer than an instance.
    starts = set(real_bucket.sentence_starts.tolist())
    assert np.mean([s in starts for s in packed.start.tolist()]) > 0.99


def test_a_sentence_longer_than_an_instance_is_cut_into_full_instances(special):
    bucket = Bucket.from_documents(
        [
            ("long", np.arange(1000, 1300, dtype=np.int32), np.array([300], np.int32)),
            ("short", np.arange(2000, 2010, dtype=np.int32), np.array([10], np.int32)),
        ]
    )
    packed = pack_sentences(bucket, 2, 64, random.Random(0))
    rows = assemble_packed(bucket.tokens, packed, 64, special)
    assert (packed.end - packed.start).sum() == 310
    assert sorted(rows.length.tolist()).count(64) == 300 // 62


def test_packed_passes_pair_other_neighbours(real_bucket, special):
    recipe = InstanceRecipe(SeqConfig(128, 20), dupe_factor=2, pair_objective="none")
    built = bucket_instances(real_bucket, len(real_bucket), None, recipe, special, 1, "train/000000")
    n = built.counts["instances"]
    first, second = built.instances.input_ids[: n // 2], built.instances.input_ids[n // 2 :]
    assert not (built.instances.next_sentence).any() and built.counts["positive_labels"] == 0
    assert len({r.tobytes() for r in first} & {r.tobytes() for r in second}) < n // 20


def test_dynamic_masking_leaves_instances_unmasked_and_static_masks_them(real_bucket, special):
    seq = SeqConfig(128, 20)
    for objective in ("nsp", "sop", "none"):
        static = bucket_instances(
            real_bucket,
            len(real_bucket),
            None,
            InstanceRecipe(seq, 1, pair_objective=objective),
            special,
            1,
            "train/000000",
        )
        dynamic = bucket_instances(
            real_bucket,
            len(real_bucket),
            None,
            InstanceRecipe(seq, 1, pair_objective=objective, mask_now=False),
            special,
            1,
            "train/000000",
        )
        assert dynamic.instances.positions.shape[1] == 0 and dynamic.counts["predictions"] == 0
        assert not (dynamic.instances.input_ids == special.mask).any()
        assert (static.instances.input_ids == special.mask).sum() > 0.1 * static.counts["predictions"]
        # The same pairs, only unmasked: lengths, segments and labels agree.
        for name in ("length", "len_a", "next_sentence"):
            assert np.array_equal(getattr(static.instances, name), getattr(dynamic.instances, name))


def test_bins_are_counted_by_their_upper_edge(real_bucket, special):
    lengths = np.array([1, 64, 65, 128, 100, 127])
    assert bin_edges(lengths, 64, 128).tolist() == [64, 64, 128, 128, 128, 128]
    assert bin_edges(np.array([500, 501, 512]), 100, 512).tolist() == [500, 512, 512]  # the last bin ends at L
    assert bin_counts(lengths, 64, 128) == {64: 2, 128: 4}
    recipe = InstanceRecipe(SeqConfig(128, 20), dupe_factor=1, bin_size=32)
    built = bucket_instances(real_bucket, len(real_bucket), None, recipe, special, 1, "train/000000")
    bins = {k: v for k, v in built.counts.items() if k.startswith("bin:")}
    assert sum(bins.values()) == built.counts["instances"] and set(bins) <= {"bin:32", "bin:64", "bin:96", "bin:128"}


def test_shard_rows_split_instances_by_key_and_keep_each_once():
    keys = np.random.default_rng(0).integers(0, 2**63, 1000, dtype=np.int64)
    shards = dict(shard_rows(keys, 7))
    assert sorted(np.concatenate(list(shards.values())).tolist()) == list(range(1000))
    assert all((keys[rows] % 7 == shard).all() and (np.diff(rows) > 0).all() for shard, rows in shards.items())
