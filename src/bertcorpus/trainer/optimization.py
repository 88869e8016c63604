"""The optimizer and its learning-rate schedule: BERT's AdamW (or LAMB) with linear warm-up and linear decay to 0,
no weight decay on LayerNorm parameters and biases."""

from __future__ import annotations

import dataclasses

import keras
from keras import ops

from bertcorpus.trainer.config import PRESET_LEARNING_RATES, TrainConfig


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
