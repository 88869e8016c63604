"""Masked-LM predictions: counts, proportions within statistical bounds, whole-word masking, row layout."""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pytest

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instances import InstanceBatch
from bertcorpus.transforms.masking import Assembled, SpecialIds, assemble, mask_tokens, num_to_predict
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB

L, P = 128, 20


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.load(str(VOCAB))


@pytest.fixture(scope="module")
def special(vocab) -> SpecialIds:
    ids = vocab.ids
    return SpecialIds(
        ids["[CLS]"],
        ids["[SEP]"],
        ids["[MASK]"],
        vocab.regular_token_ids(),
        np.array([t.startswith("##") for t in vocab.tokens]),
    )


def random_rows(vocab: Vocab, special: SpecialIds, n: int, seed: int = 0, lengths=(60, 62)):
    """n instances over real vocab ids: A and B lengths drawn around `lengths`, some needing truncation."""
    rng = np.random.default_rng(seed)
    pool = vocab.regular_token_ids()
    tokens = pool[rng.integers(0, len(pool), 400 * n)].astype(np.int32)
    batch = InstanceBatch()
    for i in range(n):
        la, lb = rng.integers(1, lengths[0] * 2), rng.integers(1, lengths[1] * 2)
        batch.add(400 * i, 400 * i + la, 400 * i + 200, 400 * i + 200 + lb, bool(i % 2))
    return tokens, batch, assemble(tokens, batch.columns(), L, special, rng)


def test_num_to_predict_uses_python3_rounding():
    lengths = np.array([3, 30, 70, 110, 128, 31, 512])
    assert num_to_predict(lengths, 0.15, 20).tolist() == [1, 4, 10, 16, 19, 5, 20]
    # The reference's formula, with Python 3's round (half to even), for every length and a few probabilities.
    for prob in (0.15, 0.1, 0.25):
        every = np.arange(1, 600)
        assert num_to_predict(every, prob, 80).tolist() == [min(80, max(1, round(n * prob))) for n in range(1, 600)]


def test_rows_have_the_reference_layout(vocab, special):
    tokens, batch, rows = random_rows(vocab, special, 500)
    masked = mask_tokens(rows, 0.15, P, special, np.random.default_rng(2))
    features = InstanceColumns(
        rows.input_ids, rows.length, rows.len_a, masked.positions, masked.label_ids, masked.count, batch.labels()
    ).features()
    for i in range(500):
        n, la = rows.length[i], rows.len_a[i]
        row, seg, real = rows.input_ids[i], features["segment_ids"][i], features["input_mask"][i]
        assert row[0] == special.cls and row[la + 1] == special.sep and row[n - 1] == special.sep
        assert n <= L and not row[n:].any() and not seg[n:].any()
        assert not seg[: la + 2].any() and seg[la + 2 : n].all()
        assert real[:n].all() and not real[n:].any()
        # A is a contiguous run of the original A range, B of the original B range.
        a = row[1 : la + 1]
        lo, hi = batch.columns()[:2, i]
        src = tokens[lo:hi]
        assert any(np.array_equal(a, src[s : s + la]) for s in range(len(src) - la + 1))


def test_masking_counts_positions_and_labels(vocab, special):
    *_, rows = random_rows(vocab, special, 3000)
    m = mask_tokens(rows, 0.15, P, special, np.random.default_rng(1))
    k = num_to_predict(rows.length, 0.15, P)
    assert np.array_equal(m.count, k)
    for i in range(3000):
        pos = m.positions[i, : k[i]]
        assert np.all(np.diff(pos) > 0) and not m.positions[i, k[i] :].any()
        assert np.all(m.label_ids[i, : k[i]] == rows.input_ids[i, pos])
        assert not np.isin(pos, [0, rows.len_a[i] + 1, rows.length[i] - 1]).any()
        unmasked = np.setdiff1d(np.arange(L), pos)
        assert np.array_equal(m.input_ids[i, unmasked], rows.input_ids[i, unmasked])


def test_80_10_10_proportions_and_regular_replacements(vocab, special):
    *_, rows = random_rows(vocab, special, 20000, seed=2)
    m = mask_tokens(rows, 0.15, P, special, np.random.default_rng(3))
    real = np.arange(P)[None, :] < m.count[:, None]
    rowix = np.arange(len(m.positions))[:, None]
    shown = m.input_ids[rowix, m.positions][real]
    original = m.label_ids[real]
    total = real.sum()
    is_mask = shown == special.mask
    kept = shown == original
    other = ~is_mask & ~kept
    # Binomial standard errors at n≈300k are ~0.0007 (80%) and ~0.0005 (10%); allow 5 of them.
    assert abs(is_mask.mean() - 0.8) < 0.0035
    assert abs(kept.mean() - (0.1 + 0.1 / len(special.regular))) < 0.003
    assert abs(other.mean() - 0.1) < 0.003
    assert np.isin(shown[other], special.regular).all()  # never [PAD], [unusedN], [CLS], [SEP], [UNK], [MASK]
    assert total > 250_000
    # Each candidate is equally likely: the masked share of real non-special tokens is ~15%.
    candidates = (rows.length - 3).sum()
    assert abs(total / candidates - 0.15 * 128 / 125) < 0.02


