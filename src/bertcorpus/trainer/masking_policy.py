"""How the loader masks the dynamic form: the rate (constant, or a schedule over epochs), the replacement split and
the prediction cap, checked once, each bad value one LoaderError line.

    MaskingPolicy.build(dataset, masked_lm_prob=0.3)                       # 30%, 80/10/10, cap scaled from the manifest
    MaskingPolicy.build(dataset, masked_lm_prob=0.2, mask_replace_prob=1.0, random_replace_prob=0.0)   # all [MASK]
    MaskingPolicy.build(dataset, masked_lm_prob="0:0.3,2:0.15,4:0.05")     # 30% → 15% → 5% by epoch

A schedule names the epoch from which each rate holds; an epoch may be fractional (1.5 = half-way through epoch 1,
counted in batches), so a schedule can change the rate within an epoch. The rate of a batch is a function of
(epoch, batch), and each instance's mask of (seed, epoch, instance) at that rate: the same run gives the same masks.

The cap on predictions (max_predictions_per_seq) scales with the rate: without one given, the manifest's cap times
the highest rate of the schedule over the manifest's rate, rounded up (20 at 15% → 40 at 30%), so that the cap
binds no more often than it did for the rate the output was made with, and the batches keep one shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bertcorpus.trainer.record_files import Dataset, LoaderError

DEFAULT_MASK_REPLACE = 0.8  # Hugging Face's mask_replace_prob: [MASK]
DEFAULT_RANDOM_REPLACE = 0.1  # its random_replace_prob: a random token; the rest is kept


def _share(name: str, value, low_open: bool, high_open: bool) -> float:
    """value as a float in the interval (0, 1), [0, 1], ... that the flags name; one line otherwise."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise LoaderError(f"{name} must be a number, not {value!r}") from None
    low, high = ("(" if low_open else "[") + "0", "1" + (")" if high_open else "]")
    if math.isnan(x) or x < 0 or x > 1 or (low_open and x == 0) or (high_open and x == 1):
        raise LoaderError(f"{name} must be in {low}, {high}, not {value}")
    return x


def parse_schedule(value) -> tuple[tuple[float, float], ...]:
    """A rate, or "EPOCH:RATE,..." (or pairs) from epoch 0 on, epochs ascending → ((epoch, rate), ...)."""
    if isinstance(value, str) and ":" in value:
        pairs = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            epoch, sep, rate = part.partition(":")
            if not sep:
                raise LoaderError(f"masked_lm_prob schedule {value!r}: {part!r} is not EPOCH:RATE")
            pairs.append((epoch, rate))
    elif isinstance(value, list | tuple):
        pairs = list(value)
    else:
        return ((0.0, _share("masked_lm_prob", value, True, True)),)
    schedule = []
    for pair in pairs:
        try:
            epoch, rate = pair
            epoch = float(epoch)
        except (TypeError, ValueError):
            raise LoaderError(
                f"masked_lm_prob schedule {value!r}: want EPOCH:RATE pairs such as 0:0.3,2:0.15"
            ) from None
        schedule.append((epoch, _share("masked_lm_prob", rate, True, True)))
    epochs = [e for e, _ in schedule]
    if not schedule or epochs[0] != 0 or any(b <= a for a, b in zip(epochs, epochs[1:])) or math.isnan(sum(epochs)):
        raise LoaderError(f"masked_lm_prob schedule {value!r}: its epochs must start at 0 and increase")
    return tuple(schedule)


def scaled_cap(cap: int, seq_length: int, stored_rate: float, schedule: tuple[tuple[float, float], ...]) -> int:
    """The manifest's cap for its rate, scaled to the highest rate of the schedule, rounded up, at most L."""
    top = max(rate for _, rate in schedule)
    return min(seq_length, math.ceil(round(cap * top / stored_rate, 6)))  # round(): 20 × 0.3 / 0.15 is 39.99...


@dataclass(frozen=True)
class MaskingPolicy:
    schedule: tuple[tuple[float, float], ...]  # (from epoch, rate), the first from epoch 0
    max_predictions: int
    mask_replace_prob: float
    random_replace_prob: float
    whole_word: bool

    @classmethod
    def build(
        cls,
        dataset: Dataset,
        masked_lm_prob=None,
        max_predictions_per_seq=None,
        whole_word_mask=None,
        mask_replace_prob=None,
        random_replace_prob=None,
    ) -> MaskingPolicy:
        stored = dataset.masked_lm_prob
        schedule = parse_schedule(stored if masked_lm_prob is None else masked_lm_prob)
        if max_predictions_per_seq is None:
            cap = scaled_cap(dataset.max_predictions, dataset.seq_length, stored, schedule)
        else:
            if isinstance(max_predictions_per_seq, bool) or not float(max_predictions_per_seq).is_integer():
                raise LoaderError(f"max_predictions_per_seq must be a whole number, not {max_predictions_per_seq!r}")
            cap = int(max_predictions_per_seq)
            if cap < 1:
                raise LoaderError(f"max_predictions_per_seq must be at least 1, not {cap}")
        mask = _share(
            "mask_replace_prob", DEFAULT_MASK_REPLACE if mask_replace_prob is None else mask_replace_prob, 0, 0
        )
        random = _share(
            "random_replace_prob", DEFAULT_RANDOM_REPLACE if random_replace_prob is None else random_replace_prob, 0, 0
        )
        if mask + random > 1 + 1e-9:
            raise LoaderError(
                f"mask_replace_prob {mask} + random_replace_prob {random} is more than 1 (the rest of the "
                f"predictions keep their token)"
            )
        policy = cls(
            schedule, cap, mask, random, dataset.whole_word_mask if whole_word_mask is None else bool(whole_word_mask)
        )
        if dataset.masking == "static":
            policy.check_static(dataset)
        return policy

    def check_static(self, dataset: Dataset) -> None:
        """Static records hold their masks: any other setting than the ones they were drawn with is an error."""
        fixed = {
            "masked_lm_prob": (self.describe_rate(), dataset.masked_lm_prob),
            "max_predictions_per_seq": (self.max_predictions, dataset.max_predictions),
            "whole_word_mask": (self.whole_word, dataset.whole_word_mask),
            "mask_replace_prob": (self.mask_replace_prob, DEFAULT_MASK_REPLACE),
            "random_replace_prob": (self.random_replace_prob, DEFAULT_RANDOM_REPLACE),
        }
        for name, (asked, stored) in fixed.items():
            if asked != stored:
                raise LoaderError(
                    f"{name} {asked} differs from the {stored} the static records were masked "
                    f"with; masks are fixed in TFRecords (create with --masking dynamic)"
                )

    def rate(self, epoch: int, batch: int = 0, batches: int = 1) -> float:
        """The rate of batch `batch` of the `batches` of epoch `epoch`."""
        at = epoch + batch / max(batches, 1)
        return next(rate for start, rate in reversed(self.schedule) if at >= start)

    def describe_rate(self):
        """The rate as a number where it is constant, else [[epoch, rate], ...] (JSON-safe, for state_dict)."""
        if len(self.schedule) == 1:
            return self.schedule[0][1]
        return [[e, r] for e, r in self.schedule]
