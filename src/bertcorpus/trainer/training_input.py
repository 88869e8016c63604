"""Where a training run's batches come from: a `create` output (through the loader) or TFRecord globs (through
tf.data), resolved once from the flags, with the eval data; and the one line for an input error raised mid-run."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from bertcorpus.trainer.config import DEFAULT_PREDICTIONS, DEFAULT_SEQ_LENGTH, BertConfig, TrainConfig, TrainerError
from bertcorpus.trainer.data import (
    NO_EVAL,
    CreateOutput,
    LoaderBatches,
    check_records,
    check_token_ids,
    corrupt_file_error,
    find_corrupt_file,
    is_create_output,
    list_files,
    new_loader,
    tf_batches,
    train_dataset,
)
from bertcorpus.trainer.devices import Devices


@dataclass
class DataSource:
    """Where the batches come from: a `create` output (through the loader) or TFRecord globs (through tf.data)."""

    seq_length: int
    predictions: int
    pair_objective: str
    vocab_size: int
    output: CreateOutput | None = None
    train_files: list[str] | None = None
    eval_output: CreateOutput | None = None
    eval_files: list[str] | None = None

    @property
    def has_eval(self) -> bool:
        return bool(self.eval_output or self.eval_files)


def resolve_input(config: TrainConfig) -> DataSource:
    output = CreateOutput.read(config.data) if is_create_output(config.data) else None
    if output is not None:
        seq_length = output.seq_length(config.max_seq_length)
        predictions = config.max_predictions_per_seq or output.seq_configs[seq_length]
        if output.masking == "static" and predictions != output.seq_configs[seq_length]:
            raise TrainerError(
                f"--max-predictions-per-seq {predictions} differs from the {output.seq_configs[seq_length]} "
                f"that {output.path}'s static records were masked with"
            )
        if output.masking == "dynamic" and config.max_predictions_per_seq is None and config.masked_lm_prob:
            predictions = _scaled_predictions(config, output, seq_length)
        pair_objective = output.pair_objective
        vocab_size = config.vocab_size or output.vocab_size or BertConfig.vocab_size
        found = DataSource(seq_length, predictions, pair_objective, vocab_size, output=output)
    else:
        masking = ("--masked-lm-prob", "--mask-replace-prob", "--random-replace-prob")
        given = [flag for flag in masking if getattr(config, flag[2:].replace("-", "_")) is not None]
        if given:
            raise TrainerError(
                f"{', '.join(given)} set how masks are drawn at load time, for a `create --masking dynamic` output; "
                "TFRecords hold their masks"
            )
        seq_length = config.max_seq_length or DEFAULT_SEQ_LENGTH
        predictions = config.max_predictions_per_seq or DEFAULT_PREDICTIONS
        vocab_size = config.vocab_size or BertConfig.vocab_size
        files = list_files(config.data)
        check_records(files, seq_length, predictions, vocab_size)
        found = DataSource(seq_length, predictions, "nsp", vocab_size, train_files=files)

    if config.eval_data == NO_EVAL:
        return found
    if config.eval_data is None:
        if output is not None and "eval" in output.splits[seq_length]:
            found.eval_output = output
    elif is_create_output(config.eval_data):
        found.eval_output = CreateOutput.read(config.eval_data)
        found.eval_output.seq_length(seq_length)  # names the seq lengths it has, if not this one
    else:
        found.eval_files = list_files(config.eval_data)
        check_records(found.eval_files, seq_length, predictions, vocab_size)
    return found


def _scaled_predictions(config: TrainConfig, output: CreateOutput, seq_length: int) -> int:
    """The cap on predictions the loader takes for --masked-lm-prob (trainer/masking_policy.py): the manifest's,
    scaled with the highest rate."""
    from bertcorpus.trainer.masking_policy import parse_schedule, scaled_cap
    from bertcorpus.trainer.record_files import LoaderError

    try:
        schedule = parse_schedule(config.masked_lm_prob)
    except LoaderError as err:
        raise TrainerError(f"--{err}".replace("masked_lm_prob", "masked-lm-prob", 1)) from None
    return scaled_cap(output.seq_configs[seq_length], seq_length, output.masked_lm_prob, schedule)


class TrainingInput:
    """What each fit call reads, from the step it starts at; and the data's place to save in a checkpoint."""

    def __init__(self, source: DataSource, config: TrainConfig, devices: Devices, start: int, data_state: dict | None):
        self.source, self.config, self.start = source, config, start
        self.batches = None
        if source.output is not None:
            self.batches = LoaderBatches(
                loader_args(source, source.output, config, devices, "train", config.batch_size),
                data_state,
                threads=1 if os.cpu_count() <= 2 else 2,
            )
            check_token_ids(self.batches.first(), source.vocab_size, source.output.path)

    def for_fit(self, step: int):
        if self.batches is not None:
            self.batches.offset = step - self.start  # batch k of this run is the loader's k-th after the resume point
            if self.source.output.bin_size and self.config.backend == "tensorflow":
                return tf_batches(self.batches.__getitem__, self.batches.first())
            return self.batches
        # A tf.data pipeline starts anew for each fit call; a new shuffle seed keeps it from replaying batches.
        c = self.config
        return train_dataset(
            self.source.train_files,
            c.batch_size,
            self.source.seq_length,
            self.source.predictions,
            c.seed + step,
            c.shuffle_buffer,
        )

    def state(self, step: int) -> dict | None:
        return self.batches.state_after(step - self.start) if self.batches is not None else None

    def close(self) -> None:
        if self.batches is not None:
            self.batches.close()


def check_train_data(source: DataSource, config: TrainConfig, devices: Devices) -> None:
    """A `create` output's train split as a loader of this run's batches (refused in one line if it cannot be)."""
    if source.output is not None:
        new_loader(**loader_args(source, source.output, config, devices, "train", config.batch_size))


def loader_args(
    source: DataSource, output: CreateOutput, config: TrainConfig, devices: Devices, split: str, batch_size: int
) -> dict:
    if batch_size % devices.world_size:
        raise TrainerError(f"the batch size {batch_size} is not a multiple of the {devices.world_size} processes")
    return {
        "output_dir": output.path,
        "seq_length": source.seq_length,
        "split": split,
        "batch_size": batch_size // devices.world_size,
        "rank": devices.rank,
        "world_size": devices.world_size,
        "seed": config.seed,
        "drop_remainder": True,
        "max_predictions_per_seq": source.predictions,
        "masked_lm_prob": config.masked_lm_prob,
        "mask_replace_prob": config.mask_replace_prob,
        "random_replace_prob": config.random_replace_prob,
    }


def input_error(err: Exception, files: list[str] | None, data: str) -> TrainerError | None:
    """The one line for an error that reading the input raised inside fit or evaluate, or None for a bug."""
    if isinstance(err, TrainerError):
        return err
    if "tensorflow" in sys.modules:
        import tensorflow as tf

        if isinstance(err, tf.errors.DataLossError):
            return corrupt_file_error(find_corrupt_file(files or []) or data, err)
        if isinstance(err, tf.errors.InvalidArgumentError) and "serialized Example" in str(err):
            return TrainerError(
                f"a record in {data!r} does not match the feature spec: {str(err).splitlines()[0][:200]}"
            )
    wrapped = re.search(r"TrainerError: ([^\n]+)", str(err))  # raised in tf.data's Python thread
    return TrainerError(wrapped.group(1).strip()) if wrapped else None
