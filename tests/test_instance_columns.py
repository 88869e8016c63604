"""Finished instances in compact columns: exact round trips, the reference's features, gathering across pieces."""

from __future__ import annotations

import numpy as np
import pytest

from bertcorpus.pipeline.create.values import columns_bytes, columns_from_bytes
from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.tfrecord import parse_example, serialize_framed

L, P = 16, 4


def instances(n: int, seed: int, top_id: int = 30522) -> InstanceColumns:
    """n instances laid out as create lays them out: [CLS] A [SEP] B [SEP], padding, sorted predictions."""
    rng = np.random.default_rng(seed)
    length = rng.integers(5, L + 1, n)
    len_a = rng.integers(1, length - 3)
    ids = np.where(np.arange(L)[None, :] < length[:, None], rng.integers(1, top_id, (n, L)), 0).astype(np.int32)
    predictions = rng.integers(1, P + 1, n)
    real = np.arange(P)[None, :] < predictions[:, None]
    positions = np.where(real, np.sort(rng.integers(1, L, (n, P)), axis=1), 0).astype(np.int32)
    labels = np.where(real, rng.integers(1, top_id, (n, P)), 0).astype(np.int32)
    return InstanceColumns(ids, length, len_a, positions, labels, predictions, rng.integers(0, 2, n))


def same(a: InstanceColumns, b: InstanceColumns) -> bool:
    return all(
        (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
        for x, y in zip(vars(a).values(), vars(b).values())
    )


@pytest.mark.parametrize("top_id", [30522, 119547])  # BERT's English vocab fits 16 bits, its multilingual one not
def test_bytes_round_trip_exactly(top_id):
    original = instances(300, 1, top_id)
    data = columns_bytes(original)
    back = columns_from_bytes(data)
    assert same(back, original)
    # Ids take 16 bits where they fit; the per-instance numbers always do here.
    assert back.input_ids.dtype.itemsize == (2 if top_id <= 1 << 16 else 4)
    assert back.length.dtype.itemsize == 2
    assert len(data) == 8 * 11 + back.input_ids.nbytes + back.label_ids.nbytes + 2 * (300 * P + 4 * 300)


def test_word_continues_round_trip_and_follow_their_instances():
    """Unmasked instances of Chinese text keep which tokens continue a segmenter's word, through the shuffle's
    bytes and through gathering; pieces without any gather with all False."""
    grouped = instances(50, 3)
    grouped.word_continues = np.random.default_rng(4).random((50, L)) < 0.3
    back = columns_from_bytes(columns_bytes(grouped))
    assert same(back, grouped) and back.word_continues.dtype == bool
    plain = instances(20, 5)
    gathered = InstanceColumns.gather([grouped, plain], np.array([1, 0, 0]), np.array([7, 2, 9]))
    assert np.array_equal(gathered.word_continues, np.stack([np.zeros(L, bool), *grouped.word_continues[[2, 9]]]))
    assert InstanceColumns.gather([plain], np.array([0]), np.array([1])).word_continues is None


def test_negative_values_are_refused():
    bad = instances(3, 2)
    bad.len_a[0] = -1
    with pytest.raises(ValueError, match="outside"):
        columns_bytes(bad)


def test_features_are_the_reference_layout():
    batch = instances(200, 3)
    features = batch.features()
    for i in range(len(batch)):
        n, la, k = batch.length[i], batch.len_a[i], batch.predictions[i]
        assert features["input_mask"][i].tolist() == [1] * n + [0] * (L - n)
        assert features["segment_ids"][i].tolist() == [0] * (la + 2) + [1] * (n - la - 2) + [0] * (L - n)
        assert features["masked_lm_weights"][i].tolist() == [1.0] * k + [0.0] * (P - k)
        assert features["next_sentence_labels"][i].tolist() == [batch.next_sentence[i]]
    # Serialised, each record parses back to exactly these values.
    framed = serialize_framed(features)
    first = parse_example(framed.data[framed.offsets[0] + 12 : framed.offsets[1] - 4].tobytes())
    assert first["segment_ids"] == features["segment_ids"][0].astype(int).tolist()
    assert first["masked_lm_weights"] == features["masked_lm_weights"][0].tolist()


def test_gather_across_parts_equals_taking_from_the_joined_parts():
    parts = [instances(n, seed) for seed, n in enumerate([50, 1, 0, 80])]
    joined = InstanceColumns.concatenate(parts)
    rng = np.random.default_rng(9)
    starts = np.cumsum([0] + [len(p) for p in parts])
    order = rng.permutation(len(joined))[:100]
    part = np.searchsorted(starts, order, side="right") - 1
    gathered = InstanceColumns.gather(parts, part, order - starts[part])
    assert same(gathered, joined.take(order))
