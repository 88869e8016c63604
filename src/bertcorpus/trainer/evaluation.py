"""Evaluation: the reference trainer's eval metrics (masked-LM accuracy and loss weighted by masked_lm_weights, NSP
means), summed over every batch and replica inside the model, each accuracy with the baseline that predicting
without looking at the input reaches on the same data."""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from bertcorpus.trainer.config import TrainConfig, TrainerError
from bertcorpus.trainer.data import EvalBatches, eval_dataset, new_loader, tf_batches
from bertcorpus.trainer.devices import Devices
from bertcorpus.trainer.model import prediction_losses
from bertcorpus.trainer.training_input import DataSource, input_error, loader_args

MLM_METRICS = ("masked_lm_accuracy", "masked_lm_loss")

NSP_METRICS = ("next_sentence_accuracy", "next_sentence_loss")

# What a model that learned nothing from the inputs scores on the same eval data: always the most frequent
# masked token, always the more frequent next-sentence label.
EVAL_BASELINES = {
    "masked_lm_accuracy": "masked_lm_baseline_accuracy",
    "next_sentence_accuracy": "next_sentence_baseline_accuracy",
}


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
        sums = ops.stack(
            [
                ops.sum(weights * mlm_nll),
                ops.sum(weights * mlm_hit),
                ops.sum(weights),
                nsp_loss,
                nsp_hits,
                sequences,
                random_next,
            ]
        )
        self.sums.assign_add(sums)
        self.target_weights.assign_add(
            ops.segment_sum(ops.reshape(weights, (-1,)), ops.reshape(targets, (-1,)), num_segments=self.vocab_size)
        )

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
            results.update(
                {
                    "next_sentence_accuracy": sums["nsp_hits"] / sequences,
                    "next_sentence_baseline_accuracy": max(random_next, sequences - random_next) / sequences,
                    "next_sentence_loss": sums["nsp_loss"] / sequences,
                }
            )
        return {**results, "eval_sequences": int(sequences)}


def eval_data(source: DataSource, config: TrainConfig, devices: Devices):
    """The eval batches (a PyDataset or a tf.data.Dataset), checked to hold at least one batch: train() makes them
    before its first step too, so that a run never trains to its end to find that it cannot evaluate."""
    batch_size = config.eval_batch_size or config.batch_size
    if source.eval_output is not None:
        try:
            loader = new_loader(**loader_args(source, source.eval_output, config, devices, "eval", batch_size))
        except TrainerError as err:
            raise TrainerError(f"cannot evaluate: {err} (--eval-data none trains without evaluation)") from None
        data = EvalBatches(loader, config.eval_steps)
        if source.eval_output.bin_size and config.backend == "tensorflow":
            data = tf_batches(data.__getitem__, data[0], data.steps)
        return data
    data = eval_dataset(source.eval_files, batch_size, source.seq_length, source.predictions)
    if config.eval_steps:
        data = data.take(config.eval_steps)
    if next(iter(data.take(1)), None) is None:
        raise TrainerError(f"--eval-data {config.eval_data!r} holds fewer records than one batch of {batch_size}")
    return data


def evaluate(model: keras.Model, source: DataSource, config: TrainConfig, devices: Devices) -> dict[str, float]:
    """The reference's eval metrics (masked-LM accuracy and loss weighted by masked_lm_weights; NSP means),
    each accuracy with the baseline that predicting without looking at the input reaches on the same data."""
    batch_size = config.eval_batch_size or config.batch_size
    data = eval_data(source, config, devices)
    where = source.eval_output.path if source.eval_output is not None else config.eval_data
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
