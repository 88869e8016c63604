"""The trainer's input: a `create` output through trainer.loader.PretrainingLoader on every backend, or TFRecord
globs made elsewhere through tf.data, with the reference trainer's exact feature spec.

Records are tf.train.Examples with fixed-length features (REFERENCE.md §7): input_ids, input_mask and
segment_ids of length L (--max-seq-length); masked_lm_positions, masked_lm_ids (int64) and
masked_lm_weights (float) of length P (--max-predictions-per-seq); next_sentence_labels of length 1.
TensorFlow is imported only to read globs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import keras
import numpy as np

from bertcorpus.trainer.config import DEFAULT_SHUFFLE_BUFFER, TrainerError
from bertcorpus.trainer.storage import exists, is_remote, read_text
from bertcorpus.transforms import tfrecord
from bertcorpus.transforms.local_files import special_file_problem

MANIFEST = "manifest.json"
NO_EVAL = "none"
READ_AHEAD = 4  # batches a loader thread prepares before the step asks for them
WIDTH_FEATURES = ("input_ids", "input_mask", "segment_ids")  # padded to the batch's length bin, with bins


def _loader_module():
    """trainer.loader, imported when a `create` output is read: it needs pyarrow, which a machine that trains on
    synthetic batches (benchmarks/bench_trainer_gpu.py) may lack."""
    try:
        from bertcorpus.trainer import loader
    except ImportError as err:
        raise TrainerError(
            f"reading a `create` output needs this package's dependencies (pip install -e .): {err}"
        ) from None
    return loader


def new_loader(**loader_args):
    """A PretrainingLoader; its LoaderError (one line) becomes the trainer's."""
    loader = _loader_module()
    try:
        return loader.PretrainingLoader(**loader_args)
    except loader.LoaderError as err:
        raise TrainerError(str(err)) from None


def _tf():
    try:
        import tensorflow as tf
    except ImportError:
        raise TrainerError(
            "reading TFRecord globs needs TensorFlow (pip install 'bertcorpus[train]'); a `create` "
            "output folder as --data is read without it"
        ) from None
    return tf


# ----------------------------------------------------------------------------- `create` outputs


def is_create_output(data: str) -> bool:
    """Whether --data names a `create` output folder rather than TFRecord globs."""
    if any(c in data for c in "*?[,"):
        return False
    if exists(f"{data.rstrip('/')}/{MANIFEST}"):
        return True
    if not is_remote(data) and os.path.isdir(data):
        raise TrainerError(
            f"{data} has no {MANIFEST}: not a finished `bertcorpus create` output (TFRecords made "
            f"elsewhere are given as globs, e.g. '{os.path.join(data, '*.tfrecord')}')"
        )
    if is_remote(data) and not exists(data):  # a remote folder is only a prefix: exists() is False for it too
        raise TrainerError(
            f"{data} is neither a finished `bertcorpus create` output (no {data.rstrip('/')}/{MANIFEST}) "
            f"nor a file (TFRecords made elsewhere are given as globs, e.g. '{data.rstrip('/')}/*.tfrecord')"
        )
    return False


