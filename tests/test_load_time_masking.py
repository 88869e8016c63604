"""Masks drawn by the loader at load time (the dynamic form): functions of (seed, epoch, instance) alone, the shares
of static masking (15%, 80/10/10) on the same instances, never a special token, whole words, and the [SEP]s
between documents of the no-pair form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bertcorpus.trainer.loader import LoaderError, PretrainingLoader
from bertcorpus.transforms.masking import Assembled, mask_tokens, num_to_predict, special_ids
from bertcorpus.transforms.row_streams import RowStreams, row_keys
from bertcorpus.wordpiece.vocab import Vocab

from conftest import VOCAB
from loader_data import create_sample, read_static

L, P = 128, 20
_VOCAB = Vocab.load(str(VOCAB))
VOCAB_TOKENS = _VOCAB.tokens
SPECIAL = special_ids(_VOCAB)
BRACKETED = np.array([t.startswith("[") and t.endswith("]") for t in VOCAB_TOKENS])


def create(out: Path, *flags: str) -> Path:
    return create_sample(out, L, P, *flags)


def epoch(out: Path, index_cache: Path, **kw) -> dict[str, np.ndarray]:
    """One epoch of the loader's batches, every instance once, rows in instance order (and their originals)."""
    kw.setdefault("batch_size", 100)
    world = kw.pop("world_size", 1)
    parts, ids = [], []
    for rank in range(world):
        loader = PretrainingLoader(
            out, seq_length=L, rank=rank, world_size=world, drop_remainder=False, cache_dir=index_cache, **kw
        )
        for i in range(len(loader)):
            parts.append(loader[i])
            ids.append(loader.batch_instances(i))
    ids = np.concatenate(ids)
    first = np.unique(ids, return_index=True)[1]  # the completed last batch repeats a few instances
    rows = {name: np.concatenate([p[name] for p in parts])[first] for name in parts[0]}
    rows["original"] = restored(rows)
    return rows


def restored(rows: dict[str, np.ndarray]) -> np.ndarray:
    original = rows["input_ids"].copy()
    for r in range(len(original)):
        k = int(rows["masked_lm_weights"][r].sum())
        original[r, rows["masked_lm_positions"][r, :k]] = rows["masked_lm_ids"][r, :k]
    return original


def shares(rows: dict[str, np.ndarray]) -> dict[str, float]:
    real = rows["masked_lm_weights"] > 0
    shown = np.take_along_axis(rows["input_ids"], rows["masked_lm_positions"], 1)[real]
    labels = rows["masked_lm_ids"][real]
    predictions = real.sum(axis=1)
    return {
        "predicted": predictions.sum() / rows["input_mask"].sum(),
        "mask": np.mean(shown == SPECIAL.mask),
        "kept": np.mean(shown == labels),
        "random": np.mean((shown != SPECIAL.mask) & (shown != labels)),
    }


def assert_no_special_token_masked(rows: dict[str, np.ndarray]) -> None:
    real = rows["masked_lm_weights"] > 0
    targets = rows["masked_lm_ids"][real]
    assert not np.isin(targets, [SPECIAL.cls, SPECIAL.sep]).any()
    assert not (rows["masked_lm_positions"][real] == 0).any()
    shown = np.take_along_axis(rows["input_ids"], rows["masked_lm_positions"], 1)[real]
    replaced = shown[(shown != SPECIAL.mask) & (shown != targets)]
    assert len(replaced) and not BRACKETED[replaced].any()  # random replacements are regular tokens


def test_masks_depend_on_seed_epoch_and_instance_only(sample_dynamic_copy, index_cache):
    one = epoch(sample_dynamic_copy, index_cache, seed=11, epoch=0, batch_size=64)
    spread = epoch(sample_dynamic_copy, index_cache, seed=11, epoch=0, batch_size=25, world_size=3)
    for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        np.testing.assert_array_equal(one[name], spread[name], err_msg=name)  # batch and world size play no part
    again = epoch(sample_dynamic_copy, index_cache, seed=11, epoch=0)
    np.testing.assert_array_equal(one["masked_lm_positions"], again["masked_lm_positions"])
    for other in (
        epoch(sample_dynamic_copy, index_cache, seed=11, epoch=1),
        epoch(sample_dynamic_copy, index_cache, seed=12, epoch=0),
    ):
        np.testing.assert_array_equal(other["original"], one["original"])  # the same instances...
        same = (other["masked_lm_positions"] == one["masked_lm_positions"]).all(axis=1)
        assert same.mean() < 0.05  # ...masked anew


