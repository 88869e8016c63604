"""Pretrain BERT on the output of `bertcorpus create`, with Keras on TensorFlow, JAX or PyTorch.

Phase 1 trains at 128 tokens, phase 2 continues from phase 1's weights at 512 tokens:

    bertcorpus train --data out --seq-length 128 --config base --batch-size 256 --steps 900000 --output runs/phase1
    bertcorpus train --data out --seq-length 512 --config base --batch-size 256 --steps 100000 \\
        --init-checkpoint runs/phase1 --output runs/phase2

One loop serves every backend: Keras's own fit, with the loss and the logged losses in the model's compute_loss,
XLA (TensorFlow, JAX) and --steps-per-execution steps per compiled call. Devices: a TPU (TensorFlow's TPUStrategy,
or JAX over all its cores), several GPUs (TensorFlow's MirroredStrategy, JAX data parallel), or one device.
A Keras "epoch" of fit is the stretch between two log or checkpoint steps, so both happen at exact step numbers.
Running the same command again resumes from the last checkpoint in --output at the exact step, with the optimizer
state, the dropout random state and the loader's place in the data.

Outputs in --output: config.json, checkpoints/ckpt-STEP/ (Keras's weights file, which holds the optimizer's
variables too, the dropout layers' random state and checkpoint.json), train_log.jsonl (one line per log step), eval_results.json (the reference trainer's eval metrics
and their baselines) and, on TensorFlow, tensorboard/.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import re
import sys
import time
from dataclasses import dataclass

from bertcorpus.trainer.config import TrainerError, choose_backend, requested_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if __name__ == "__main__":  # `python -m trainer.train`: Keras takes its backend from the environment, at its import
    try:
        os.environ["KERAS_BACKEND"] = choose_backend(requested_backend(sys.argv[1:]), os.environ.get("KERAS_BACKEND"))
    except TrainerError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from bertcorpus.trainer.checkpoints import checkpoint_steps, load_init_checkpoint, read_checkpoint_meta, refuse_old_checkpoints, restore_checkpoint, save_checkpoint
from bertcorpus.trainer.config import DEFAULT_PREDICTIONS, DEFAULT_SEQ_LENGTH, PRESET_LEARNING_RATES, PRESETS, BertConfig, TrainConfig, add_train_arguments, config_from_args
from bertcorpus.trainer.data import NO_EVAL, CreateOutput, EvalBatches, LoaderBatches, check_records, check_token_ids, corrupt_file_error, eval_dataset, find_corrupt_file, is_create_output, list_files, new_loader, train_dataset
from bertcorpus.trainer.devices import Devices, choose_devices
from bertcorpus.trainer.model import BertPretrainer, dummy_batch, parameter_count, prediction_losses, pretraining_loss
from bertcorpus.trainer.storage import exists, is_remote, join, read_text, write_text

KERAS_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
MLM_METRICS = ("masked_lm_accuracy", "masked_lm_loss")
NSP_METRICS = ("next_sentence_accuracy", "next_sentence_loss")
# What a model that learned nothing from the inputs scores on the same eval data: always the most frequent
# masked token, always the more frequent next-sentence label.
EVAL_BASELINES = {"masked_lm_accuracy": "masked_lm_baseline_accuracy", "next_sentence_accuracy": "next_sentence_baseline_accuracy"}


@dataclass
class TrainResult:
    step: int
    optimizer_iterations: int
    eval_results: dict[str, float] | None


# ----------------------------------------------------------------------------- random state


def seed_everything(seed: int) -> None:
    """Python's, NumPy's and the backend's generators, from which Keras seeds initializers and dropout.

    keras.utils.set_random_seed also imports TensorFlow wherever it is installed, to seed tf.data; on JAX or PyTorch
    that would cost seconds and, on a GPU, TensorFlow's claim on the GPU's memory, so there it is left out unless
    TensorFlow is loaded anyway (to read TFRecord globs).
    """
    if keras.backend.backend() == "tensorflow" or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    random.seed(seed)
    np.random.seed(seed)
    if keras.backend.backend() == "torch":
        import torch

        torch.manual_seed(seed)


# ----------------------------------------------------------------------------- optimisation


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to the peak over `warmup` steps, then linear decay to 0 at `total` steps."""

    def __init__(self, peak: float, warmup: int, total: int):
        self.peak, self.warmup, self.total = peak, warmup, total

    def __call__(self, iterations):
        step = ops.cast(iterations, "float32") + 1.0  # the optimizer passes the number of steps already applied
        warm = step / max(self.warmup, 1)
        decay = (self.total - step + 1.0) / max(self.total - self.warmup, 1)
        return self.peak * ops.maximum(ops.minimum(warm, decay), 0.0)

    def get_config(self) -> dict[str, float]:
        return {"peak": self.peak, "warmup": self.warmup, "total": self.total}


