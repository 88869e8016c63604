"""NSP instance construction: target lengths, truncation, label balance and the documented fixes."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from bertcorpus.transforms.bucket_instances import InstanceRecipe, bucket_instances
from bertcorpus.transforms.instances import (
    MAX_OWED_LABELS,
    Bucket,
    InstanceBatch,
    RandomNexts,
    SeqConfig,
    create_instances_from_document,
    random_next_sources,
    target_seq_length,
    truncated_lengths,
)
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.sentences import document_sentences
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB, book_sections


def reference_truncation(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """The reference's loop, one token at a time, longer side first (B on a tie)."""
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def synthetic_bucket(sentence_lengths: list[list[int]]) -> Bucket:
    docs = []
    for d, lengths in enumerate(sentence_lengths):
        lengths = np.asarray(lengths, np.int32)
        docs.append((f"doc{d}", np.full(int(lengths.sum()), 1000 + d, np.int32), lengths))
    return Bucket.from_documents(docs)


def build(bucket: Bucket, passes: int = 1, max_num_tokens: int = 125, short_seq_prob: float = 0.1, seed: int = 0):
    batch = InstanceBatch()
    rng = random.Random(seed)
    for _ in range(passes):
        for d in range(len(bucket)):
            create_instances_from_document(bucket, d, max_num_tokens, short_seq_prob, rng, batch)
    return batch


@pytest.fixture(scope="module")
def real_bucket() -> Bucket:
    tok = WordPieceTokenizer(Vocab.load(str(VOCAB)), True)
    docs = []
    for doc_id, text in book_sections():
        ids, lengths = tok.encode_sentences(document_sentences(text))
        docs.append((doc_id, ids, lengths[lengths > 0]))
    return Bucket.from_documents(docs)


def test_truncation_matches_the_reference_loop():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 400, 5000)
    b = rng.integers(0, 400, 5000)
    for m in (125, 509, 7):
        new_a, new_b = truncated_lengths(a, b, m)
        expected = np.array([reference_truncation(x, y, m) for x, y in zip(a, b)])
        assert np.array_equal(np.stack([new_a, new_b], 1), expected)


def test_target_length_distribution():
    rng = random.Random(1)
    draws = np.array([target_seq_length(125, 0.1, rng) for _ in range(100_000)])
    short = draws[draws < 125]
    assert abs((draws < 125).mean() - 0.1 * 123 / 124) < 0.004  # a short draw can also land on 125
    assert short.min() == 2 and short.max() == 124
    assert abs(short.mean() - (2 + 124) / 2) < 1.5


def test_nsp_balance_on_real_text(real_bucket):
    batch = build(real_bucket, passes=30)
    labels = batch.labels()
    assert len(labels) > 35_000  # the standard error is then below 0.0027
    assert abs(labels.mean() - 0.5) < 0.01


def test_random_next_never_comes_from_the_same_document(real_bucket):
    batch = build(real_bucket, passes=3)
    token_doc = np.repeat(
        np.arange(len(real_bucket)), np.diff(real_bucket.sentence_starts[real_bucket.doc_first_sentence])
    )
    a_doc = token_doc[batch.columns()[0]]
    b_doc = token_doc[batch.columns()[2]]
    random_next = batch.labels().astype(bool)
    assert np.all(a_doc[random_next] != b_doc[random_next])
    assert np.all(a_doc[~random_next] == b_doc[~random_next])


def test_segments_are_whole_sentences_and_isnext_is_contiguous(real_bucket):
    batch = build(real_bucket, passes=2)
    starts = set(real_bucket.sentence_starts.tolist())
    for a0, a1, b0, b1, r in batch.columns().T:
        assert {a0, a1, b0, b1} <= starts and a0 < a1 and b0 < b1
        if not r:
            assert a1 == b0