def test_each_row_draws_from_its_own_stream(sample_dynamic_copy, index_cache):
    """mask_tokens on row streams gives a row the same mask alone or in a batch, padded to any width."""
    rows = epoch(sample_dynamic_copy, index_cache, seed=0)
    pick = np.arange(0, 300, 3)
    ids, length = rows["original"][pick], rows["input_mask"][pick].sum(axis=1)
    len_a = np.argmax(rows["segment_ids"][pick], axis=1) - 2
    keys = row_keys(1234, 5, pick)
    for whole_word, keyed in ((False, False), (True, False), (False, True)):
        batch = mask_tokens(Assembled(ids, length, len_a), 0.15, P, SPECIAL, RowStreams(keys), whole_word, keyed=keyed)
        for r in (0, 17, 99):
            width = int(length[r]) + 3
            alone = mask_tokens(
                Assembled(ids[r : r + 1, :width], length[r : r + 1], len_a[r : r + 1]),
                0.15,
                P,
                SPECIAL,
                RowStreams(keys[r : r + 1]),
                whole_word,
                keyed=keyed,
            )
            np.testing.assert_array_equal(alone.positions[0], batch.positions[r])
            np.testing.assert_array_equal(alone.input_ids[0], batch.input_ids[r, :width])


def test_load_time_shares_are_those_of_static_masking(sample_static, sample_dynamic_copy, index_cache):
    records = read_static(sorted((sample_static / f"seq{L}").glob("train-*.tfrecord")), L, P)
    created = shares(records)
    rows = epoch(sample_dynamic_copy, index_cache, seed=3)
    loaded = shares(rows)
    # 15% of each instance's tokens, rounded as the reference rounds, at most P.
    k = num_to_predict(rows["input_mask"].sum(axis=1), 0.15, P)
    np.testing.assert_array_equal(rows["masked_lm_weights"].sum(axis=1), k)
    assert abs(loaded["mask"] - 0.8) < 0.01 and abs(loaded["kept"] - 0.1) < 0.01 and abs(loaded["random"] - 0.1) < 0.01
    for name in ("predicted", "mask", "kept", "random"):  # about 75,000 predictions each: 0.01 is 5+ std errors
        assert abs(loaded[name] - created[name]) < 0.01, (name, loaded[name], created[name])
    assert_no_special_token_masked(rows)

    # Positions spread over the instance as static's do (neither end favoured).
    def relative(r):
        return (r["masked_lm_positions"] / r["input_mask"].sum(axis=1)[:, None])[r["masked_lm_weights"] > 0]

    assert abs(relative(rows).mean() - relative(records).mean()) < 0.01


def test_whole_word_masking_at_load_time(sample_dynamic_copy, index_cache):
    rows = epoch(sample_dynamic_copy, index_cache, seed=4, whole_word_mask=True)
    continuation = SPECIAL.is_continuation
    words = 0
    for r in range(2500):
        k = int(rows["masked_lm_weights"][r].sum())
        original, shown = rows["original"][r], rows["input_ids"][r]
        length = int(rows["input_mask"][r].sum())
        chosen = np.zeros(len(original), bool)
        chosen[rows["masked_lm_positions"][r, :k]] = True
        assert k <= num_to_predict(np.array([length]), 0.15, P)[0]
        # A word is a token and the ## pieces after it: chosen whole or not at all, one 80/10/10 fate per word.
        start = 1
        for pos in range(2, length + 1):
            if pos == length or not continuation[original[pos]] or original[pos - 1] == SPECIAL.sep:
                word = slice(start, pos)
                assert chosen[word].all() or not chosen[word].any()
                if chosen[word].any():
                    masked = shown[word] == SPECIAL.mask
                    assert masked.all() or not masked.any()
                    words += 1
                start = pos
    assert words > 4000
    assert_no_special_token_masked(rows)