def peak_learning_rate(config: TrainConfig) -> float:
    return PRESET_LEARNING_RATES[config.model] if config.learning_rate is None else config.learning_rate


def warmup_steps(config: TrainConfig) -> int:
    steps = round(config.warmup_fraction * config.steps) if config.warmup_steps is None else config.warmup_steps
    return min(steps, config.steps)


def with_schedule_defaults(config: TrainConfig) -> TrainConfig:
    """The config with the peak learning rate and the warm-up that the run will use, for config.json."""
    return dataclasses.replace(config, learning_rate=peak_learning_rate(config), warmup_steps=warmup_steps(config))


def make_schedule(config: TrainConfig) -> WarmupLinearDecay:
    return WarmupLinearDecay(peak_learning_rate(config), warmup_steps(config), config.steps)


def make_optimizer(config: TrainConfig, model: keras.Model, precision: str) -> keras.optimizers.Optimizer:
    optimizer_class = {"adamw": keras.optimizers.AdamW, "lamb": keras.optimizers.Lamb}[config.optimizer]
    optimizer = optimizer_class(
        learning_rate=make_schedule(config),
        weight_decay=config.weight_decay,
        beta_1=config.beta1,
        beta_2=config.beta2,
        epsilon=config.epsilon,
        global_clipnorm=config.clip_norm or None,
    )
    # BERT does not decay LayerNorm parameters or biases; in this model they are exactly the 1-D weights.
    optimizer.exclude_from_weight_decay(var_list=[v for v in model.trainable_variables if len(v.shape) == 1])
    if precision == "fp16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    optimizer.build(model.trainable_variables)  # create the slots now, so a checkpoint restores into them at once
    return optimizer


# ----------------------------------------------------------------------------- the model's loss and metrics


