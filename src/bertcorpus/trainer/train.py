"""Pretrain BERT on the output of `bertcorpus create`, with Keras on TensorFlow, JAX or PyTorch.

Phase 1 trains at 128 tokens, phase 2 continues from phase 1's weights at 512 tokens:

    bertcorpus train --data out --seq-length 128 --config base --batch-size 256 --steps 900000 --output runs/phase1
    bertcorpus train --data out --seq-length 512 --config base --batch-size 256 --steps 100000 \\
        --init-checkpoint runs/phase1 --output runs/phase2

One loop serves every backend: Keras's own fit, with the loss and the logged losses in the model's compute_loss,
XLA (TensorFlow, JAX) and --steps-per-execution steps per compiled call. Devices: a TPU (TensorFlow's TPUStrategy,
or JAX over all its cores), several GPUs (TensorFlow's MirroredStrategy, JAX data parallel), or one device.
A Keras "epoch" of fit is the stretch between two log or checkpoint steps (a log window), so both happen at exact
step numbers.
Running the same command again resumes from the last checkpoint in --output at the exact step, with the optimizer
state, the dropout random state and the loader's place in the data.

Outputs in --output: config.json, checkpoints/ckpt-STEP/ (Keras's weights file, which holds the optimizer's
variables too, the dropout layers' random state and checkpoint.json), train_log.jsonl (one line per log step),
eval_results.json (the reference trainer's eval metrics and their baselines) and, on TensorFlow, tensorboard/.

The loop reads top to bottom in train(); its parts live beside it: optimization.py (the optimizer and its schedule),
training_input.py (where batches come from), train_log.py (the log lines, scalars and checkpoints of each window),
evaluation.py (the eval metrics), checkpoints.py, devices.py and model.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import sys
from dataclasses import dataclass

from bertcorpus.trainer.config import TrainerError, choose_backend, requested_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if (
    __name__ == "__main__"
):  # `python -m bertcorpus.trainer.train`: Keras takes its backend from the environment, at import
    try:
        os.environ["KERAS_BACKEND"] = choose_backend(requested_backend(sys.argv[1:]), os.environ.get("KERAS_BACKEND"))
    except TrainerError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)

import keras
import numpy as np
from keras import ops

from bertcorpus.trainer.checkpoints import (
    checkpoint_steps,
    load_init_checkpoint,
    read_checkpoint_meta,
    refuse_old_checkpoints,
    restore_checkpoint,
)
from bertcorpus.trainer.config import PRESETS, BertConfig, TrainConfig, add_train_arguments, config_from_args
from bertcorpus.trainer.devices import Devices, choose_devices
from bertcorpus.trainer.evaluation import PretrainingEvalSums, eval_data, eval_summary, evaluate
from bertcorpus.trainer.model import BertPretrainer, dummy_batch, parameter_count, pretraining_loss
from bertcorpus.trainer.optimization import make_optimizer, with_schedule_defaults
from bertcorpus.trainer.storage import join, write_text
from bertcorpus.trainer.train_log import StepLog, scalar_writer
from bertcorpus.trainer.training_input import TrainingInput, check_train_data, input_error, resolve_input

KERAS_POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


@dataclass
class TrainResult:
    step: int
    optimizer_iterations: int
    eval_results: dict[str, float] | None


def train(config: TrainConfig) -> TrainResult:
    check_config(config)
    backend = keras.backend.backend()
    if config.backend and config.backend != backend:
        raise TrainerError(
            f"Keras was loaded with the {backend} backend in this process; run `bertcorpus train "
            f"--backend {config.backend}` in a new one"
        )
    if backend == "torch" and config.steps_per_execution != 1:
        raise TrainerError("--steps-per-execution must be 1 on the torch backend")
    config = with_schedule_defaults(config)
    source = resolve_input(config)
    config = dataclasses.replace(
        config,
        backend=backend,
        max_seq_length=source.seq_length,
        max_predictions_per_seq=source.predictions,
        vocab_size=source.vocab_size,
    )
    devices = choose_devices(config, backend)
    for flag, size in (
        ("--batch-size", config.batch_size),
        ("--eval-batch-size", config.eval_batch_size or config.batch_size),
    ):
        if size % devices.replicas:
            raise TrainerError(f"{flag} {size} is not a multiple of the {devices.replicas} replicas")

    # Data that cannot give a batch (bins smaller than one, an eval split too small) is named before the model is built.
    check_train_data(source, config, devices)
    if source.has_eval:
        eval_data(source, config, devices)
    seed_everything(config.seed)
    bert_config = BertConfig.preset(
        config.model, vocab_size=source.vocab_size, pair_head=source.pair_objective != "none"
    )
    model, optimizer = build_model(bert_config, config, devices, source.seq_length, source.predictions)

    refuse_old_checkpoints(config.output)
    checkpoints = checkpoint_steps(config.output)
    start, data_state = 0, None
    if checkpoints:
        start, folder = list(checkpoints.items())[-1]
        meta = read_checkpoint_meta(folder)
        if meta["backend"] != backend:
            raise TrainerError(
                f"{folder} was written by the {meta['backend']} backend; resume it with --backend "
                f"{meta['backend']} (or start a new --output with --init-checkpoint {config.output}: "
                f"its weights load on any backend)"
            )
        if meta["model"] != bert_config.to_dict():
            raise TrainerError(
                f"{config.output} holds a run of a different model (saved: {meta['model']}); use another --output"
            )
        restore_checkpoint(model, folder)
        data_state = meta.get("data")
        ignored = " (--init-checkpoint is ignored when resuming)" if config.init_checkpoint else ""
        print(f"resuming from {folder} at step {start}{ignored}", flush=True)
    elif config.init_checkpoint:
        load_init_checkpoint(model, config.init_checkpoint, bert_config)

    write_text(
        join(config.output, "config.json"),
        json.dumps(
            {
                "train": dataclasses.asdict(config),
                "model": bert_config.to_dict(),
                "pair_objective": source.pair_objective,
                "backend": backend,
                "precision": devices.precision,
                "strategy": devices.strategy,
            },
            indent=2,
        ),
    )
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


def check_config(config: TrainConfig) -> None:
    if not config.output:
        raise TrainerError("--output is required")
    if os.path.exists(config.output) and not os.path.isdir(config.output):  # a remote path never exists here
        raise TrainerError(f"--output {config.output} is a file, not a folder: name a new folder or a run's folder")
    if config.model not in PRESETS:
        raise TrainerError(f"unknown --config {config.model!r}; choose from {', '.join(PRESETS)}")
    if config.optimizer not in ("adamw", "lamb"):
        raise TrainerError(f"unknown --optimizer {config.optimizer!r}; choose adamw or lamb")
    for name in (
        "vocab_size",
        "batch_size",
        "steps",
        "max_seq_length",
        "max_predictions_per_seq",
        "steps_per_execution",
        "log_every",
        "checkpoint_every",
        "keep_checkpoints",
    ):
        value = getattr(config, name)
        if value is not None and value < 1:
            raise TrainerError(f"--{name.replace('_', '-')} must be at least 1")
    if (config.max_seq_length or 0) > BertConfig.max_position:
        raise TrainerError(
            f"--max-seq-length {config.max_seq_length} exceeds the {BertConfig.max_position} position embeddings"
        )
    if (config.max_predictions_per_seq or 0) > (config.max_seq_length or BertConfig.max_position):
        raise TrainerError("--max-predictions-per-seq cannot exceed --max-seq-length")
    if config.learning_rate is not None and config.learning_rate < 0:
        raise TrainerError("--learning-rate cannot be negative")
    if config.warmup_steps is not None and config.warmup_steps < 0:
        raise TrainerError("--warmup-steps cannot be negative")
    if not 0 <= config.warmup_fraction <= 1:
        raise TrainerError("--warmup-fraction must be between 0 and 1")


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


def _replicas_in_sync() -> int:
    """Replicas that each compute a loss on their share of the batch (tf.distribute only: JAX shards one program)."""
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync


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
        model.compile(
            optimizer=optimizer, steps_per_execution=config.steps_per_execution, jit_compile=devices.jit_compile
        )
    return model, optimizer


def run_steps(config: TrainConfig, model: keras.Model, training_input: TrainingInput, start: int, meta: dict) -> None:
    """Train from step `start` to config.steps with Keras's fit."""
    window = math.gcd(config.log_every, config.checkpoint_every)
    if math.gcd(math.gcd(window, config.steps), start) % config.steps_per_execution:
        resumed = f" and the step {start} this run resumes from" if start % config.steps_per_execution else ""
        raise TrainerError(
            f"--steps-per-execution {config.steps_per_execution} must divide --log-every, "
            f"--checkpoint-every and --steps{resumed}"
        )
    log = StepLog(config, training_input, start, meta)
    step = start
    try:
        for epochs, length in fit_segments(start, config.steps, window):
            log.epoch_steps = length
            model.fit(
                training_input.for_fit(step),
                epochs=epochs,
                steps_per_epoch=length,
                verbose=0,
                callbacks=[log],
                shuffle=False,
            )
            step += epochs * length
    except Exception as err:
        message = input_error(err, training_input.source.train_files, config.data)
        if message is None:
            raise
        raise message from None
    finally:
        log.close()


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
    parser = argparse.ArgumentParser(
        prog="python -m bertcorpus.trainer.train",
        description="Pretrain BERT (masked LM + next sentence) on bertcorpus records.",
    )
    add_train_arguments(parser)
    return run_train(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
