"""tf.data input for BERT pretraining records, with the reference trainer's exact feature spec.

Records are tf.train.Examples with fixed-length features (REFERENCE.md §7): input_ids, input_mask and
segment_ids of length L (--max-seq-length); masked_lm_positions, masked_lm_ids (int64) and
masked_lm_weights (float) of length P (--max-predictions-per-seq); next_sentence_labels of length 1.
"""

from __future__ import annotations

import re

import tensorflow as tf

DEFAULT_SHUFFLE_BUFFER = 10_000


class TrainerError(Exception):
    """A problem the user must fix (a flag, a path, the data); its message is one line, shown without a traceback."""


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def list_files(patterns: str) -> list[str]:
    """Sorted files matching a comma-separated list of globs (local paths or gs://...)."""
    files: list[str] = []
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        matches = tf.io.gfile.glob(pattern)
        if not matches:
            raise TrainerError(f"no files match {pattern!r}")
        files.extend(matches)
    if not files:
        raise TrainerError(f"no files match {patterns!r}")
    return sorted(set(files))


def _flag_for(name: str) -> str:
    seq_features = ("input_ids", "input_mask", "segment_ids")
    return "--max-seq-length" if name in seq_features else "--max-predictions-per-seq"


def check_records(files: list[str], max_seq_length: int, max_predictions_per_seq: int, vocab_size: int | None = None) -> None:
    """Read the first record and compare it with the feature spec (and its token ids with the vocab size), so
    that a mismatch is named before training.

    Parsing would otherwise fail deep inside tf.data with a message that names neither the feature nor the flag,
    and an id past the embedding table fails on CPU only (a GPU silently looks up zeros).
    """
    first = None
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.DataLossError as err:
            raise corrupt_file_error(path, err) from None
        if first is not None:
            break
    if first is None:
        raise TrainerError(f"no records in {files[0]}" if len(files) == 1 else f"no records in any of the {len(files)} files")
    try:
        example = tf.train.Example.FromString(first.numpy())
    except Exception:  # protobuf raises its own DecodeError; any failure means the same to the user
        raise TrainerError(f"{path} does not hold tf.train.Example records") from None

    features = example.features.feature
    for name, spec in feature_spec(max_seq_length, max_predictions_per_seq).items():
        if name not in features:
            raise TrainerError(f"{path}: records have no feature {name!r} (found: {', '.join(sorted(features))})")
        kind = "float_list" if spec.dtype == tf.float32 else "int64_list"
        if features[name].WhichOneof("kind") != kind:
            raise TrainerError(f"{path}: feature {name!r} is a {features[name].WhichOneof('kind')}, expected {kind}")
        found, expected = len(getattr(features[name], kind).value), spec.shape[0]
        if found != expected:
            if name == "next_sentence_labels":
                raise TrainerError(f"{path}: next_sentence_labels has {found} values, expected 1")
            flag = _flag_for(name)
            raise TrainerError(f"{path}: {name} has {found} values but {flag} is {expected}")
    if vocab_size is not None:
        largest = max(max(features[name].int64_list.value) for name in ("input_ids", "masked_lm_ids"))
        if largest >= vocab_size:
            raise TrainerError(f"{path}: records hold token id {largest} but --vocab-size is {vocab_size}")


def corrupt_file_error(path: str, err: tf.errors.DataLossError) -> TrainerError:
    # Keep TensorFlow's reason ("corrupted record at 4216") without its op and function decorations.
    reason = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", err.message or "").strip().splitlines()
    return TrainerError(f"corrupt record file {path}: {reason[0] if reason else 'data loss'}")


def find_corrupt_file(files: list[str]) -> str | None:
    """The first file whose records fail their CRC check, or None.

    tf.data's DataLossError does not say which file of an interleaved set is bad, so we look for it
    only after the error (reading every file would cost a full pass over the data at every start).
    """
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path, buffer_size=1 << 22):
                pass
        except tf.errors.DataLossError:
            return path
    return None


def _parse_batch(spec: dict[str, tf.io.FixedLenFeature]):
    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        features = tf.io.parse_example(serialized, spec)
        # int32 throughout: TPUs have no int64 ops, and GPU gathers are faster on int32.
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in features.items()}

    return parse


def train_dataset(
    files: list[str],
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    seed: int,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
) -> tf.data.Dataset:
    """An endless stream of shuffled batches.

    Files are shuffled and read 4 at a time, interleaved; records then pass through a shuffle buffer.
    The creating job has already shuffled the instances globally, so this only mixes shards further.
    """
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    ds = tf.data.Dataset.from_tensor_slices(files)
    ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(4, len(files)),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=False,  # take whichever file is ready first; order does not matter after the shuffle
    )
    ds = ds.shuffle(shuffle_buffer, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=True)  # static shapes for XLA and TPU
    ds = ds.map(_parse_batch(spec), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def eval_dataset(files: list[str], batch_size: int, max_seq_length: int, max_predictions_per_seq: int) -> tf.data.Dataset:
    """One pass over the files in order; a last partial batch is dropped (static shapes)."""
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    ds = tf.data.TFRecordDataset(files)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(_parse_batch(spec), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)