def _replicas_in_sync() -> int:
    """Replicas that each compute a loss on their share of the batch (tf.distribute only: JAX shards one program)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


class PretrainingEvalSums(keras.metrics.Metric):
    """The sums the eval metrics are ratios of, and the weight of each token id among the masked-LM targets (for
    the most-frequent-token baseline), over every eval batch and replica."""

    NAMES = ("mlm_loss", "mlm_hits", "mlm_weight", "nsp_loss", "nsp_hits", "sequences", "random_next")

    def __init__(self, vocab_size: int, name: str = "pretraining_eval", **kwargs):
        super().__init__(name=name, **kwargs)
        self.sums = self.add_variable(shape=(len(self.NAMES),), initializer="zeros", name="sums")
        self.target_weights = self.add_variable(shape=(vocab_size,), initializer="zeros", name="target_weights")
        self.vocab_size = vocab_size

    def update_state(self, batch, outputs):
        mlm_nll, nsp_nll = prediction_losses(outputs, batch)
        weights = ops.cast(batch["masked_lm_weights"], "float32")
        targets = ops.cast(batch["masked_lm_ids"], "int32")
        mlm_hit = ops.cast(ops.equal(ops.argmax(outputs["mlm_logits"], axis=-1), targets), "float32")
        labels = ops.reshape(batch["next_sentence_labels"], (-1,))
        sequences = ops.cast(ops.shape(labels)[0], "float32")
        zero = ops.zeros((), "float32")
        if nsp_nll is None:
            nsp_loss = nsp_hits = random_next = zero
        else:
            nsp_hit = ops.equal(ops.argmax(outputs["nsp_logits"], axis=-1), ops.cast(labels, "int32"))
            nsp_loss, nsp_hits = ops.sum(nsp_nll), ops.sum(ops.cast(nsp_hit, "float32"))
            random_next = ops.sum(ops.cast(labels, "float32"))
        sums = ops.stack([ops.sum(weights * mlm_nll), ops.sum(weights * mlm_hit), ops.sum(weights),
                          nsp_loss, nsp_hits, sequences, random_next])
        self.sums.assign_add(sums)
        self.target_weights.assign_add(
            ops.segment_sum(ops.reshape(weights, (-1,)), ops.reshape(targets, (-1,)), num_segments=self.vocab_size))

    def result(self):
        return {}  # read once, at the end, by eval_results (a ratio per step would be wasted work)

    def eval_results(self, pair_head: bool) -> dict[str, float]:
        sums = dict(zip(self.NAMES, ops.convert_to_numpy(self.sums).astype(np.float64).tolist()))
        weight, sequences = sums["mlm_weight"], sums["sequences"]
        results = {
            "masked_lm_accuracy": sums["mlm_hits"] / weight,
            "masked_lm_baseline_accuracy": float(ops.convert_to_numpy(self.target_weights).max()) / weight,
            "masked_lm_loss": sums["mlm_loss"] / weight,
        }
        if pair_head:
            random_next = sums["random_next"]
            results.update({
                "next_sentence_accuracy": sums["nsp_hits"] / sequences,
                "next_sentence_baseline_accuracy": max(random_next, sequences - random_next) / sequences,
                "next_sentence_loss": sums["nsp_loss"] / sequences,
            })
        return {**results, "eval_sequences": int(sequences)}


class PretrainingModel(BertPretrainer):
    """BertPretrainer with the reference trainer's loss, for Keras's fit and evaluate on every backend.

    compute_loss is where Keras hands over the batch (the labels are in it), the outputs and whether it trains;
    every backend runs it with the metrics' state mapped in, so the logged losses and the eval sums are updated there,
    from the values the loss needs anyway.
    """

    def __init__(self, config: BertConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        if config.pair_head:
            self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
        self.eval_sums = PretrainingEvalSums(config.vocab_size)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss, mlm_loss, nsp_loss = pretraining_loss(y_pred, x)
        if training:
            self.mlm_loss_tracker.update_state(mlm_loss)
            if nsp_loss is not None:
                self.nsp_loss_tracker.update_state(nsp_loss)
        else:
            self.eval_sums.update_state(x, y_pred)
        # With tf.distribute each replica's gradients are summed: dividing makes the sum the mean's gradient.
        replicas = _replicas_in_sync()
        return loss / replicas if replicas > 1 else loss


def build_model(bert_config: BertConfig, config: TrainConfig, devices: Devices, seq_length: int, predictions: int):
    """The model and its optimizer, compiled for fit (made in the devices' scope)."""
    keras.mixed_precision.set_global_policy(KERAS_POLICIES[devices.precision])
    with devices.scope:
        model = PretrainingModel(bert_config, name="bert")
        model(dummy_batch(1, seq_length, predictions))  # create the weights
        optimizer = make_optimizer(config, model, devices.precision)
        model.compile(optimizer=optimizer, steps_per_execution=config.steps_per_execution,
                      jit_compile=devices.jit_compile)
    return model, optimizer


# ----------------------------------------------------------------------------- logs


def truncate_log(path: str, last_step: int) -> str:
    """Drop log lines past the checkpoint we resume from, so every step appears once; returns what is kept."""
    if not exists(path):
        return ""
    lines = [line for line in read_text(path).splitlines(keepends=True)
             if line.strip() and json.loads(line)["step"] <= last_step]
    kept = "".join(lines)
    write_text(path, kept)
    return kept


class ScalarWriter:
    """TensorBoard scalars, on the TensorFlow backend (its summary op writes them without the tensorboard package)."""

    def __init__(self, directory: str):
        import tensorflow as tf

        self.tf = tf
        self.writer = tf.summary.create_file_writer(directory)
        self.metadata = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))

    def write(self, values: dict[str, float], step: int) -> None:
        with self.writer.as_default():
            for name, value in values.items():
                self.tf.summary.write(name, self.tf.constant(value, self.tf.float32), step=step, metadata=self.metadata)

    def close(self) -> None:
        self.writer.close()