@dataclass(frozen=True)
class CreateOutput:
    """What the trainer takes from a `create` output's manifest: the seq configs, the form and the vocab size."""

    path: str
    seq_configs: dict[int, int]  # L -> P
    masking: str
    pair_objective: str
    splits: dict[int, tuple[str, ...]]  # L -> the splits written for it
    vocab_size: int | None  # None where the vocab file cannot be read here
    masked_lm_prob: float = 0.15  # the rate the output was made with
    bin_size: int | None = None  # --bin-size: batches are then padded to their length bin, not to L

    @classmethod
    def read(cls, path: str) -> CreateOutput:
        path = path.rstrip("/")
        try:
            manifest = json.loads(read_text(f"{path}/{MANIFEST}"))
        except (OSError, ValueError) as err:
            raise TrainerError(f"cannot read {path}/{MANIFEST}: {err}") from None
        if manifest.get("job") != "create" or "outputs" not in manifest:
            raise TrainerError(
                f"{path} is not a `bertcorpus create` output (its manifest is of {manifest.get('job')!r})"
            )
        form = manifest.get("form") or {}  # runs from before the form field are static NSP TFRecords
        outputs = {int(entry["max_seq_length"]): entry for entry in manifest["outputs"].values()}
        return cls(
            path=path,
            seq_configs={L: int(entry["max_predictions_per_seq"]) for L, entry in outputs.items()},
            masking=form.get("masking", "static"),
            pair_objective=form.get("pair_objective", "nsp"),
            splits={L: tuple(split for split in ("train", "eval") if split in entry) for L, entry in outputs.items()},
            vocab_size=_vocab_size(path, manifest.get("vocab") or {}, manifest.get("tokenizer")),
            masked_lm_prob=float((manifest.get("config") or {}).get("masked_lm_prob", 0.15)),
            bin_size=form.get("bin_size"),
        )

    def seq_length(self, requested: int | None) -> int:
        have = ", ".join(f"{L}" for L in sorted(self.seq_configs))
        if requested is None:
            if len(self.seq_configs) != 1:
                raise TrainerError(f"{self.path} holds the seq lengths {have}: choose one with --seq-length")
            return next(iter(self.seq_configs))
        if requested not in self.seq_configs:
            raise TrainerError(f"{self.path} has no seq length {requested} (it has {have})")
        return requested


def _vocab_size(path: str, vocab: dict, tokenizer: dict | None = None) -> int | None:
    """Tokens in the output's vocab: a tokenizer.json's as the manifest records it; a vocab.txt's own copy (dynamic
    form), else the file create read, where it is here and still the one the manifest's sha256 names."""
    if isinstance(tokenizer, dict) and isinstance(tokenizer.get("vocab_size"), int):
        return tokenizer["vocab_size"]
    candidates = [f"{path}/{vocab['copy']}"] if vocab.get("copy") else []
    if vocab.get("path"):
        candidates.append(vocab["path"])
    for candidate in candidates:
        try:
            text = read_text(candidate)
        except OSError:
            continue
        if candidate == vocab.get("path") and hashlib.sha256(text.encode("utf-8")).hexdigest() != vocab.get("sha256"):
            continue
        return len(text.splitlines())
    return None


def check_token_ids(batch: dict[str, np.ndarray], vocab_size: int, where: str) -> None:
    """An id past the embedding table fails on CPU only (a GPU silently looks up zeros): name it before training."""
    largest = int(max(batch["input_ids"].max(), batch["masked_lm_ids"].max()))
    if largest >= vocab_size:
        raise TrainerError(f"{where}: records hold token id {largest} but --vocab-size is {vocab_size}")