def test_masked_positions_are_a_uniform_subset_of_the_candidates(vocab, special):
    # [CLS] a a a [SEP] b b b [SEP]: six candidates; prob 0.25 of 9 tokens rounds to two predictions.
    n = 30000
    ids = np.zeros((n, L), np.int32)
    ids[:, :9] = [special.cls, 2000, 2001, 2002, special.sep, 2003, 2004, 2005, special.sep]
    rows = Assembled(ids, np.full(n, 9), np.full(n, 3))
    m = mask_tokens(rows, 0.25, P, special, np.random.default_rng(7))
    assert (m.count == 2).all()
    pairs = Counter(map(tuple, m.positions[:, :2].tolist()))
    assert set(pairs) == set(combinations([1, 2, 3, 5, 6, 7], 2))
    expected = n / 15
    chi2 = sum((c - expected) ** 2 / expected for c in pairs.values())
    assert chi2 < 36.1  # 14 degrees of freedom, p = 0.001


def test_each_pass_masks_differently(vocab, special):
    _, _, rows = random_rows(vocab, special, 200)
    a = mask_tokens(rows, 0.15, P, special, np.random.default_rng(10))
    b = mask_tokens(rows, 0.15, P, special, np.random.default_rng(11))
    assert not np.array_equal(a.positions, b.positions)


def test_whole_word_masking_masks_words_and_decides_once_per_word(vocab, special):
    from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer

    ids = vocab.ids
    tok = WordPieceTokenizer(vocab, True)
    words = [tok.tokenize(w) for w in ("unaffable", "the", "angstrom", "cat", "gingerbread")]
    assert sum(len(w) > 1 for w in words) >= 3
    rng = np.random.default_rng(4)
    pieces = []
    for _ in range(40):
        pieces += words[rng.integers(len(words))]
    tokens = np.array([ids[p] for p in pieces * (82_000 // len(pieces) + 1)], np.int32)
    batch = InstanceBatch()
    for i in range(2000):
        batch.add(i * 40, i * 40 + 40, i * 40 + 40 + 0, i * 40 + 80, False)
    rows = assemble(tokens, batch.columns(), L, special, np.random.default_rng(5))
    m = mask_tokens(rows, 0.15, P, special, np.random.default_rng(6), whole_word=True)
    consistent = 0
    mixed = 0
    for i in range(len(rows.length)):
        row = rows.input_ids[i]
        chosen = set(m.positions[i][: m.count[i]].tolist())
        assert len(chosen) <= num_to_predict(rows.length[i : i + 1], 0.15, P)[0]
        for p in chosen:
            # every piece of a chosen word is chosen: neighbours that continue the word
            if p + 1 < rows.length[i] - 1 and special.is_continuation[row[p + 1]] and p + 1 != rows.len_a[i] + 1:
                assert p + 1 in chosen
            if special.is_continuation[row[p]] and p - 1 >= 1 and p - 1 != rows.len_a[i] + 1 and p != 1:
                assert p - 1 in chosen
        # one decision per word: a masked word's pieces are all [MASK] or none is
        shown = m.input_ids[i]
        start = None
        for p in sorted(chosen):
            if not special.is_continuation[row[p]] or p in (1, rows.len_a[i] + 2):  # words never span [SEP]
                start = p
            elif start is not None:
                if (shown[p] == special.mask) == (shown[start] == special.mask):
                    consistent += 1
                else:
                    mixed += 1
    assert consistent > 1000 and mixed == 0


def test_a_whole_word_has_one_fate_but_a_random_piece_may_draw_its_own_original(vocab, special):
    """Each masked piece shows [MASK], its original, or another token. The pieces of one word share one 80/10/10
    draw, so a word mixes fates only where a piece replaced at random drew its own original: seen as 'kept' beside
    its 'random' pieces. With two replacement ids that happens often, and every mixed word is of that kind."""
    from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer

    ids, tok = vocab.ids, WordPieceTokenizer(vocab, True)
    words = [tok.tokenize(w) for w in ("unaffable", "gingerbread", "angstrom", "the", "cat")]
    replacements = np.array(sorted({ids[p] for w in words[:2] for p in w})[:2])  # two of the pieces themselves
    few = SpecialIds(special.cls, special.sep, special.mask, replacements, special.is_continuation)
    rng = np.random.default_rng(8)
    pieces = [p for i in rng.integers(len(words), size=60) for p in words[i]]
    tokens = np.array([ids[p] for p in pieces * (82_000 // len(pieces) + 1)], np.int32)
    batch = InstanceBatch()
    for i in range(2000):
        batch.add(i * 40, i * 40 + 40, i * 40 + 40, i * 40 + 80, False)
    rows = assemble(tokens, batch.columns(), L, few, np.random.default_rng(5))
    m = mask_tokens(rows, 0.15, P, few, np.random.default_rng(6), whole_word=True)
    fates = Counter()
    for i in range(len(rows.length)):
        shown, row = m.input_ids[i], rows.input_ids[i]
        positions = sorted(m.positions[i][: m.count[i]].tolist())
        fate = {
            p: "mask" if shown[p] == few.mask else "original" if shown[p] == row[p] else "random" for p in positions
        }
        word: list[int] = []
        for p in positions + [None]:
            if p is None or not few.is_continuation[row[p]] or p == rows.len_a[i] + 2 or not word or p != word[-1] + 1:
                if len(word) > 1:
                    fates[frozenset(fate[q] for q in word)] += 1
                word = []
            if p is not None:
                word.append(p)
    mixed = {k: n for k, n in fates.items() if len(k) > 1}
    assert fates[frozenset({"mask"})] > 1000 and fates[frozenset({"random"})] > 20
    assert set(mixed) == {frozenset({"random", "original"})} and mixed[frozenset({"random", "original"})] > 20