def scalar_writer(directory: str) -> ScalarWriter | None:
    return ScalarWriter(directory) if keras.backend.backend() == "tensorflow" else None


# ----------------------------------------------------------------------------- input


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
            raise TrainerError(f"--max-predictions-per-seq {predictions} differs from the {output.seq_configs[seq_length]} "
                               f"that {output.path}'s static records were masked with")
        pair_objective = output.pair_objective
        vocab_size = config.vocab_size or output.vocab_size or BertConfig.vocab_size
        found = DataSource(seq_length, predictions, pair_objective, vocab_size, output=output)
    else:
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


class TrainingInput:
    """What each fit call reads, from the step it starts at; and the data's place to save in a checkpoint."""

    def __init__(self, source: DataSource, config: TrainConfig, devices: Devices, start: int, data_state: dict | None):
        self.source, self.config, self.start = source, config, start
        self.batches = None
        if source.output is not None:
            self.batches = LoaderBatches(loader_args(source, source.output, config, devices, "train", config.batch_size),
                                         data_state, threads=1 if os.cpu_count() <= 2 else 2)
            check_token_ids(self.batches.first(), source.vocab_size, source.output.path)

    def for_fit(self, step: int):
        if self.batches is not None:
            self.batches.offset = step - self.start  # batch k of this run is the loader's k-th after the resume point
            return self.batches
        # A tf.data pipeline starts anew for each fit call; a new shuffle seed keeps it from replaying batches.
        c = self.config
        return train_dataset(self.source.train_files, c.batch_size, self.source.seq_length, self.source.predictions,
                             c.seed + step, c.shuffle_buffer)

    def state(self, step: int) -> dict | None:
        return self.batches.state_after(step - self.start) if self.batches is not None else None

    def close(self) -> None:
        if self.batches is not None:
            self.batches.close()