class LoaderBatches(keras.utils.PyDataset):
    """The training batches of a `create` output for Keras's fit, epoch after epoch without end.

    Batch k counts from the start of this run (plus `offset`, which the caller moves to the batches already trained
    on before each fit call). Threads of their own, each with its own PretrainingLoader, read a few batches ahead in
    order. Where a run stands is a function of the batches trained on alone (state_after), so a batch read ahead
    and never used changes nothing.
    """

    def __init__(self, loader_args: dict, state: dict | None, threads: int = 1):
        super().__init__(workers=1, use_multiprocessing=False)
        self.loader_args = loader_args
        self.offset = 0
        self._bookkeeper = self._loader(state)
        self.resume_state = self._bookkeeper.state_dict(0)  # where batch 0 comes from, as a state
        self.first_epoch = self._bookkeeper.epoch
        self.first_length = len(self._bookkeeper)  # what is left of the first epoch
        self._bookkeeper.set_epoch(self.first_epoch + 1)
        self.epoch_length = len(self._bookkeeper)  # a full epoch: the same for every epoch (whole batches only)
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="loader")
        self._ahead: dict[int, Future] = {}

    def _loader(self, state: dict | None):
        loader = new_loader(**self.loader_args)
        if state is not None:
            try:
                loader.load_state_dict(state)
            except _loader_module().LoaderError as err:
                raise TrainerError(f"cannot resume the data where the checkpoint left it: {err}") from None
        return loader

    @property
    def num_batches(self):
        return None  # endless: fit's epochs are log windows, not passes over the data

    def position(self, k: int) -> tuple[int, int | None]:
        """(epoch, batch of that epoch's loader) of batch k: in the first epoch an index after the resume point."""
        if k < self.first_length:
            return self.first_epoch, k
        k -= self.first_length
        return self.first_epoch + 1 + k // self.epoch_length, k % self.epoch_length

    def _read(self, k: int) -> dict[str, np.ndarray]:
        try:
            return self._read_batch(k)
        except _loader_module().LoaderError as err:  # a damaged shard, found while training
            raise TrainerError(str(err)) from None

    def _read_batch(self, k: int) -> dict[str, np.ndarray]:
        epoch, i = self.position(k)
        loader = getattr(self._local, "loader", None)
        if loader is None or getattr(self._local, "epoch", None) != epoch:
            if epoch == self.first_epoch:
                loader = self._loader(self.resume_state)
            else:
                loader = loader or self._loader(None)
                loader.set_epoch(epoch)
            self._local.loader, self._local.epoch = loader, epoch
        return loader[i]

    def first(self) -> dict[str, np.ndarray]:
        """The run's first batch (for the checks before training), read ahead as fit will ask for it."""
        if 0 not in self._ahead:
            self._ahead[0] = self._pool.submit(self._read, 0)
        return self._ahead[0].result()

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        k = self.offset + index
        for ahead in range(k, k + READ_AHEAD + 1):
            if ahead not in self._ahead:
                self._ahead[ahead] = self._pool.submit(self._read, ahead)
        for stale in [j for j in self._ahead if j < k]:
            self._ahead.pop(stale).cancel()
        return self._ahead.pop(k).result()

    def state_after(self, batches: int) -> dict:
        """The loader state of a run that has trained on `batches` batches of this one: resuming from it gives
        batch `batches` next."""
        epoch, i = self.position(batches)
        if epoch == self.first_epoch:
            self._bookkeeper.load_state_dict(self.resume_state)
        else:
            self._bookkeeper.set_epoch(epoch)
        return self._bookkeeper.state_dict(batches=i)

    def close(self) -> None:
        for future in self._ahead.values():
            future.cancel()
        self._ahead.clear()
        self._pool.shutdown(wait=True)


def tf_batches(read, first: dict[str, np.ndarray], count: int | None = None):
    """Batches read(0), read(1), ... (`count` of them, or without end) as a tf.data.Dataset whose width may change
    from batch to batch, as a binned output's does: on TensorFlow, Keras's adapter of a PyDataset fixes every shape
    from the first two batches, and then fails on the first batch of another bin."""
    tf = _tf()
    spec = {
        name: tf.TensorSpec((len(v), None) if name in WIDTH_FEATURES else v.shape, tf.as_dtype(v.dtype))
        for name, v in first.items()
    }
    batches = tf.data.Dataset.from_generator(
        lambda: (read(i) for i in (itertools.count() if count is None else range(count))), output_signature=spec
    )
    # A known length lets Keras end an evaluation where the batches end, rather than at a "ran out of data".
    return batches if count is None else batches.apply(tf.data.experimental.assert_cardinality(count))


class EvalBatches(keras.utils.PyDataset):
    """One pass over a `create` output's eval split (whole batches only), for Keras's evaluate."""

    def __init__(self, loader, steps: int | None):
        super().__init__(workers=1, use_multiprocessing=False)
        self.loader = loader
        self.steps = len(loader) if steps is None else min(steps, len(loader))

    @property
    def num_batches(self):
        return self.steps

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        try:
            return self.loader[index]
        except _loader_module().LoaderError as err:
            raise TrainerError(str(err)) from None