def test_the_separators_between_documents_are_never_masked(tmp_path, index_cache):
    out = create(tmp_path / "none", "--masking", "dynamic", "--pair-objective", "none")
    rows = epoch(out, index_cache, seed=5, batch_size=50)
    original, length = rows["original"], rows["input_mask"].sum(axis=1)
    col = np.arange(L)[None, :]
    inner = (original == SPECIAL.sep) & (col < length[:, None] - 1)
    assert inner.any(axis=1).mean() > 0.3  # many rows hold several documents
    assert not rows["segment_ids"].any() and not rows["next_sentence_labels"].any()
    real = rows["masked_lm_weights"] > 0
    assert not np.take_along_axis(inner, rows["masked_lm_positions"], 1)[real].any()
    assert_no_special_token_masked(rows)
    candidates = length - 2 - inner.sum(axis=1)
    np.testing.assert_array_equal(real.sum(axis=1), np.minimum(num_to_predict(length, 0.15, P), candidates))
    assert abs(shares(rows)["mask"] - 0.8) < 0.02


# ------------------------------------------------------------------------------------------------ masking policies


def bound(share: float, n: int) -> float:
    """Five standard errors of a share measured over n draws."""
    return 5 * np.sqrt(share * (1 - share) / n)


def test_thirty_percent_with_80_10_10(sample_dynamic_copy, index_cache):
    rows = epoch(sample_dynamic_copy, index_cache, seed=6, masked_lm_prob=0.3)
    # The cap scales with the rate: the manifest's 20 at 15% is 40 at 30%, above round(128 × 0.3) = 38.
    assert rows["masked_lm_positions"].shape[1] == 2 * P
    length = rows["input_mask"].sum(axis=1)
    np.testing.assert_array_equal(rows["masked_lm_weights"].sum(axis=1), num_to_predict(length, 0.3, 2 * P))
    got, n = shares(rows), int(rows["masked_lm_weights"].sum())
    assert n > 100_000
    assert abs(got["predicted"] - 0.3) < 0.005
    for name, share in (("mask", 0.8), ("kept", 0.1), ("random", 0.1)):
        assert abs(got[name] - share) < bound(share, n), (name, got[name])
    assert_no_special_token_masked(rows)
    # Every candidate position equally likely: the share masked at the first and the second half of each row.
    real = rows["masked_lm_weights"] > 0
    relative = (rows["masked_lm_positions"] / length[:, None])[real]
    assert abs(relative.mean() - 0.5) < 0.01


def test_twenty_percent_all_mask(sample_dynamic_copy, index_cache):
    rows = epoch(
        sample_dynamic_copy, index_cache, seed=7, masked_lm_prob=0.2, mask_replace_prob=1.0, random_replace_prob=0.0
    )
    got, n = shares(rows), int(rows["masked_lm_weights"].sum())
    assert abs(got["predicted"] - 0.2) < 0.005 and n > 100_000
    assert got["mask"] == 1.0 and got["kept"] == 0.0 and got["random"] == 0.0  # NeoBERT: every choice [MASK]
    length = rows["input_mask"].sum(axis=1)
    np.testing.assert_array_equal(
        rows["masked_lm_weights"].sum(axis=1), num_to_predict(length, 0.2, rows["masked_lm_positions"].shape[1])
    )


