"""Records written without TensorFlow parse with TensorFlow and the reference trainer's exact spec."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tensorflow as tf  # the test extra installs it: the record checks must run, never skip

from bertcorpus.trainer.data import feature_spec as reference_spec
from bertcorpus.transforms.tfrecord import _packed_varints, iter_tfrecords, parse_example, serialize_framed, varint

L, P = 128, 20


def random_features(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(0, 2**21 + 5, (n, L)),  # 1- to 4-byte varints
        "input_mask": rng.integers(0, 2, (n, L)),
        "segment_ids": rng.integers(0, 2, (n, L)),
        "masked_lm_positions": rng.integers(0, L, (n, P)),
        "masked_lm_ids": rng.integers(0, 30522, (n, P)),
        "masked_lm_weights": rng.integers(0, 2, (n, P)).astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
    }


def records(features: dict[str, np.ndarray]) -> list[bytes]:
    """serialize_framed's records, one bytes object each."""
    framed = serialize_framed(features)
    data, bounds = framed.data.tobytes(), framed.offsets.tolist()
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def pack_varint_rows(values: np.ndarray) -> tuple[bytes, list[int]]:
    """The packed varints of each row, back to back, and the row boundaries."""
    packed = _packed_varints(values)
    data = packed.data if packed.used is None else packed.data[packed.used]
    return data.tobytes(), np.concatenate(([0], np.cumsum(packed.lengths))).tolist()


def test_varint_packing_matches_protobuf_rules():
    values = np.array([[0, 1, 127, 128, 300, 16383, 16384, 2**21 - 1, 2**21], [5, 4, 3, 2, 1, 0, 0, 0, 1]])
    buf, bounds = pack_varint_rows(values)
    assert buf == b"".join(varint(int(v)) for v in values.ravel())
    assert bounds == [0, len(buf) - 9, len(buf)]
    assert varint(300) == b"\xac\x02"
    with pytest.raises(ValueError, match="too large"):
        pack_varint_rows(np.array([[2**28]]))


def test_tensorflow_parses_our_records_exactly():
    features = random_features(300)
    framed = records(features)
    spec = reference_spec(L, P)
    for i, record in enumerate(framed):
        example = next(iter_tfrecords(io.BytesIO(record)))
        parsed = tf.io.parse_single_example(example, spec)
        for name, values in features.items():
            assert np.array_equal(parsed[name].numpy(), values[i]), name
        proto = tf.train.Example.FromString(example)
        assert (
            list(proto.features.feature["masked_lm_weights"].float_list.value)
            == features["masked_lm_weights"][i].tolist()
        )
        assert parse_example(example)["input_ids"] == features["input_ids"][i].tolist()


def test_tfrecord_dataset_reads_our_framing(tmp_path):
    features = random_features(50, seed=1)
    path = tmp_path / "x.tfrecord"
    path.write_bytes(serialize_framed(features).data.tobytes())
    got = [tf.io.parse_single_example(r, reference_spec(L, P)) for r in tf.data.TFRecordDataset(str(path))]
    assert len(got) == 50
    assert np.array_equal(np.stack([g["masked_lm_ids"].numpy() for g in got]), features["masked_lm_ids"])


def test_corruption_is_detected():
    record = records(random_features(1))[0]
    damaged = record[:30] + bytes([record[30] ^ 0xFF]) + record[31:]
    with pytest.raises(ValueError, match="CRC"):
        list(iter_tfrecords(io.BytesIO(damaged)))
    with pytest.raises(ValueError, match="truncated"):
        list(iter_tfrecords(io.BytesIO(record[:-3])))


def test_the_shared_spec_is_the_reference_trainers():
    got = {name: (list(f.shape), f.dtype) for name, f in reference_spec(128, 20).items()}
    assert got == {
        "input_ids": ([128], tf.int64),
        "input_mask": ([128], tf.int64),
        "segment_ids": ([128], tf.int64),
        "masked_lm_positions": ([20], tf.int64),
        "masked_lm_ids": ([20], tf.int64),
        "masked_lm_weights": ([20], tf.float32),
        "next_sentence_labels": ([1], tf.int64),
    }


def test_length_tables_grow_safely_while_several_threads_read_them():
    import threading

    from bertcorpus.transforms.tfrecord import _ByLength, _frame_header

    table = _ByLength(_frame_header)
    errors, results = [], {}
    start = threading.Barrier(8)

    def serialise(worker: int):
        try:
            start.wait()
            for top in range(1 << 10, 1 << 13, 97):  # each call may need a larger table than the last
                lengths = np.arange(top - 50, top + 1)
                padded = table.rows(lengths)
                real = padded.data if padded.used is None else padded.data[padded.used]
                results[(worker, top)] = real.tobytes()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=serialise, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected = {top: b"".join(_frame_header(int(n)) for n in range(top - 50, top + 1)) for _, top in results}
    assert all(data == expected[top] for (_, top), data in results.items())