# ----------------------------------------------------------------------------- TFRecord globs (tf.data)


def feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """The records' features (transforms/tfrecord.py) as tf.data parses them."""
    tf = _tf()
    return {
        name: tf.io.FixedLenFeature([width], tf.float32 if is_float else tf.int64)
        for name, (is_float, width) in tfrecord.feature_spec(max_seq_length, max_predictions_per_seq).items()
    }


def list_files(patterns: str) -> list[str]:
    """Sorted files matching a comma-separated list of globs (local paths or gs://...)."""
    tf = _tf()
    files: list[str] = []
    for pattern in (p.strip() for p in patterns.split(",")):
        if not pattern:
            continue
        try:
            matches = tf.io.gfile.glob(pattern)
        except tf.errors.OpError as err:
            raise TrainerError(f"cannot list {pattern}: {str(err).splitlines()[0]}") from None
        if not matches:
            raise TrainerError(f"no files match {pattern!r}")
        for match in matches:
            if problem := special_file_problem(match, "the record file"):
                raise TrainerError(problem)
        files.extend(matches)
    if not files:
        raise TrainerError(f"no files match {patterns!r}")
    return sorted(set(files))


def _flag_for(name: str) -> str:
    seq_features = ("input_ids", "input_mask", "segment_ids")
    return "--max-seq-length" if name in seq_features else "--max-predictions-per-seq"


def check_records(
    files: list[str], max_seq_length: int, max_predictions_per_seq: int, vocab_size: int | None = None
) -> None:
    """Read the first record and compare it with the feature spec (and its token ids with the vocab size), so
    that a mismatch is named before training.

    Parsing would otherwise fail deep inside tf.data with a message that names neither the feature nor the flag,
    and an id past the embedding table fails on CPU only (a GPU silently looks up zeros).
    """
    tf = _tf()
    first = None
    for path in files:
        try:
            first = next(iter(tf.data.TFRecordDataset(path).take(1)), None)
        except tf.errors.DataLossError as err:
            raise corrupt_file_error(path, err) from None
        if first is not None:
            break
    if first is None:
        raise TrainerError(
            f"no records in {files[0]}" if len(files) == 1 else f"no records in any of the {len(files)} files"
        )
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
        check_token_ids(
            {name: np.asarray(features[name].int64_list.value) for name in ("input_ids", "masked_lm_ids")},
            vocab_size,
            path,
        )


def corrupt_file_error(path: str, err) -> TrainerError:
    """One line for a tf.errors.DataLossError."""
    # Keep TensorFlow's reason ("corrupted record at 4216") without its op and function decorations.
    reason = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", err.message or "").strip().splitlines()
    return TrainerError(f"corrupt record file {path}: {reason[0] if reason else 'data loss'}")


def find_corrupt_file(files: list[str]) -> str | None:
    """The first file whose records fail their CRC check, or None.

    tf.data's DataLossError does not say which file of an interleaved set is bad, so we look for it
    only after the error (reading every file would cost a full pass over the data at every start).
    """
    tf = _tf()
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset(path, buffer_size=1 << 22):
                pass
        except tf.errors.DataLossError:
            return path
    return None


def _parse_batch(spec: dict):
    tf = _tf()

    def parse(serialized):
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
):
    """An endless stream of shuffled batches (a tf.data.Dataset).

    Files are shuffled and read 4 at a time, interleaved; records then pass through a shuffle buffer.
    The creating job has already shuffled the instances globally, so this only mixes shards further.
    """
    tf = _tf()
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


def eval_dataset(files: list[str], batch_size: int, max_seq_length: int, max_predictions_per_seq: int):
    """One pass over the files in order, a tf.data.Dataset; a last partial batch is dropped (static shapes)."""
    tf = _tf()
    spec = feature_spec(max_seq_length, max_predictions_per_seq)
    ds = tf.data.TFRecordDataset(files)
    ds = ds.batch(batch_size, drop_remainder=True)
    ds = ds.map(_parse_batch(spec), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)
