"""The loader's packed layout: whole instances in one flat stream per batch (cu_seqlens), no span across two
instances, the masks of the padded layouts, equal batch counts on every rank, a resume mid-epoch, the share of the
token budget filled, and the loss of the tiny model equal to that of the same instances padded."""

from __future__ import annotations

import numpy as np
import pytest
from test_load_time_masking import SPECIAL, L, epoch

from bertcorpus.trainer.loader import LoaderError, PretrainingLoader
from bertcorpus.trainer.packed_layout import best_fit_decreasing

BUDGET = 16 * L


def packed(out, index_cache, **kw) -> PretrainingLoader:
    kw.setdefault("tokens_per_batch", BUDGET)
    return PretrainingLoader(out, seq_length=L, layout="packed", cache_dir=index_cache, **kw)


def test_best_fit_decreasing_fills_and_never_overflows():
    lengths = np.random.default_rng(0).integers(20, 129, 5000)
    batches = best_fit_decreasing(lengths, 1024)
    np.testing.assert_array_equal(np.sort(np.concatenate(batches)), np.arange(5000))  # each instance once, whole
    sums = np.array([lengths[b].sum() for b in batches])
    assert sums.max() <= 1024 and lengths.sum() / (1024 * len(batches)) > 0.99


def test_every_span_is_one_instance_with_the_padded_layouts_masks(sample_dynamic_copy, index_cache):
    rows = epoch(sample_dynamic_copy, index_cache, seed=9, masked_lm_prob=0.3)  # row k: instance k, padded
    loader = packed(sample_dynamic_copy, index_cache, seed=9, masked_lm_prob=0.3)
    for i in range(len(loader)):
        batch, ids = loader[i], loader.batch_instances(i)
        cu = batch["cu_seqlens"]
        assert cu[0] == 0 and cu[-1] == len(batch["input_ids"]) <= BUDGET and len(cu) == len(ids) + 1
        lengths = np.diff(cu)
        assert batch["max_seqlen"] == lengths.max()
        for j, instance in enumerate(ids.tolist()):
            span = slice(cu[j], cu[j + 1])
            n = int(rows["input_mask"][instance].sum())
            assert lengths[j] == n
            # The span is the instance: [CLS] ... [SEP], its masked ids, its segments and its labels; positions
            # restart at 0, so no attention span computed from cu_seqlens or position_ids reaches another one.
            np.testing.assert_array_equal(batch["input_ids"][span], rows["input_ids"][instance, :n])
            np.testing.assert_array_equal(batch["token_type_ids"][span], rows["segment_ids"][instance, :n])
            np.testing.assert_array_equal(batch["position_ids"][span], np.arange(n))
            assert rows["original"][instance, 0] == SPECIAL.cls and rows["original"][instance, n - 1] == SPECIAL.sep
            labels = np.full(n, -100)
            k = int(rows["masked_lm_weights"][instance].sum())
            labels[rows["masked_lm_positions"][instance, :k]] = rows["masked_lm_ids"][instance, :k]
            np.testing.assert_array_equal(batch["labels"][span], labels)
        np.testing.assert_array_equal(batch["next_sentence_label"], rows["next_sentence_labels"][ids, 0])


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_ranks_get_equal_counts_and_each_instance_once(sample_dynamic_copy, index_cache, world_size):
    loaders = [packed(sample_dynamic_copy, index_cache, rank=r, world_size=world_size) for r in range(world_size)]
    assert len({len(loader) for loader in loaders}) == 1
    seen = np.concatenate([loader.batch_instances(i) for loader in loaders for i in range(len(loader))])
    assert len(np.unique(seen)) == len(seen)  # never an instance twice, never one split between two batches
    total = loaders[0].dataset.instances
    assert len(seen) > 0.97 * total  # fewer than world_size batches are left out of the epoch
    # Without drop_remainder, the last batch is kept and the last step completed from the first: every instance.
    whole = [
        packed(sample_dynamic_copy, index_cache, rank=r, world_size=world_size, drop_remainder=False)
        for r in range(world_size)
    ]
    assert len(whole[0]) == -(-(loaders[0]._plan().batches + 1) // world_size)
    seen = np.concatenate([loader.batch_instances(i) for loader in whole for i in range(len(loader))])
    assert len(np.unique(seen)) == total


def test_packing_is_reproducible_seeded_and_resumes_mid_epoch(sample_dynamic_copy, index_cache):
    one, two = packed(sample_dynamic_copy, index_cache, seed=3), packed(sample_dynamic_copy, index_cache, seed=3)
    for i in (0, 5, len(one) - 1):
        for name, values in one[i].items():
            np.testing.assert_array_equal(values, two[i][name])
    other = packed(sample_dynamic_copy, index_cache, seed=3, epoch=1)
    assert not np.array_equal(other.batch_instances(0), one.batch_instances(0))

    for _ in zip(range(6), one):  # six batches taken
        pass
    state = one.state_dict()
    resumed = packed(sample_dynamic_copy, index_cache, seed=3)
    resumed.load_state_dict(state)
    assert len(resumed) == len(one) - 6
    np.testing.assert_array_equal(resumed[0]["input_ids"], one[6]["input_ids"])
    other_budget = packed(sample_dynamic_copy, index_cache, seed=3, tokens_per_batch=BUDGET * 2)
    with pytest.raises(LoaderError) as e:
        other_budget.load_state_dict(state)
    assert "tokens_per_batch" in str(e.value)


def test_the_token_budget_is_filled(sample_dynamic_copy, index_cache):
    loader = packed(sample_dynamic_copy, index_cache, tokens_per_batch=64 * L)
    used = sum(len(loader[i]["input_ids"]) for i in range(len(loader)))
    assert loader.filled_share() == pytest.approx(used / (64 * L * len(loader)), abs=1e-12)
    assert loader.filled_share() >= 0.98


def test_bad_packed_arguments_get_one_line(sample_dynamic_copy, index_cache):
    with pytest.raises(LoaderError) as e:
        packed(sample_dynamic_copy, index_cache, tokens_per_batch=100)
    assert "tokens_per_batch 100 is smaller than the longest instance" in str(e.value)
    with pytest.raises(LoaderError) as e:
        packed(sample_dynamic_copy, index_cache, batch_size=8)
    assert "takes tokens_per_batch" in str(e.value)
    with pytest.raises(LoaderError) as e:
        PretrainingLoader(sample_dynamic_copy, seq_length=L, tokens_per_batch=BUDGET, cache_dir=index_cache)
    assert "takes tokens_per_batch" in str(e.value)


def test_a_budget_that_leaves_no_batch_is_refused(sample_dynamic_copy, index_cache):
    """A budget that holds the whole split makes one batch, the epoch's least filled, which drop_remainder leaves
    out: an epoch of no batch is refused in one line, not served as a loader of length 0."""
    with pytest.raises(LoaderError) as e:
        packed(sample_dynamic_copy, index_cache, tokens_per_batch=10**12)
    message = str(e.value)
    assert message.startswith("tokens_per_batch 1,000,000,000,000 gives an epoch of no batch: the train split of seq")
    assert "give a smaller tokens_per_batch" in message and "\n" not in message
    whole = packed(sample_dynamic_copy, index_cache, tokens_per_batch=10**12, drop_remainder=False)
    assert len(whole) == 1 and len(np.unique(whole.batch_instances(0))) == whole.dataset.instances
    tokens = int(whole._plan().lengths.sum())
    with pytest.raises(LoaderError, match="gives an epoch of no batch"):  # two ranks need two batches to keep
        packed(sample_dynamic_copy, index_cache, tokens_per_batch=tokens // 2 + L, world_size=2)


def test_a_packed_batch_has_the_loss_of_the_padded_batch(sample_dynamic_copy, index_cache):
    """The tiny model on TensorFlow: the packed stream with its block-diagonal attention gives the loss that the
    same instances give padded, so the layout carries the same training signal."""
    import keras

    from bertcorpus.trainer.config import BertConfig
    from bertcorpus.trainer.model import BertPretrainer, packed_pretraining_loss, pretraining_loss

    keras.utils.set_random_seed(0)
    rows = epoch(sample_dynamic_copy, index_cache, seed=10, masked_lm_prob=0.3)
    loader = packed(sample_dynamic_copy, index_cache, seed=10, masked_lm_prob=0.3, tokens_per_batch=4 * L)
    model = BertPretrainer(BertConfig.preset("tiny", vocab_size=len(SPECIAL.is_continuation), max_position=L))
    for i in (0, 1):
        batch, ids = loader[i], loader.batch_instances(i)
        padded = {name: rows[name][ids] for name in rows if name != "original"}
        expected = [float(x) for x in pretraining_loss(model(padded), padded)]
        found = [float(x) for x in packed_pretraining_loss(model.packed_outputs(batch), batch)]
        np.testing.assert_allclose(found, expected, rtol=2e-5)