def test_single_sentence_documents_are_used_without_biasing_labels():
    bucket = synthetic_bucket([[30]] * 50)
    batch = build(bucket, passes=40)
    assert all(batch.labels())  # a lone sentence has no true next
    draws = len(batch) + batch.skipped["isnext_in_single_sentence_document"]
    assert abs(len(batch) / draws - 0.5) < 0.03


def test_labels_come_in_pairs_and_a_random_next_taken_instead_is_repaid():
    batch, rng = InstanceBatch(), random.Random(5)
    labels = [batch.next_label(rng) for _ in range(1000)]
    assert all(a != b for a, b in zip(labels[::2], labels[1::2])) and batch.balance == 0
    taken = 0
    while batch.random_instead():
        taken += 1
    assert taken == MAX_OWED_LABELS // 2 and batch.balance == 2 * taken
    assert [batch.next_label(rng) for _ in range(2 * taken)] == [False] * (2 * taken) and batch.balance == 0


def test_a_documents_last_sentence_alone_takes_a_random_next(monkeypatch):
    # Four 100-token sentences at 125: chunks of two, and the last sentence often left alone.
    bucket = synthetic_bucket([[100, 100, 100, 100]] * 40)
    doc_ends = set(bucket.sentence_starts[bucket.doc_first_sentence[1:]].tolist())

    def last_alone(batch):  # the rows, and how many have a document's last sentence alone as A
        rows = np.array(batch.rows, dtype=np.int64).reshape(-1, 5)
        return rows, sum(1 for a0, a1, *_ in rows if a1 in doc_ends and a1 - a0 == 100)

    rows, alone = last_alone(build(bucket, passes=20, short_seq_prob=0))
    monkeypatch.setattr("bertcorpus.transforms.instances.MAX_OWED_LABELS", 0)  # never take a random next instead
    old_rows, old_alone = last_alone(build(bucket, passes=20, short_seq_prob=0))
    assert alone > 1.5 * old_alone
    assert abs(rows[:, 4].mean() - 0.5) <= MAX_OWED_LABELS / len(rows)
    assert abs(old_rows[:, 4].mean() - 0.5) <= 1 / len(old_rows)


def test_a_buckets_last_pass_drops_the_labels_that_outnumber_the_others():
    rows = [(0, 1, 1, 2, True), (2, 3, 3, 4, False), (4, 5, 9, 10, True), (6, 7, 9, 10, False)]
    batch = InstanceBatch(rows=list(rows))
    batch.drop_surplus(random_before=4, isnext_before=3)  # 6 random-next against 5 IsNext
    assert batch.rows == rows[:2] + rows[3:] and batch.skipped == {"unpaired_label": 1}
    batch = InstanceBatch(rows=list(rows))
    batch.drop_surplus(random_before=0, isnext_before=10)  # at most MAX_OWED_LABELS go
    assert batch.rows == [rows[0], rows[2]] and batch.skipped == {"unpaired_label": MAX_OWED_LABELS}
    batch = InstanceBatch(rows=list(rows))
    batch.drop_surplus(random_before=5, isnext_before=5)
    assert batch.rows == rows and not batch.skipped


def test_one_document_corpus_makes_only_isnext_and_counts_it():
    bucket = synthetic_bucket([[20, 30, 25, 40, 10, 50, 60, 5]])
    batch = build(bucket, passes=20)
    assert len(batch) > 0 and not any(batch.labels())
    assert batch.skipped["random_next_without_other_document"] > 0


def test_one_huge_sentence_pairs_with_what_follows():
    bucket = synthetic_bucket([[10_000, 12, 8], [15, 15, 15]])
    batch = build(bucket, passes=50, seed=3)
    nexts = [(a0, a1, b0) for a0, a1, b0, _, r in batch.columns().T.tolist() if not r and a0 == 0]
    assert nexts and all(a1 == 10_000 and b0 == 10_000 for _, a1, b0 in nexts)
    new_a, new_b = truncated_lengths(np.array([10_000]), np.array([12]), 125)
    assert (new_a[0], new_b[0]) == (113, 12)


