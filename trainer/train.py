"""Pretrain BERT on the records written by `bertcorpus create`.

Phase 1 trains at 128 tokens, phase 2 continues from phase 1's weights at 512 tokens:

    python -m trainer.train --data 'out/seq128/train-*' --eval-data 'out/seq128/eval-*' \\
        --config base --batch-size 256 --steps 900000 --output runs/phase1
    python -m trainer.train --data 'out/seq512/train-*' --eval-data 'out/seq512/eval-*' \\
        --max-seq-length 512 --max-predictions-per-seq 80 --config base --batch-size 256 \\
        --steps 100000 --init-checkpoint runs/phase1 --output runs/phase2

The loop is explicit and uses the TensorFlow backend: each call of a tf.function runs up to
--steps-per-execution training steps under a tf.distribute strategy (TPU, several GPUs, one device).
Running the same command again resumes from the last checkpoint in --output, at the exact step.

Outputs in --output: config.json, checkpoints/, train_log.jsonl (one line per log step),
tensorboard/ and eval_results.json (the reference trainer's eval metrics).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("KERAS_BACKEND", "tensorflow")  # the loop below is TensorFlow code
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

from trainer.data import (  # noqa: E402
    DEFAULT_SHUFFLE_BUFFER,
    TrainerError,
    check_records,
    corrupt_file_error,
    eval_dataset,
    find_corrupt_file,
    list_files,
    train_dataset,
)
from trainer.model import PRESETS, BertConfig, BertPretrainer, dummy_batch, parameter_count, prediction_losses, pretraining_loss  # noqa: E402

STRATEGIES = ("auto", "tpu", "mirrored", "one_device", "default")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
KERAS_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
EVAL_METRICS = ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss")
# What a model that learned nothing from the inputs scores on the same eval data: always the most frequent
# masked token, always the more frequent next-sentence label.
EVAL_BASELINES = {"masked_lm_accuracy": "masked_lm_baseline_accuracy", "next_sentence_accuracy": "next_sentence_baseline_accuracy"}

# Peak learning rates when --learning-rate is not given: smaller models take larger rates. base and large use
# the reference's 1e-4; the others are spaced between it and 1e-3, the rate at which the tiny shape learns
# fastest here (docs/trainer.md).
PRESET_LEARNING_RATES: dict[str, float] = {
    "tiny": 1e-3,
    "mini": 5e-4,
    "small": 3e-4,
    "medium": 2e-4,
    "base": 1e-4,
    "large": 1e-4,
}
DEFAULT_WARMUP_FRACTION = 0.01  # the reference warms up over 10,000 of its 1,000,000 steps


@dataclass
class TrainConfig:
    data: str
    output: str
    eval_data: str | None = None
    model: str = "base"  # a BertConfig preset (the --config flag)
    vocab_size: int = BertConfig.vocab_size  # the vocab the records were made with
    batch_size: int = 32  # global: split over the replicas
    eval_batch_size: int | None = None  # default: batch_size
    steps: int = 100_000  # total, including the steps of earlier runs that this one resumes
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    learning_rate: float | None = None  # default: PRESET_LEARNING_RATES[model]
    warmup_steps: int | None = None  # default: warmup_fraction × steps; capped at steps
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION
    optimizer: str = "adamw"  # adamw | lamb
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float = 1.0  # global gradient norm; 0 turns clipping off
    mixed_precision: str = "auto"
    jit_compile: bool = True
    steps_per_execution: int = 1
    strategy: str = "auto"
    tpu: str | None = None  # TPU name or address for TPUClusterResolver
    init_checkpoint: str | None = None
    seed: int = 12345
    log_every: int = 100
    eval_steps: int | None = None  # default: one full pass over the eval files
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER


@dataclass
class TrainResult:
    step: int
    optimizer_iterations: int
    eval_results: dict[str, float] | None


# ----------------------------------------------------------------------------- devices


def choose_strategy_name(requested: str, tpu_available: bool, num_gpus: int) -> str:
    """The tf.distribute strategy to build: auto picks TPU, then several GPUs, then one GPU, then the default."""
    if requested not in STRATEGIES:
        raise TrainerError(f"unknown --strategy {requested!r}; choose from {', '.join(STRATEGIES)}")
    if requested == "auto":
        if tpu_available:
            return "tpu"
        if num_gpus > 1:
            return "mirrored"
        return "one_device" if num_gpus == 1 else "default"
    if requested == "tpu" and not tpu_available:
        raise TrainerError("--strategy tpu but no TPU was found (pass --tpu NAME or set TPU_NAME)")
    return requested


def choose_precision(requested: str, on_tpu: bool, gpu_compute_capabilities: list[tuple[int, int]]) -> str:
    """auto: bf16 on TPUs and on GPUs of compute capability 8.0 (Ampere) or newer, else fp32."""
    if requested not in PRECISIONS:
        raise TrainerError(f"unknown --mixed-precision {requested!r}; choose from {', '.join(PRECISIONS)}")
    if requested == "fp16" and on_tpu:
        raise TrainerError("--mixed-precision fp16 is not supported on TPU; use bf16")
    if requested != "auto":
        return requested
    if on_tpu or (gpu_compute_capabilities and min(gpu_compute_capabilities) >= (8, 0)):
        return "bf16"
    return "fp32"


def tpu_available(tpu: str | None) -> bool:
    # A TPU VM exposes /dev/accel*; a TPU node is named by --tpu or TPU_NAME. Asking TPUClusterResolver
    # instead would query the GCE metadata server, which hangs on machines outside Google Cloud.
    return bool(tpu or os.environ.get("TPU_NAME") or glob.glob("/dev/accel*"))


def make_strategy(name: str, tpu: str | None) -> tf.distribute.Strategy:
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or os.environ.get("TPU_NAME") or "local")
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except (ValueError, tf.errors.OpError) as err:
            raise TrainerError(f"cannot start the TPU: {str(err).splitlines()[0]}") from None
        return tf.distribute.TPUStrategy(resolver)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if tf.config.list_physical_devices("GPU") else "/cpu:0")
    return tf.distribute.get_strategy()


def gpu_compute_capabilities() -> list[tuple[int, int]]:
    gpus = tf.config.list_physical_devices("GPU")
    return [tuple(tf.config.experimental.get_device_details(g).get("compute_capability", (0, 0))) for g in gpus]


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


# ----------------------------------------------------------------------------- steps


def make_train_function(model: keras.Model, optimizer: keras.optimizers.Optimizer, strategy: tf.distribute.Strategy, jit_compile: bool):
    """A tf.function that runs `num_steps` training steps and returns the summed [loss, mlm_loss, nsp_loss]."""
    variables = model.trainable_variables
    replicas = strategy.num_replicas_in_sync
    scale_loss = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def gradients(batch):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
            loss, mlm_loss, nsp_loss = pretraining_loss(outputs, batch)
            # The optimizer sums gradients over replicas; dividing here makes that sum the gradient of the mean.
            scaled = loss / replicas
            if scale_loss:
                scaled = optimizer.scale_loss(scaled)
        # The embedding lookups give sparse gradients; summing them here, inside the compiled step, spares
        # the optimizer a conversion outside it (the tied token embeddings also get a dense gradient).
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in tape.gradient(scaled, variables)]
        return grads, tf.stack([loss, mlm_loss, nsp_loss])

    # XLA fuses the forward and backward passes. The update stays outside the compiled function because
    # it sums gradients across devices, which XLA cannot do here; a TPU compiles the whole step anyway.
    if jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy):
        gradients = tf.function(gradients, jit_compile=True)

    def replica_step(batch):
        grads, losses = gradients(batch)
        optimizer.apply_gradients(zip(grads, variables))
        return losses

    @tf.function
    def train_steps(iterator, num_steps):
        sums = tf.zeros([3])
        for _ in tf.range(num_steps):
            per_replica = strategy.run(replica_step, args=(next(iterator),))
            sums += strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)
        return sums

    return train_steps


def make_eval_function(model: keras.Model, strategy: tf.distribute.Strategy, jit_compile: bool):
    """A tf.function returning, for one batch, the sums that the eval metrics are ratios of, and the weight
    of each token id among the masked-LM targets (for the most-frequent-token baseline)."""
    vocab_size = model.config.vocab_size

    def sums_of(batch):
        outputs = model(batch, training=False)
        mlm_nll, nsp_nll = prediction_losses(outputs, batch)
        weights = batch["masked_lm_weights"]
        mlm_hit = tf.cast(tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32) == batch["masked_lm_ids"], tf.float32)
        nsp_labels = tf.reshape(batch["next_sentence_labels"], [-1])
        nsp_hit = tf.cast(tf.argmax(outputs["nsp_logits"], -1, output_type=tf.int32) == nsp_labels, tf.float32)
        sums = tf.stack([
            tf.reduce_sum(weights * mlm_nll),
            tf.reduce_sum(weights * mlm_hit),
            tf.reduce_sum(weights),
            tf.reduce_sum(nsp_nll),
            tf.reduce_sum(nsp_hit),
            tf.cast(tf.size(nsp_labels), tf.float32),
            tf.reduce_sum(tf.cast(nsp_labels, tf.float32)),
        ])
        target_weights = tf.math.unsorted_segment_sum(tf.reshape(weights, [-1]), tf.reshape(batch["masked_lm_ids"], [-1]), vocab_size)
        return sums, target_weights

    if jit_compile and not isinstance(strategy, tf.distribute.TPUStrategy):
        sums_of = tf.function(sums_of, jit_compile=True)

    def step(batch):  # a plain function, as in training: strategy.run on a compiled one mixes up the replicas' devices
        return sums_of(batch)

    @tf.function
    def eval_step(batch):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=(batch,)), axis=None)

    return eval_step


def evaluate(model: keras.Model, strategy: tf.distribute.Strategy, files: list[str], config: TrainConfig) -> dict[str, float]:
    """The reference's eval metrics (masked-LM accuracy and loss weighted by masked_lm_weights; NSP means),
    each accuracy with the baseline that predicting without looking at the input reaches on the same data."""
    batch_size = config.eval_batch_size or config.batch_size
    data = strategy.experimental_distribute_dataset(eval_dataset(files, batch_size, config.max_seq_length, config.max_predictions_per_seq))
    eval_step = make_eval_function(model, strategy, config.jit_compile)
    sums, target_weights, steps = np.zeros(7), np.zeros(model.config.vocab_size), 0
    try:
        for batch in itertools.islice(data, config.eval_steps):
            batch_sums, batch_target_weights = eval_step(batch)
            sums += batch_sums.numpy()
            target_weights += batch_target_weights.numpy()
            steps += 1
    except tf.errors.DataLossError as err:
        raise corrupt_file_error(find_corrupt_file(files) or config.eval_data, err) from None
    if steps == 0:
        raise TrainerError(f"--eval-data {config.eval_data!r} holds fewer records than one batch of {batch_size}")
    mlm_loss, mlm_hits, weight, nsp_loss, nsp_hits, sequences, random_next = sums
    return {
        "masked_lm_accuracy": float(mlm_hits / weight),
        "masked_lm_baseline_accuracy": float(target_weights.max() / weight),
        "masked_lm_loss": float(mlm_loss / weight),
        "next_sentence_accuracy": float(nsp_hits / sequences),
        "next_sentence_baseline_accuracy": float(max(random_next, sequences - random_next) / sequences),
        "next_sentence_loss": float(nsp_loss / sequences),
        "eval_steps": steps,
        "eval_sequences": int(sequences),
    }


def eval_summary(results: dict[str, float]) -> str:
    """One line: each metric, and each accuracy next to its baseline."""
    def metric(name: str) -> str:
        baseline = f" (baseline {results[EVAL_BASELINES[name]]:.4f})" if name in EVAL_BASELINES else ""
        return f"{name} {results[name]:.4f}{baseline}"

    return "eval: " + ", ".join(metric(name) for name in EVAL_METRICS)


# ----------------------------------------------------------------------------- checkpoints


def find_checkpoint(path: str) -> str:
    """The latest checkpoint in a training output dir, in a checkpoints/ dir, or a checkpoint prefix itself."""
    for directory in (os.path.join(path, "checkpoints"), path):
        if tf.io.gfile.isdir(directory) and (latest := tf.train.latest_checkpoint(directory)):
            return latest
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise TrainerError(f"no checkpoint found in --init-checkpoint {path}")


def saved_model_config(output: str) -> dict | None:
    path = os.path.join(output, "config.json")
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f)["model"]


def load_init_checkpoint(model: keras.Model, path: str, bert_config: BertConfig) -> None:
    """Phase 2: start from the weights of another run; the optimizer and the step start afresh."""
    prefix = find_checkpoint(path)
    source = saved_model_config(path) if tf.io.gfile.isdir(path) else None
    if source is not None and source != bert_config.to_dict():
        raise TrainerError(f"--init-checkpoint {path} holds a different model than --config (saved: {source})")
    try:
        tf.train.Checkpoint(model=model).restore(prefix).expect_partial().assert_existing_objects_matched()
    except (AssertionError, ValueError, tf.errors.OpError) as err:
        raise TrainerError(f"--init-checkpoint {prefix} does not fit this model: {str(err).splitlines()[0]}") from None
    print(f"initialised the model from {prefix}", flush=True)


# Scalar summaries written with TensorFlow's core summary op: tf.summary.scalar would need the tensorboard
# package, which is needed only to view the logs, not to write them.
SCALAR_METADATA = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))


def write_scalars(writer, values: dict[str, float], step: int) -> None:
    with writer.as_default():
        for name, value in values.items():
            tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=SCALAR_METADATA)


def truncate_log(path: str, last_step: int) -> None:
    """Drop log lines past the checkpoint we resume from, so every step appears once."""
    if not tf.io.gfile.exists(path):
        return
    with tf.io.gfile.GFile(path) as f:
        lines = [line for line in f if line.strip() and json.loads(line)["step"] <= last_step]
    with tf.io.gfile.GFile(path, "w") as f:
        f.write("".join(lines))


# ----------------------------------------------------------------------------- the run


def check_config(config: TrainConfig) -> None:
    if not config.output:
        raise TrainerError("--output is required")
    if config.model not in PRESETS:
        raise TrainerError(f"unknown --config {config.model!r}; choose from {', '.join(PRESETS)}")
    if config.optimizer not in ("adamw", "lamb"):
        raise TrainerError(f"unknown --optimizer {config.optimizer!r}; choose adamw or lamb")
    for name in ("vocab_size", "batch_size", "steps", "max_seq_length", "max_predictions_per_seq", "steps_per_execution", "log_every", "checkpoint_every"):
        if getattr(config, name) < 1:
            raise TrainerError(f"--{name.replace('_', '-')} must be at least 1")
    if config.max_seq_length > BertConfig.max_position:
        raise TrainerError(f"--max-seq-length {config.max_seq_length} exceeds the {BertConfig.max_position} position embeddings")
    if config.max_predictions_per_seq > config.max_seq_length:
        raise TrainerError("--max-predictions-per-seq cannot exceed --max-seq-length")
    if config.learning_rate is not None and config.learning_rate < 0:
        raise TrainerError("--learning-rate cannot be negative")
    if config.warmup_steps is not None and config.warmup_steps < 0:
        raise TrainerError("--warmup-steps cannot be negative")
    if not 0 <= config.warmup_fraction <= 1:
        raise TrainerError("--warmup-fraction must be between 0 and 1")


def train(config: TrainConfig) -> TrainResult:
    check_config(config)
    config = with_schedule_defaults(config)
    train_files = list_files(config.data)
    check_records(train_files, config.max_seq_length, config.max_predictions_per_seq, config.vocab_size)
    eval_files = list_files(config.eval_data) if config.eval_data else []
    if eval_files:
        check_records(eval_files, config.max_seq_length, config.max_predictions_per_seq, config.vocab_size)
    if keras.backend.backend() != "tensorflow":
        raise TrainerError(f"the trainer runs on the TensorFlow backend; unset KERAS_BACKEND (now {keras.backend.backend()})")

    on_tpu = tpu_available(config.tpu)
    capabilities = [] if on_tpu else gpu_compute_capabilities()
    strategy_name = choose_strategy_name(config.strategy, on_tpu, len(capabilities))
    precision = choose_precision(config.mixed_precision, strategy_name == "tpu", capabilities)
    strategy = make_strategy(strategy_name, config.tpu)
    if config.batch_size % strategy.num_replicas_in_sync:
        raise TrainerError(f"--batch-size {config.batch_size} is not a multiple of the {strategy.num_replicas_in_sync} replicas")

    keras.utils.set_random_seed(config.seed)
    keras.mixed_precision.set_global_policy(KERAS_POLICIES[precision])
    bert_config = BertConfig.preset(config.model, vocab_size=config.vocab_size)
    with strategy.scope():
        model = BertPretrainer(bert_config)
        model(dummy_batch(1, config.max_seq_length, config.max_predictions_per_seq))  # create the weights
        optimizer = make_optimizer(config, model, precision)
    step_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")  # host-side; TPUs lack int64
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_counter)
    manager = tf.train.CheckpointManager(checkpoint, os.path.join(config.output, "checkpoints"), max_to_keep=config.keep_checkpoints)

    if manager.latest_checkpoint:
        saved = saved_model_config(config.output)
        if saved is not None and saved != bert_config.to_dict():
            raise TrainerError(f"{config.output} holds a run of a different model (saved: {saved}); use another --output")
        try:
            checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        except (AssertionError, ValueError, tf.errors.OpError) as err:
            raise TrainerError(f"cannot resume from {manager.latest_checkpoint}: {str(err).splitlines()[0]}") from None
        ignored = " (--init-checkpoint is ignored when resuming)" if config.init_checkpoint else ""
        print(f"resuming from {manager.latest_checkpoint} at step {int(step_counter.numpy())}{ignored}", flush=True)
    elif config.init_checkpoint:
        load_init_checkpoint(model, config.init_checkpoint, bert_config)

    tf.io.gfile.makedirs(config.output)
    with tf.io.gfile.GFile(os.path.join(config.output, "config.json"), "w") as f:
        json.dump({"train": dataclasses.asdict(config), "model": bert_config.to_dict(), "precision": precision, "strategy": strategy_name}, f, indent=2)
    params = parameter_count(bert_config)["total"]
    print(
        f"model {config.model}: {params / 1e6:.1f}M parameters; strategy {strategy_name} with "
        f"{strategy.num_replicas_in_sync} replica(s); precision {precision}; XLA {'on' if config.jit_compile else 'off'}",
        flush=True,
    )

    start = int(step_counter.numpy())
    if start < config.steps:
        run_steps(config, model, optimizer, strategy, train_files, manager, step_counter, start)
    else:
        print(f"already at step {start} of --steps {config.steps}; nothing to train", flush=True)

    eval_results = None
    if eval_files:
        eval_results = {"global_step": int(step_counter.numpy()), **evaluate(model, strategy, eval_files, config)}
        with tf.io.gfile.GFile(os.path.join(config.output, "eval_results.json"), "w") as f:
            json.dump(eval_results, f, indent=2)
        eval_writer = tf.summary.create_file_writer(os.path.join(config.output, "tensorboard", "eval"))
        write_scalars(eval_writer, {k: eval_results[k] for k in (*EVAL_METRICS, *EVAL_BASELINES.values())}, eval_results["global_step"])
        eval_writer.close()
        print(eval_summary(eval_results), flush=True)
    return TrainResult(int(step_counter.numpy()), int(optimizer.iterations.numpy()), eval_results)


def run_steps(
    config: TrainConfig,
    model: keras.Model,
    optimizer: keras.optimizers.Optimizer,
    strategy: tf.distribute.Strategy,
    files: list[str],
    manager: tf.train.CheckpointManager,
    step_counter: tf.Variable,
    start: int,
) -> None:
    """Train from step `start` to config.steps, logging every log_every and checkpointing every checkpoint_every steps."""

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        # Each host reads its own share of the files. A resumed run gets a new shuffle seed, so it does
        # not repeat the batches that the first run started with.
        share = files[context.input_pipeline_id :: context.num_input_pipelines] if len(files) >= context.num_input_pipelines else files
        batch_size = context.get_per_replica_batch_size(config.batch_size)
        return train_dataset(share, batch_size, config.max_seq_length, config.max_predictions_per_seq, config.seed + start, config.shuffle_buffer)

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    train_steps = make_train_function(model, optimizer, strategy, config.jit_compile)
    log_path = os.path.join(config.output, "train_log.jsonl")
    truncate_log(log_path, start)
    writer = tf.summary.create_file_writer(os.path.join(config.output, "tensorboard", "train"))
    schedule = make_schedule(config)

    step, window_sums, window_steps, window_start = start, tf.zeros([3]), 0, time.perf_counter()
    try:
        while step < config.steps:
            # Stop each execution at the next log or checkpoint step, so both happen at exact step numbers.
            num_steps = min(
                config.steps_per_execution,
                config.steps - step,
                config.log_every - step % config.log_every,
                config.checkpoint_every - step % config.checkpoint_every,
            )
            window_sums += train_steps(iterator, tf.constant(num_steps))
            step += num_steps
            window_steps += num_steps
            step_counter.assign(step)

            if step % config.log_every == 0 or step == config.steps:
                loss, mlm_loss, nsp_loss = (window_sums / window_steps).numpy().tolist()  # waits for the device
                if not np.isfinite(loss):
                    raise TrainerError(f"the loss became {loss} at step {step}; lower --learning-rate or use more --warmup-steps")
                elapsed = time.perf_counter() - window_start
                lr = float(schedule(step - 1))  # the rate of the last step taken
                record = {
                    "step": step,
                    "loss": loss,
                    "mlm_loss": mlm_loss,
                    "nsp_loss": nsp_loss,
                    "lr": lr,
                    "seq_per_s": window_steps * config.batch_size / elapsed,
                }
                with tf.io.gfile.GFile(log_path, "a") as f:
                    f.write(json.dumps(record) + "\n")
                write_scalars(writer, {k: v for k, v in record.items() if k != "step"}, step)
                print(
                    f"step {step}/{config.steps} loss {loss:.4f} (mlm {mlm_loss:.4f}, nsp {nsp_loss:.4f}) "
                    f"lr {lr:.3g} {record['seq_per_s']:.1f} seq/s",
                    flush=True,
                )
                window_sums, window_steps, window_start = tf.zeros([3]), 0, time.perf_counter()

            if step % config.checkpoint_every == 0 or step == config.steps:
                manager.save(checkpoint_number=step)
    except tf.errors.DataLossError as err:
        raise corrupt_file_error(find_corrupt_file(files) or config.data, err) from None
    except tf.errors.InvalidArgumentError as err:
        if "serialized Example" not in str(err):
            raise
        raise TrainerError(f"a record in --data {config.data!r} does not match the feature spec: {str(err).splitlines()[0][:200]}") from None
    finally:
        writer.close()


# ----------------------------------------------------------------------------- command line


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `bertcorpus train` and `python -m trainer.train`; dests are TrainConfig field names."""
    d = TrainConfig(data="", output="")
    parser.add_argument("--data", required=True, help="training records: comma-separated globs, e.g. 'out/seq128/train-*'")
    parser.add_argument("--eval-data", help="eval records (globs); evaluated once at the end of training")
    parser.add_argument("--output", required=True, help="run directory: checkpoints, logs, eval results; rerun to resume")
    parser.add_argument("--config", dest="model", default=d.model, choices=list(PRESETS), help="model size (default: %(default)s)")
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size,
                        help="tokens in the vocab the records were made with; a smaller vocab makes a smaller, faster model (default: %(default)s)")
    parser.add_argument("--init-checkpoint", help="start from the weights of this run directory or checkpoint (phase 2)")
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="global batch size (default: %(default)s)")
    parser.add_argument("--eval-batch-size", type=int, help="default: --batch-size")
    parser.add_argument("--steps", type=int, default=d.steps, help="total training steps (default: %(default)s)")
    parser.add_argument("--max-seq-length", type=int, default=d.max_seq_length, help="L of the records (default: %(default)s)")
    parser.add_argument("--max-predictions-per-seq", type=int, default=d.max_predictions_per_seq, help="P of the records (default: %(default)s)")
    rates = ", ".join(f"{name} {rate:g}" for name, rate in PRESET_LEARNING_RATES.items())
    parser.add_argument("--learning-rate", type=float, help=f"peak learning rate (default by --config: {rates})")
    parser.add_argument("--warmup-steps", type=int, help="linear warm-up steps, capped at --steps (default: --warmup-fraction of --steps)")
    parser.add_argument("--warmup-fraction", type=float, default=d.warmup_fraction,
                        help="warm-up as a share of --steps, when --warmup-steps is not given (default: %(default)s)")
    parser.add_argument("--optimizer", default=d.optimizer, choices=["adamw", "lamb"], help="default: %(default)s")
    parser.add_argument("--weight-decay", type=float, default=d.weight_decay, help="not applied to LayerNorm and biases (default: %(default)s)")
    parser.add_argument("--beta1", type=float, default=d.beta1, help="default: %(default)s")
    parser.add_argument("--beta2", type=float, default=d.beta2, help="default: %(default)s")
    parser.add_argument("--epsilon", type=float, default=d.epsilon, help="default: %(default)s")
    parser.add_argument("--clip-norm", type=float, default=d.clip_norm, help="global gradient-norm clip, 0 = off (default: %(default)s)")
    parser.add_argument("--mixed-precision", default=d.mixed_precision, choices=list(PRECISIONS),
                        help="auto = bf16 on TPU and Ampere-or-newer GPUs, fp32 otherwise (default: %(default)s)")
    parser.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=d.jit_compile, help="compile the step with XLA (default: on)")
    parser.add_argument("--steps-per-execution", type=int, default=d.steps_per_execution, help="steps per tf.function call (default: %(default)s)")
    parser.add_argument("--strategy", default=d.strategy, choices=list(STRATEGIES), help="tf.distribute strategy (default: %(default)s)")
    parser.add_argument("--tpu", help="TPU name or grpc:// address (default: $TPU_NAME, or the local TPU VM)")
    parser.add_argument("--seed", type=int, default=d.seed, help="default: %(default)s")
    parser.add_argument("--log-every", type=int, default=d.log_every, help="steps between log lines (default: %(default)s)")
    parser.add_argument("--eval-steps", type=int, help="eval batches (default: one full pass over --eval-data)")
    parser.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every, help="default: %(default)s")
    parser.add_argument("--keep-checkpoints", type=int, default=d.keep_checkpoints, help="default: %(default)s")
    parser.add_argument("--shuffle-buffer", type=int, default=d.shuffle_buffer, help="records (default: %(default)s)")


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig) if hasattr(args, f.name)})


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
    parser = argparse.ArgumentParser(prog="python -m trainer.train", description="Pretrain BERT (masked LM + next sentence) on bertcorpus records.")
    add_train_arguments(parser)
    return run_train(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