def loader_args(source: DataSource, output: CreateOutput, config: TrainConfig, devices: Devices, split: str, batch_size: int) -> dict:
    if batch_size % devices.world_size:
        raise TrainerError(f"the batch size {batch_size} is not a multiple of the {devices.world_size} processes")
    return {
        "output_dir": output.path, "seq_length": source.seq_length, "split": split,
        "batch_size": batch_size // devices.world_size, "rank": devices.rank, "world_size": devices.world_size,
        "seed": config.seed, "drop_remainder": True,
        "max_predictions_per_seq": source.predictions,
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
            return TrainerError(f"a record in {data!r} does not match the feature spec: {str(err).splitlines()[0][:200]}")
    wrapped = re.search(r"TrainerError: ([^\n]+)", str(err))  # raised in tf.data's Python thread
    return TrainerError(wrapped.group(1).strip()) if wrapped else None


# ----------------------------------------------------------------------------- the run


def check_config(config: TrainConfig) -> None:
    if not config.output:
        raise TrainerError("--output is required")
    if config.model not in PRESETS:
        raise TrainerError(f"unknown --config {config.model!r}; choose from {', '.join(PRESETS)}")
    if config.optimizer not in ("adamw", "lamb"):
        raise TrainerError(f"unknown --optimizer {config.optimizer!r}; choose adamw or lamb")
    for name in ("vocab_size", "batch_size", "steps", "max_seq_length", "max_predictions_per_seq", "steps_per_execution",
                 "log_every", "checkpoint_every", "keep_checkpoints"):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise TrainerError(f"--{name.replace('_', '-')} must be at least 1")
    if (config.max_seq_length or 0) > BertConfig.max_position:
        raise TrainerError(f"--max-seq-length {config.max_seq_length} exceeds the {BertConfig.max_position} position embeddings")
    if (config.max_predictions_per_seq or 0) > (config.max_seq_length or BertConfig.max_position):
        raise TrainerError("--max-predictions-per-seq cannot exceed --max-seq-length")
    if config.learning_rate is not None and config.learning_rate < 0:
        raise TrainerError("--learning-rate cannot be negative")
    if config.warmup_steps is not None and config.warmup_steps < 0:
        raise TrainerError("--warmup-steps cannot be negative")
    if not 0 <= config.warmup_fraction <= 1:
        raise TrainerError("--warmup-fraction must be between 0 and 1")


def train(config: TrainConfig) -> TrainResult:
    check_config(config)
    backend = keras.backend.backend()
    if config.backend and config.backend != backend:
        raise TrainerError(f"Keras was loaded with the {backend} backend in this process; run `bertcorpus train "
                           f"--backend {config.backend}` in a new one")
    if backend == "torch" and config.steps_per_execution != 1:
        raise TrainerError("--steps-per-execution must be 1 on the torch backend")
    config = with_schedule_defaults(config)
    source = resolve_input(config)
    config = dataclasses.replace(config, backend=backend, max_seq_length=source.seq_length,
                                 max_predictions_per_seq=source.predictions, vocab_size=source.vocab_size)
    devices = choose_devices(config, backend)
    for flag, size in (("--batch-size", config.batch_size), ("--eval-batch-size", config.eval_batch_size or config.batch_size)):
        if size % devices.replicas:
            raise TrainerError(f"{flag} {size} is not a multiple of the {devices.replicas} replicas")

    seed_everything(config.seed)
    bert_config = BertConfig.preset(config.model, vocab_size=source.vocab_size, pair_head=source.pair_objective != "none")
    model, optimizer = build_model(bert_config, config, devices, source.seq_length, source.predictions)

    refuse_old_checkpoints(config.output)
    checkpoints = checkpoint_steps(config.output)
    start, data_state = 0, None
    if checkpoints:
        start, folder = list(checkpoints.items())[-1]
        meta = read_checkpoint_meta(folder)
        if meta["backend"] != backend:
            raise TrainerError(f"{folder} was written by the {meta['backend']} backend; resume it with --backend "
                               f"{meta['backend']} (or start a new --output with --init-checkpoint {config.output}: "
                               f"its weights load on any backend)")
        if meta["model"] != bert_config.to_dict():
            raise TrainerError(f"{config.output} holds a run of a different model (saved: {meta['model']}); use another --output")
        restore_checkpoint(model, folder)
        data_state = meta.get("data")
        ignored = " (--init-checkpoint is ignored when resuming)" if config.init_checkpoint else ""
        print(f"resuming from {folder} at step {start}{ignored}", flush=True)
    elif config.init_checkpoint:
        load_init_checkpoint(model, config.init_checkpoint, bert_config)

    write_text(join(config.output, "config.json"), json.dumps(
        {"train": dataclasses.asdict(config), "model": bert_config.to_dict(), "pair_objective": source.pair_objective,
         "backend": backend, "precision": devices.precision, "strategy": devices.strategy}, indent=2))
    params = parameter_count(bert_config)["total"]
    print(
        f"model {config.model}: {params / 1e6:.1f}M parameters; backend {backend}; strategy {devices.strategy} with "
        f"{devices.replicas} replica(s); precision {devices.precision}; "
        f"{'compiled' if devices.jit_compile else 'not compiled'}",
        flush=True,
    )

    if start < config.steps:
        training_input = TrainingInput(source, config, devices, start, data_state)
        try:
            run_steps(config, model, training_input, start, {"backend": backend, "model": bert_config.to_dict()})
        finally:
            training_input.close()
    else:
        print(f"already at step {start} of --steps {config.steps}; nothing to train", flush=True)

    final_step = max(start, config.steps)
    eval_results = None
    if source.has_eval:
        eval_results = {"global_step": final_step, **evaluate(model, source, config, devices)}
        write_text(join(config.output, "eval_results.json"), json.dumps(eval_results, indent=2))
        writer = scalar_writer(join(config.output, "tensorboard", "eval"))
        if writer is not None:
            writer.write({k: v for k, v in eval_results.items() if isinstance(v, float)}, eval_results["global_step"])
            writer.close()
        print(eval_summary(eval_results), flush=True)
    return TrainResult(final_step, int(ops.convert_to_numpy(optimizer.iterations)), eval_results)


class StepLog(keras.callbacks.Callback):
    """Logs each --log-every window and checkpoints at each --checkpoint-every step. Keras's epochs here are the
    stretches between two such steps (or shorter ones, where a run starts or ends between them), so an epoch's
    metric means add up to the window's."""

    def __init__(self, config: TrainConfig, training_input: TrainingInput, start: int, meta: dict):
        super().__init__()
        self.config, self.input, self.meta = config, training_input, meta
        self.step, self.epoch_steps = start, 0
        self.log_path = join(config.output, "train_log.jsonl")
        self.log_text = truncate_log(self.log_path, start)
        self.writer = scalar_writer(join(config.output, "tensorboard", "train"))
        self.schedule = make_schedule(config)
        self._new_window()

    def _new_window(self) -> None:
        self.window_sums: dict[str, float] = {}
        self.window_steps, self.window_start = 0, time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.step += self.epoch_steps
        self.window_steps += self.epoch_steps
        for name in ("loss", "mlm_loss", "nsp_loss"):
            if name in logs:
                self.window_sums[name] = self.window_sums.get(name, 0.0) + float(logs[name]) * self.epoch_steps
        c = self.config
        last = self.step == c.steps
        if self.step % c.log_every == 0 or last:
            self._log()
        if self.step % c.checkpoint_every == 0 or last:
            saving = time.perf_counter()
            save_checkpoint(self.model, c.output, self.step,
                            {**self.meta, "data": self.input.state(self.step)}, c.keep_checkpoints)
            self.window_start += time.perf_counter() - saving  # seq/s counts training time only

    def _log(self) -> None:
        means = {name: total / self.window_steps for name, total in self.window_sums.items()}
        if not np.isfinite(means["loss"]):
            raise TrainerError(f"the loss became {means['loss']} at step {self.step}; lower --learning-rate or use more --warmup-steps")
        lr = float(ops.convert_to_numpy(self.schedule(self.step - 1)))  # the rate of the last step taken
        record = {"step": self.step, **means, "lr": lr,
                  "seq_per_s": self.window_steps * self.config.batch_size / (time.perf_counter() - self.window_start)}
        self.log_text += json.dumps(record) + "\n"
        if is_remote(self.log_path):
            write_text(self.log_path, self.log_text)  # object stores cannot append
        else:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            self.writer.write({k: v for k, v in record.items() if k != "step"}, self.step)
        nsp = f", nsp {means['nsp_loss']:.4f}" if "nsp_loss" in means else ""
        print(f"step {self.step}/{self.config.steps} loss {means['loss']:.4f} (mlm {means['mlm_loss']:.4f}{nsp}) "
              f"lr {lr:.3g} {record['seq_per_s']:.1f} seq/s", flush=True)
        self._new_window()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def fit_segments(start: int, steps: int, window: int) -> list[tuple[int, int]]:
    """(epochs, steps per epoch) of each fit call from `start` to `steps`: whole windows where the steps allow,
    shorter stretches where a run starts or ends between two window ends."""
    segments, step = [], start
    while step < steps:
        if step % window or steps - step < window:
            length = min(window - step % window, steps - step)
            segments.append((1, length))
        else:
            length = (steps - step) // window * window
            segments.append((length // window, window))
        step += length
    return segments


def run_steps(config: TrainConfig, model: keras.Model, training_input: TrainingInput, start: int, meta: dict) -> None:
    """Train from step `start` to config.steps with Keras's fit."""
    window = math.gcd(config.log_every, config.checkpoint_every)
    if math.gcd(math.gcd(window, config.steps), start) % config.steps_per_execution:
        resumed = f" and the step {start} this run resumes from" if start % config.steps_per_execution else ""
        raise TrainerError(f"--steps-per-execution {config.steps_per_execution} must divide --log-every, "
                           f"--checkpoint-every and --steps{resumed}")
    log = StepLog(config, training_input, start, meta)
    step = start
    try:
        for epochs, length in fit_segments(start, config.steps, window):
            log.epoch_steps = length
            model.fit(training_input.for_fit(step), epochs=epochs, steps_per_epoch=length, verbose=0, callbacks=[log],
                      shuffle=False)
            step += epochs * length
    except Exception as err:
        message = input_error(err, training_input.source.train_files, config.data)
        if message is None:
            raise
        raise message from None
    finally:
        log.close()


def evaluate(model: PretrainingModel, source: DataSource, config: TrainConfig, devices: Devices) -> dict[str, float]:
    """The reference's eval metrics (masked-LM accuracy and loss weighted by masked_lm_weights; NSP means),
    each accuracy with the baseline that predicting without looking at the input reaches on the same data."""
    batch_size = config.eval_batch_size or config.batch_size
    if source.eval_output is not None:
        data = EvalBatches(new_loader(**loader_args(source, source.eval_output, config, devices, "eval", batch_size)),
                           config.eval_steps)
        where = source.eval_output.path
    else:
        data = eval_dataset(source.eval_files, batch_size, source.seq_length, source.predictions)
        if config.eval_steps:
            data = data.take(config.eval_steps)
        if next(iter(data.take(1)), None) is None:
            raise TrainerError(f"--eval-data {config.eval_data!r} holds fewer records than one batch of {batch_size}")
        where = config.eval_data
    try:
        model.evaluate(data, verbose=0)
    except Exception as err:
        message = input_error(err, source.eval_files, where)
        if message is None:
            raise
        raise message from None
    results = model.eval_sums.eval_results(model.config.pair_head)
    results["eval_steps"] = results["eval_sequences"] // batch_size
    results["pair_objective"] = source.pair_objective
    return results


def eval_summary(results: dict) -> str:
    """One line: each metric, and each accuracy next to its baseline."""
    def metric(name: str) -> str:
        baseline = f" (baseline {results[EVAL_BASELINES[name]]:.4f})" if name in EVAL_BASELINES else ""
        return f"{name} {results[name]:.4f}{baseline}"

    names = MLM_METRICS + (NSP_METRICS if "next_sentence_accuracy" in results else ())
    pair = "" if "next_sentence_accuracy" in results else " (no pair objective: no next-sentence metrics)"
    return "eval: " + ", ".join(metric(name) for name in names) + pair


# ----------------------------------------------------------------------------- command line


def run_train(args: argparse.Namespace) -> int:
    """Train as the flags say; returns the exit code (2 with a one-line message when the user must act)."""
    try:
        train(config_from_args(args))
    except TrainerError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume from the last checkpoint", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertcorpus.trainer.train", description="Pretrain BERT (masked LM + next sentence) on bertcorpus records.")
    add_train_arguments(parser)
    return run_train(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