def test_empty_document_yields_nothing():
    bucket = synthetic_bucket([[], [10, 10]])
    batch = InstanceBatch()
    create_instances_from_document(bucket, 0, 125, 0.1, random.Random(0), batch)
    assert len(batch) == 0


# --- random next segments in a corpus of several languages -----------------------------------------------------------


def draws(bucket: Bucket, nexts=None, passes: int = 40) -> InstanceBatch:
    batch, rng = InstanceBatch(), random.Random(5)
    for _ in range(passes):
        for doc in range(len(bucket)):
            create_instances_from_document(bucket, doc, 30, 0.1, rng, batch, None if nexts is None else nexts[doc])
    return batch


def test_a_random_next_comes_from_a_document_of_its_language_or_an_undetermined_one():
    languages = ["en", "ja", "en", "ja", "und", "zh-Hans", "zh-Hant", "en"] * 3
    bucket = replace(synthetic_bucket([[12, 9, 14, 11, 10]] * len(languages)), languages=languages)
    batch = draws(bucket, random_next_sources(bucket, len(bucket), None))
    a_start, _, b_start, _, random_next = batch.columns()
    taker = bucket.tokens[a_start[random_next == 1]] - 1000  # a document's tokens are 1000 + its number
    donor = bucket.tokens[b_start[random_next == 1]] - 1000
    primary = [tag.split("-")[0] for tag in languages]
    pairs = Counter((primary[a], primary[b]) for a, b in zip(taker.tolist(), donor.tolist()))
    assert sum(pairs.values()) > 500 and not batch.skipped
    assert all(a == b or "und" in (a, b) for a, b in pairs)
    assert {b for a, b in pairs if a == "und"} == {"en", "ja", "zh", "und"}  # an undetermined one draws from any
    assert pairs["zh", "zh"] and pairs["en", "und"] and pairs["ja", "und"]  # zh-Hans and zh-Hant are one language


def test_a_corpus_of_one_language_draws_as_it_did_before_languages_were_matched():
    bucket = replace(synthetic_bucket([[12, 9, 14, 11, 10]] * 6), languages=["en", "und", "en", "en", "", "und"])
    pool = range(3, 6)
    assert all(n.documents is pool and n.from_pool for n in random_next_sources(bucket, 3, pool))
    nexts = random_next_sources(bucket, 6, None)
    assert all(n.documents == range(6) and not n.other_language for n in nexts)
    assert draws(bucket, nexts).rows == draws(bucket).rows


def test_a_language_without_another_document_draws_from_any_and_counts_it():
    bucket = replace(synthetic_bucket([[12, 9, 14, 11, 10]] * 6), languages=["en"] * 5 + ["el"])
    nexts = random_next_sources(bucket, len(bucket), None)
    assert nexts[0].documents == [0, 1, 2, 3, 4] and not nexts[0].other_language
    assert nexts[5].documents == range(6) and nexts[5].other_language
    pool = range(4, 6)  # in a pool, one fragment of its language is enough
    assert [n.documents for n in random_next_sources(bucket, 4, pool)] == [[4]] * 4
    # a pool without the language: the bucket's own other documents of it, from a random sentence as without a pool
    mixed = replace(bucket, languages=["en", "el", "en", "el", "en", "en"])
    assert random_next_sources(mixed, 4, pool)[1] == RandomNexts([1, 3], from_pool=False)
    # without a pool, an undetermined document is a partner too
    alone = replace(bucket, languages=["el", "en", "und", "en", "en", "en"])
    assert random_next_sources(alone, 6, None)[0] == RandomNexts([0, 2], from_pool=False)
    recipe = InstanceRecipe(SeqConfig(32, 5), dupe_factor=10)
    built = bucket_instances(bucket, len(bucket), None, recipe, special_ids(Vocab.load(str(VOCAB))), 1, "train/0")
    assert 0 < built.skipped["random_next_of_another_language"] < built.counts["instances"] / 6
