"""A bucket's pretraining instances for one sequence config: every dupe pass, labels balanced across the passes,
assembled, masked (or left for masking at load time), each with the random key that places it in a shard.

    bucket (+ pool of negatives) ─ per dupe pass: pairs (nsp, sop) or packed sentences (none)
                                 ─ assemble [CLS] A [SEP] B [SEP] ─ mask (static) ─ random sort keys
                                 ─ every pass's instances, their keys and their counts

Each pass draws from generators seeded by (seed, bucket key, seq config, pass), so a bucket's instances depend
on nothing else. The key of an instance picks its shard (key % shards) and its place there (records in key
order), which shuffles the output globally.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instances import (
    Bucket,
    InstanceBatch,
    SeqConfig,
    create_instances_from_document,
    create_sop_instances_from_document,
)
from bertcorpus.transforms.masking import Assembled, SpecialIds, assemble, mask_tokens
from bertcorpus.transforms.packing import assemble_packed, pack_sentences
from bertcorpus.transforms.seeding import numpy_rng, python_rng

PAIR_OBJECTIVES = ("nsp", "sop", "none")


@dataclass(frozen=True)
class InstanceRecipe:
    """How a bucket's instances are made: the create flags that shape them."""

    seq: SeqConfig
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    masked_lm_prob: float = 0.15
    whole_word_mask: bool = False
    pair_objective: str = "nsp"
    mask_now: bool = True  # static masking; False leaves the instances unmasked, to be masked at load time
    bin_size: int | None = None


@dataclass
class BucketInstances:
    instances: InstanceColumns | None  # every pass's instances, in pass order; None if there are none
    sort_keys: np.ndarray  # (N,) int64 in [0, 2**63)
    counts: dict[str, int] = field(default_factory=dict)  # instances, labels, real tokens, predictions, bins
    skipped: dict[str, int] = field(default_factory=dict)  # pair draws that could not be honoured, by reason


def bucket_instances(
    bucket: Bucket, documents: int, pool: range | None, recipe: InstanceRecipe, special: SpecialIds, seed: int, key: str
) -> BucketInstances:
    """The instances of the first `documents` documents of `bucket`; random next segments (nsp) come from the
    documents in `pool`, the rest of the bucket (see create_instances_from_document)."""
    seq = recipe.seq
    passes: list[InstanceColumns] = []
    sort_keys: list[np.ndarray] = []
    counts = {"instances": 0, "positive_labels": 0, "real_tokens": 0, "predictions": 0}
    skipped: dict[str, int] = {}
    negatives: list[np.ndarray] = []  # where each random next segment starts (nsp): how many distinct ones
    owed = 0  # the label balance, carried from pass to pass: a pass's end drops no label it owes
    for dupe in range(recipe.dupe_factor):
        rng = python_rng(seed, "instances", key, seq.name, dupe)
        nrng = numpy_rng(seed, "masking", key, seq.name, dupe)
        if recipe.pair_objective == "none":
            packed = pack_sentences(bucket, documents, seq.max_seq_length, rng, seq.min_document_tokens)
            if not len(packed):
                continue
            rows = assemble_packed(bucket.tokens, packed, seq.max_seq_length, special, bucket.word_continues)
            labels = np.zeros(len(packed), np.int64)
        else:
            batch = _pairs(
                bucket, documents, pool, recipe, rng, owed, last_pass=dupe == recipe.dupe_factor - 1, made=counts
            )
            owed = batch.balance
            for reason, n in batch.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + n
            if not len(batch):
                continue
            columns = batch.columns()
            if recipe.pair_objective == "nsp":
                negatives.append(columns[2][columns[4] == 1])
            rows = assemble(bucket.tokens, columns, seq.max_seq_length, special, nrng, bucket.word_continues)
            labels = batch.labels()
        passes.append(_masked(rows, labels, recipe, special, nrng))
        sort_keys.append(nrng.integers(0, 2**63, len(labels), dtype=np.int64))
        counts["instances"] += len(labels)
        counts["positive_labels"] += int(labels.sum())
        counts["real_tokens"] += int(rows.length.sum())
        counts["predictions"] += int(passes[-1].predictions.sum())
        if recipe.bin_size:
            for edge, n in bin_counts(rows.length, recipe.bin_size, seq.max_seq_length).items():
                counts[f"bin:{edge}"] = counts.get(f"bin:{edge}", 0) + n
    if seq.min_document_tokens:
        lengths = np.diff(bucket.sentence_starts[bucket.doc_first_sentence[: documents + 1]])
        counts["short_documents"] = int((lengths < seq.min_document_tokens).sum())
    if negatives:
        counts["random_next_segments"] = len(np.unique(np.concatenate(negatives)))
    if not passes:
        return BucketInstances(None, np.zeros(0, np.int64), counts, skipped)
    return BucketInstances(InstanceColumns.concatenate(passes), np.concatenate(sort_keys), counts, skipped)


