"""Statistics of pretraining records in one bounded-memory pass: a batch decoder and fixed-size accumulators.

Decoding an Example field by field in Python takes calls per field, too slow for millions of records: batches are
decoded at once by transforms/example_decoding.py, the decoder the loader uses.

The accumulators hold counts whose size depends on the sequence length, the number of predictions and the vocab,
never on the number of records: exact integer histograms and per-id token counts. Two accumulators merge by
addition, so the train and eval splits are summed into an overall view without a second pass. They take batches of
any width up to the sequence length, so batches padded only to their length bin's edge count as well.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.example_decoding import FeatureWidthError, joined_records, parse_examples
from bertcorpus.transforms.tfrecord import feature_spec


class RecordFormatError(ValueError):
    """A record that is not a pretraining Example of the expected shape."""


def decode_batch(records: list[bytes], length: int, predictions: int) -> dict[str, np.ndarray]:
    """Serialized pretraining Examples → {feature: (records × width) array}, as tf.io.parse_example would give
    (transforms/example_decoding.py decodes the whole batch at once)."""
    try:
        return parse_examples(*joined_records(records), feature_spec(length, predictions))
    except FeatureWidthError as e:
        raise RecordFormatError(
            f"a feature holds {e.found} values per record; are these records of sequence "
            f"length {length} with {predictions} predictions?"
        ) from None
    except ValueError as e:
        raise RecordFormatError(str(e)) from None


@dataclass(frozen=True)
class TokenIds:
    """What the statistics need of the vocab ([CLS] is found by position instead)."""

    vocab_size: int
    mask: int
    unk: int
    sep: int


# What label 1 means, as the manifest's form names it; "unused" (no pair objective) has no label share.
LABELS = ("random_next", "swapped", "unused")

_SUMMED = (
    "instances",
    "label_ones",
    "real_tokens",
    "segment_a",
    "segment_b",
    "masked",
    "shown_mask",
    "shown_original",
    "shown_random",
    "unk_tokens",
    "original_counts",
)


class RecordStats:
    """Counts over records of one (sequence length, predictions) configuration."""

    def __init__(self, length: int, predictions: int, ids: TokenIds, label: str = "random_next"):
        if label not in LABELS:
            raise ValueError(f"unknown label {label!r}; one of {', '.join(LABELS)}")
        self.length, self.predictions, self.ids, self.label = length, predictions, ids, label
        self.instances = 0
        self.label_ones = 0
        self.real_tokens = np.zeros(length + 1, np.int64)  # histogram: index = real tokens of an instance
        self.segment_a = np.zeros(length + 1, np.int64)  # tokens of A, without [CLS] and its [SEP]
        self.segment_b = np.zeros(length + 1, np.int64)  # tokens of B, without its [SEP]
        self.masked = np.zeros(predictions + 1, np.int64)  # histogram: masked positions per instance
        self.shown_mask = self.shown_original = self.shown_random = 0
        self.unk_tokens = 0
        self.original_counts = np.zeros(ids.vocab_size, np.int64)  # text tokens before masking, by id

    def add(self, batch: dict[str, np.ndarray]) -> None:
        ids, mask, segments = batch["input_ids"], batch["input_mask"] != 0, batch["segment_ids"]
        weights = batch["masked_lm_weights"] > 0
        positions, labels = batch["masked_lm_positions"], batch["masked_lm_ids"]
        n = len(ids)
        if n == 0:
            return
        vocab = self.ids.vocab_size
        if ids.min() < 0 or ids.max() >= vocab or labels.min() < 0 or labels.max() >= vocab:
            raise RecordFormatError(f"token ids outside the vocab of {vocab} entries; is this the right vocab?")
        self.instances += n
        self.label_ones += int((batch["next_sentence_labels"][:, 0] == 1).sum())
        lengths = mask.sum(1)
        a_with_specials = (mask & (segments == 0)).sum(1)
        self.real_tokens += np.bincount(lengths, minlength=self.length + 1)
        self.segment_a += np.bincount(np.maximum(a_with_specials - 2, 0), minlength=self.length + 1)
        self.segment_b += np.bincount(np.maximum(lengths - a_with_specials - 1, 0), minlength=self.length + 1)
        self.masked += np.bincount(weights.sum(1), minlength=self.predictions + 1)
        rows = np.broadcast_to(np.arange(n)[:, None], positions.shape)[weights]
        at, label = positions[weights], labels[weights]
        if len(at) and (at.min() < 0 or at.max() >= self.length):
            raise RecordFormatError("masked_lm_positions outside the sequence")
        shown = ids[rows, at]
        is_mask = shown == self.ids.mask
        self.shown_mask += int(is_mask.sum())
        self.shown_original += int((~is_mask & (shown == label)).sum())
        self.shown_random += int((~is_mask & (shown != label)).sum())
        # The text as it was before masking: [MASK] and random replacements hide the original tokens. Text never
        # tokenises to [SEP], so every [SEP] is structural: after A, after B, and between packed documents.
        original = ids.copy()
        original[rows, at] = label
        text = mask & (original != self.ids.sep)
        text[:, 0] = False  # [CLS]
        text_ids = original[text]
        self.unk_tokens += int((text_ids == self.ids.unk).sum())
        self.original_counts += np.bincount(text_ids, minlength=vocab)

    def merge(self, other: RecordStats) -> RecordStats:
        total = RecordStats(self.length, self.predictions, self.ids, self.label)
        for name in _SUMMED:
            setattr(total, name, getattr(self, name) + getattr(other, name))
        return total

    def summary(self) -> dict:
        """Plain numbers for stats.json: integer totals first, ratios computed from them."""
        n = self.instances
        shown = self.shown_mask + self.shown_original + self.shown_random
        text_tokens = int(self.original_counts.sum())
        real = int((self.real_tokens * np.arange(self.length + 1)).sum())
        masked = int((self.masked * np.arange(self.predictions + 1)).sum())
        nsp = self.label == "random_next"
        return {
            "instances": n,
            "label": self.label,
            "label_ones": self.label_ones,
            "label_share": self.label_ones / n if n and self.label != "unused" else None,
            "random_next": self.label_ones if nsp else None,
            "random_next_share": self.label_ones / n if n and nsp else None,
            "real_tokens": real,
            "mean_real_tokens": real / n if n else None,
            "real_tokens_percentiles": percentiles(self.real_tokens),
            "full_length_share": int(self.real_tokens[-1]) / n if n else None,
            "padded_share": 1 - real / (n * self.length) if n else None,
            "real_tokens_hist": self.real_tokens.tolist(),
            "segment_a_tokens_hist": self.segment_a.tolist(),
            "segment_b_tokens_hist": self.segment_b.tolist(),
            "mean_segment_a_tokens": _mean(self.segment_a),
            "mean_segment_b_tokens": _mean(self.segment_b),
            "masked_positions": masked,
            "mean_masked_positions": masked / n if n else None,
            "masked_token_share": masked / real if real else None,
            "masked_positions_hist": self.masked.tolist(),
            "masked_shown_as_mask": self.shown_mask,
            "masked_shown_as_original": self.shown_original,
            "masked_shown_as_random": self.shown_random,
            "mask_share": self.shown_mask / shown if shown else None,
            "keep_share": self.shown_original / shown if shown else None,
            "random_share": self.shown_random / shown if shown else None,
            "text_tokens": text_tokens,
            "unk_tokens": self.unk_tokens,
            "unk_token_rate": self.unk_tokens / text_tokens if text_tokens else None,
            # The ids the text uses, before masking: random replacements put ids into input_ids that the text
            # may never use, and structural tokens ([CLS], [SEP]) are no text.
            "vocab_ids_seen": int(np.count_nonzero(self.original_counts)),
            "vocab_coverage": float(np.count_nonzero(self.original_counts) / self.ids.vocab_size),
        }


def bin_padding(real_tokens_hist, bin_size: int, length: int) -> dict:
    """What batches of one length bin each would pad, from a histogram of real tokens per instance (index = tokens).

    An instance of n tokens belongs to bin (n - 1) // bin_size, padded to min((bin + 1) * bin_size, length), as
    create counts bins and the loader batches them; batches padded to `length` without bins are the comparison."""
    hist = np.asarray(real_tokens_hist, np.int64)
    tokens = np.arange(len(hist))
    bins = []
    for first in range(1, length + 1, bin_size):
        width = min(first - 1 + bin_size, length)
        instances = int(hist[first : width + 1].sum())
        real = int((hist[first : width + 1] * tokens[first : width + 1]).sum())
        bins.append(
            {
                "width": width,
                "instances": instances,
                "real_tokens": real,
                "padded_share": 1 - real / (instances * width) if instances else None,
            }
        )
    instances, real = int(hist.sum()), int((hist * tokens).sum())
    slots = sum(b["instances"] * b["width"] for b in bins)
    return {
        "bin_size": bin_size,
        "bins": bins,
        "padded_share": 1 - real / slots if slots else None,
        "padded_share_without_bins": 1 - real / (instances * length) if instances else None,
    }


def _mean(hist: np.ndarray) -> float | None:
    total = int(hist.sum())
    return int((hist * np.arange(len(hist))).sum()) / total if total else None


def percentiles(hist: np.ndarray, qs=(1, 10, 50, 90, 99)) -> dict[str, int] | None:
    """Exact percentiles (lower value) of integer values given as a histogram indexed by value."""
    total = int(hist.sum())
    if not total:
        return None
    cumulative = np.cumsum(hist)
    return {f"p{q}": int(np.searchsorted(cumulative, max(1, int(np.ceil(q / 100 * total))))) for q in qs}