def test_a_rate_schedule_by_epoch_and_within_one(sample_dynamic_copy, index_cache):
    schedule = "0:0.3,1:0.15,2.5:0.05"
    rates = [
        shares(epoch(sample_dynamic_copy, index_cache, seed=8, epoch=e, masked_lm_prob=schedule))["predicted"]
        for e in (0, 1)
    ]
    assert abs(rates[0] - 0.3) < 0.005 and abs(rates[1] - 0.15) < 0.005
    # Half-way through epoch 2 the rate drops: batch by batch, the first half at 15%, the second at 5%.
    loader = PretrainingLoader(
        sample_dynamic_copy,
        seq_length=L,
        batch_size=100,
        seed=8,
        epoch=2,
        masked_lm_prob=schedule,
        cache_dir=index_cache,
    )
    assert loader.max_predictions == 2 * P  # one shape for the whole schedule, from its highest rate
    half = len(loader) // 2
    for i, rate in ((0, 0.15), (half - 1, 0.15), (half, 0.05), (len(loader) - 1, 0.05)):
        batch = loader[i]
        k = num_to_predict(batch["input_mask"].sum(axis=1), rate, 2 * P)
        np.testing.assert_array_equal(batch["masked_lm_weights"].sum(axis=1), k)
    # The same (seed, epoch, batch) gives the same masks; the state names the schedule.
    again = PretrainingLoader(
        sample_dynamic_copy,
        seq_length=L,
        batch_size=100,
        seed=8,
        epoch=2,
        masked_lm_prob=schedule,
        cache_dir=index_cache,
    )
    np.testing.assert_array_equal(again[half]["masked_lm_positions"], loader[half]["masked_lm_positions"])
    assert loader.state_dict(0)["masked_lm_prob"] == [[0.0, 0.3], [1.0, 0.15], [2.5, 0.05]]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"masked_lm_prob": float("nan")}, "masked_lm_prob must be in (0, 1), not nan"),
        ({"masked_lm_prob": -0.1}, "masked_lm_prob must be in (0, 1), not -0.1"),
        ({"masked_lm_prob": 1.5}, "masked_lm_prob must be in (0, 1), not 1.5"),
        ({"masked_lm_prob": 0}, "masked_lm_prob must be in (0, 1), not 0"),
        ({"masked_lm_prob": "0:0.3,0:0.2"}, "its epochs must start at 0 and increase"),
        ({"masked_lm_prob": "1:0.3"}, "its epochs must start at 0 and increase"),
        ({"max_predictions_per_seq": -1}, "max_predictions_per_seq must be at least 1, not -1"),
        ({"mask_replace_prob": 0.9, "random_replace_prob": 0.2}, "is more than 1"),
        ({"random_replace_prob": -0.1}, "random_replace_prob must be in [0, 1], not -0.1"),
    ],
)
def test_bad_masking_settings_get_one_line(sample_dynamic_copy, index_cache, settings, message):
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(sample_dynamic_copy, seq_length=L, batch_size=8, cache_dir=index_cache, **settings)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_static_records_refuse_another_replacement_split(sample_static, index_cache):
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(
            sample_static,
            seq_length=L,
            batch_size=8,
            cache_dir=index_cache,
            mask_replace_prob=1.0,
            random_replace_prob=0.0,
        )
    assert "mask_replace_prob 1.0 differs from the 0.8" in str(e.value)


def test_draws_asked_for_at_some_places_are_those_of_the_full_draw():
    keys = row_keys(99, 2, np.arange(40))
    where = np.random.default_rng(0).random((40, 300)) < 0.1
    full = RowStreams(keys)
    full.random((40, 7))  # a call before it: the call number is part of each draw
    sparse = RowStreams(keys)
    sparse.random((40, 7))
    np.testing.assert_array_equal(sparse.integers_at(5, 30000, where), full.integers(5, 30000, (40, 300))[where])
    assert sparse.calls == full.calls == 2
    np.testing.assert_array_equal(
        RowStreams(keys).bits((40, 300)) >> np.uint64(11),
        (RowStreams(keys).random((40, 300)) * 2.0**53).astype(np.uint64),
    )


class TiedKeys:
    """Row streams whose keys tie: every position of a row draws one of two values."""

    def __init__(self, keys: np.ndarray):
        self.keys = keys

    def bits(self, shape):
        assert shape == self.keys.shape
        return self.keys.copy()


def test_positions_of_tied_keys_are_the_candidates_of_smallest_key_first_by_position():
    from bertcorpus.transforms.masking import _keyed_positions

    keys = np.array([[5, 1, 1, 1, 5, 5], [2**64 - 1, 7, 2**64 - 1, 3, 3, 0]], np.uint64)
    candidates = np.array([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]], bool)
    k = np.array([4, 4])
    # Row 0: the three 1s, then the first 5 among candidates (position 4). Row 1: 3, 3, 7, then the candidate at 0
    # (its key the largest, as a non-candidate's is, yet it is a candidate).
    np.testing.assert_array_equal(
        _keyed_positions(candidates, k, 5, TiedKeys(keys)), [[1, 2, 3, 4, 6], [0, 1, 3, 4, 6]]
    )