def _pairs(
    bucket: Bucket,
    documents: int,
    pool: range | None,
    recipe: InstanceRecipe,
    rng,
    owed: int,
    last_pass: bool,
    made: dict[str, int],
) -> InstanceBatch:
    """One pass's A/B pairs over the bucket's documents, labels balanced with what the earlier passes `made`."""
    batch = InstanceBatch(balance=owed)
    max_num_tokens = recipe.seq.max_seq_length - 3
    for doc in range(documents):
        if recipe.pair_objective == "sop":
            create_sop_instances_from_document(bucket, doc, max_num_tokens, recipe.short_seq_prob, rng, batch)
        else:
            batch.may_owe = not (last_pass and doc == documents - 1)
            create_instances_from_document(bucket, doc, max_num_tokens, recipe.short_seq_prob, rng, batch, pool)
    if last_pass:  # what the labels still owe would lean a bucket of few instances
        positives = made["positive_labels"]
        batch.drop_surplus(positives, made["instances"] - positives)
    return batch


def _masked(
    rows: Assembled, labels: np.ndarray, recipe: InstanceRecipe, special: SpecialIds, rng: np.random.Generator
) -> InstanceColumns:
    if not recipe.mask_now:
        none = np.zeros((len(labels), 0), np.int32)
        return InstanceColumns(
            rows.input_ids,
            rows.length,
            rows.len_a,
            none,
            none,
            np.zeros(len(labels), np.int64),
            labels,
            rows.word_continues,  # kept for whole-word masking at load time
        )
    masked = mask_tokens(
        rows, recipe.masked_lm_prob, recipe.seq.max_predictions_per_seq, special, rng, whole_word=recipe.whole_word_mask
    )
    return InstanceColumns(
        masked.input_ids, rows.length, rows.len_a, masked.positions, masked.label_ids, masked.count, labels
    )


def bin_counts(lengths: np.ndarray, bin_size: int, max_seq_length: int) -> dict[int, int]:
    """Instances per length bin, keyed by the bin's upper edge: bin b holds lengths in (b·size, (b+1)·size]."""
    edges = bin_edges(lengths, bin_size, max_seq_length)
    values, n = np.unique(edges, return_counts=True)
    return dict(zip(values.tolist(), n.tolist()))


def manifest_bins(counts: dict[int, int]) -> list[dict]:
    """Instances per bin as a manifest lists them: [{"width": upper edge, "instances": n}, ...] by width (a JSON
    object's keys would be strings, and a manifest written with sorted keys would put "128" before "32")."""
    return [{"width": int(width), "instances": int(n)} for width, n in sorted(counts.items())]


def bins_of_manifest(listed) -> dict[int, int] | None:
    """{width: instances} from a manifest's bins: the list above, or the {"edge": n} object of earlier versions."""
    if listed is None:
        return None
    if isinstance(listed, dict):
        return {int(width): int(n) for width, n in listed.items()}
    return {int(b["width"]): int(b["instances"]) for b in listed}


def bin_edges(lengths: np.ndarray, bin_size: int, max_seq_length: int) -> np.ndarray:
    """The upper edge of each length's bin: the width its instance is padded to when batched by bins."""
    return np.minimum((np.asarray(lengths) - 1) // bin_size * bin_size + bin_size, max_seq_length)


def shard_rows(sort_keys: np.ndarray, num_shards: int) -> Iterator[tuple[int, np.ndarray]]:
    """(shard, rows of the instances that go there, in row order) for every shard that draws any."""
    shard_of = sort_keys % num_shards
    order = np.argsort(shard_of, kind="stable")
    bounds = np.searchsorted(shard_of[order], np.arange(num_shards + 1))
    for shard in range(num_shards):
        lo, hi = bounds[shard], bounds[shard + 1]
        if hi > lo:
            yield shard, order[lo:hi]
