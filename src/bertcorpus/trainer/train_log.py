"""What a training run logs: a line (and a train_log.jsonl record) per --log-every window, a progress line at least
every 30 s between them, TensorBoard scalars on the TensorFlow backend, and the checkpoints at each
--checkpoint-every step, from a Keras callback."""

from __future__ import annotations

import json
import threading
import time

import keras
import numpy as np
from keras import ops

from bertcorpus.trainer.checkpoints import save_checkpoint
from bertcorpus.trainer.config import TrainConfig, TrainerError
from bertcorpus.trainer.optimization import make_schedule
from bertcorpus.trainer.storage import exists, is_remote, join, read_text, write_text
from bertcorpus.trainer.training_input import TrainingInput
from bertcorpus.transforms.progress_interval import line_interval


def truncate_log(path: str, last_step: int) -> str:
    """Drop log lines past the checkpoint we resume from, so every step appears once; returns what is kept."""
    if not exists(path):
        return ""
    lines = [
        line
        for line in read_text(path).splitlines(keepends=True)
        if line.strip() and json.loads(line)["step"] <= last_step
    ]
    kept = "".join(lines)
    write_text(path, kept)
    return kept


class ScalarWriter:
    """TensorBoard scalars, on the TensorFlow backend (its summary op writes them without the tensorboard package)."""

    def __init__(self, directory: str):
        import tensorflow as tf

        self.tf = tf
        self.writer = tf.summary.create_file_writer(directory)
        self.metadata = tf.compat.v1.SummaryMetadata(
            plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars")
        )

    def write(self, values: dict[str, float], step: int) -> None:
        with self.writer.as_default():
            for name, value in values.items():
                self.tf.summary.write(name, self.tf.constant(value, self.tf.float32), step=step, metadata=self.metadata)

    def close(self) -> None:
        self.writer.close()


def scalar_writer(directory: str) -> ScalarWriter | None:
    return ScalarWriter(directory) if keras.backend.backend() == "tensorflow" else None


class StepLog(keras.callbacks.Callback):
    """Logs each --log-every window and checkpoints at each --checkpoint-every step. Keras's epochs here are the
    stretches between two such steps (or shorter ones, where a run starts or ends between them), so an epoch's
    metric means add up to the window's. Between those lines, one at least every line_interval() seconds shows a
    slow run moving."""

    # Keras may call on_train_batch_end on threads of its own, so as not to wait for each step's loss: the progress
    # line reads only its arguments and what stays fixed within an epoch, under a lock.
    async_safe = True

    def __init__(self, config: TrainConfig, training_input: TrainingInput, start: int, meta: dict):
        super().__init__()
        self.config, self.input, self.meta = config, training_input, meta
        self.step, self.epoch_steps = start, 0
        self.log_path = join(config.output, "train_log.jsonl")
        self.log_text = truncate_log(self.log_path, start)
        self.writer = scalar_writer(join(config.output, "tensorboard", "train"))
        self.schedule = make_schedule(config)
        self.progress_every, self._progress_lock = line_interval(), threading.Lock()
        self._new_window()

    def _new_window(self) -> None:
        self.window_sums: dict[str, float] = {}
        self.window_steps, self.window_start = 0, time.perf_counter()
        self._last_line, self._last_step = self.window_start, self.step

    def on_train_batch_end(self, batch, logs=None):
        """A progress line when line_interval() seconds passed since the last line: the step, the loss so far in
        this stretch (Keras's running mean since its epoch began), and the speed since the last log line."""
        now, step = time.perf_counter(), self.step + batch + 1
        with self._progress_lock:
            if now - self._last_line < self.progress_every or step <= self._last_step or "loss" not in (logs or {}):
                return
            self._last_line, self._last_step = now, step
        seq_per_s = (self.window_steps + batch + 1) * self.config.batch_size / (now - self.window_start)
        print(
            f"step {step}/{self.config.steps} loss {float(logs['loss']):.4f} (mean since step {self.step}) "
            f"{seq_per_s:.1f} seq/s",
            flush=True,
        )

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
            save_checkpoint(
                self.model, c.output, self.step, {**self.meta, "data": self.input.state(self.step)}, c.keep_checkpoints
            )
            self.window_start += time.perf_counter() - saving  # seq/s counts training time only

    def _log(self) -> None:
        means = {name: total / self.window_steps for name, total in self.window_sums.items()}
        if not np.isfinite(means["loss"]):
            raise TrainerError(
                f"the loss became {means['loss']} at step {self.step}; lower --learning-rate or use more --warmup-steps"
            )
        lr = float(ops.convert_to_numpy(self.schedule(self.step - 1)))  # the rate of the last step taken
        record = {
            "step": self.step,
            **means,
            "lr": lr,
            "seq_per_s": self.window_steps * self.config.batch_size / (time.perf_counter() - self.window_start),
        }
        self.log_text += json.dumps(record) + "\n"
        if is_remote(self.log_path):
            write_text(self.log_path, self.log_text)  # object stores cannot append
        else:
            with open(self.log_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            self.writer.write({k: v for k, v in record.items() if k != "step"}, self.step)
        nsp = f", nsp {means['nsp_loss']:.4f}" if "nsp_loss" in means else ""
        print(
            f"step {self.step}/{self.config.steps} loss {means['loss']:.4f} (mlm {means['mlm_loss']:.4f}{nsp}) "
            f"lr {lr:.3g} {record['seq_per_s']:.1f} seq/s",
            flush=True,
        )
        self._new_window()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
