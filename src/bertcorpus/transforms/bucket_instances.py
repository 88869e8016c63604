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

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instances import (
    Bucket,
    InstanceBatch,
    RandomNexts,
    SeqConfig,
    create_instances_from_document,
    create_sop_instances_from_document,
    random_next_sources,
)
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.masking import Assembled, SpecialIds, assemble, mask_tokens
from bertcorpus.transforms.packing import PackedPieces, assemble_packed, pack_sentences
from bertcorpus.transforms.provenance import Provenance, packed_provenance, pair_provenance
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
    # The special tokens of the tokenizer's templates (SequenceLayout): before A, between A and B, after B; and
    # before and after each piece of a row of one segment. BERT's [CLS] A [SEP] B [SEP] and [CLS] X [SEP] [SEP]...
    pair_frame: tuple[int, int, int] = (1, 1, 1)
    single_frame: tuple[int, int] = (1, 1)
    # create --provenance: a piece of text per segment ("segments"), or per sentence where the tokenizer does not
    # encode a text as its units one after another ("sentences"); None: no provenance
    provenance: str | None = None


@dataclass
class BucketInstances:
    instances: InstanceColumns | None  # every pass's instances, in pass order; None if there are none
    sort_keys: np.ndarray  # (N,) int64 in [0, 2**63)
    counts: dict[str, int] = field(default_factory=dict)  # instances, labels, real tokens, predictions, bins
    skipped: dict[str, int] = field(default_factory=dict)  # pair draws that could not be honoured, by reason
    # Each instance's language, as a number into language_tags: that of the document its first segment comes from.
    languages: np.ndarray | None = None
    language_tags: list[str] = field(default_factory=list)
    provenance: Provenance | None = None  # where each instance's tokens came from (create --provenance)


@dataclass
class _Pass:
    """One dupe pass's draws, before assembling: pairs (an InstanceBatch) or packed pieces, and their labels."""

    dupe: int
    draws: InstanceBatch | PackedPieces
    labels: np.ndarray
    first_tokens: np.ndarray  # where each instance's first segment starts in the bucket's tokens


def _passes(
    bucket: Bucket, documents: int, pool: range | None, recipe: InstanceRecipe, seed: int, key: str, skipped: dict
):
    """Every non-empty dupe pass's draws over the first `documents` documents, labels balanced from pass to pass;
    the reasons of draws that could not be honoured are added to `skipped`. The draws depend only on these
    arguments, so that counting them (count_by_language) and building them give the same instances."""
    seq = recipe.seq
    drawn = {"instances": 0, "positive_labels": 0}
    owed = 0  # the label balance, carried from pass to pass: a pass's end drops no label it owes
    nexts = random_next_sources(bucket, documents, pool) if recipe.pair_objective == "nsp" else []
    for dupe in range(recipe.dupe_factor):
        rng = python_rng(seed, "instances", key, seq.name, dupe)
        if recipe.pair_objective == "none":
            packed = pack_sentences(
                bucket, documents, seq.max_seq_length, rng, seq.min_document_tokens, recipe.single_frame
            )
            if not len(packed):
                continue
            firsts = packed.start[np.searchsorted(packed.instance, np.arange(len(packed)))]
            yield _Pass(dupe, packed, np.zeros(len(packed), np.int64), firsts)
            continue
        batch = _pairs(
            bucket, documents, nexts, recipe, rng, owed, last_pass=dupe == recipe.dupe_factor - 1, made=drawn
        )
        owed = batch.balance
        for reason, n in batch.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
        if not len(batch):
            continue
        columns = batch.columns()  # a_start, a_end, b_start, b_end, label
        labels = columns[4]
        drawn["instances"] += len(labels)
        drawn["positive_labels"] += int(labels.sum())
        yield _Pass(dupe, batch, labels, columns[0])


def count_by_language(
    bucket: Bucket, documents: int, pool: range | None, recipe: InstanceRecipe, seed: int, key: str
) -> dict[str, int]:
    """{language: instances} that bucket_instances makes of these documents, each instance under the language of
    the document its first segment comes from: the same draws, nothing assembled."""
    languages = bucket.languages or [UNDETERMINED] * len(bucket)
    found: dict[str, int] = {}
    for drawn in _passes(bucket, documents, pool, recipe, seed, key, {}):
        for doc, n in zip(*np.unique(bucket.document_of_tokens(drawn.first_tokens), return_counts=True)):
            found[languages[doc]] = found.get(languages[doc], 0) + int(n)
    return found


def bucket_instances(
    bucket: Bucket, documents: int, pool: range | None, recipe: InstanceRecipe, special: SpecialIds, seed: int, key: str
) -> BucketInstances:
    """The instances of the first `documents` documents of `bucket`; random next segments (nsp) come from the
    documents in `pool`, the rest of the bucket (see create_instances_from_document)."""
    skipped: dict[str, int] = {}
    return _built(
        _passes(bucket, documents, pool, recipe, seed, key, skipped),
        bucket,
        documents,
        recipe,
        special,
        seed,
        key,
        skipped,
    )


def sampled_bucket_instances(
    bucket: Bucket,
    documents: int,
    pool: range | None,
    recipe: InstanceRecipe,
    special: SpecialIds,
    seed: int,
    key: str,
    wanted: float,
    rate: float,
) -> BucketInstances:
    """About `wanted` instances of the documents (language sampling, transforms/language_sampling.py): `wanted`
    rounded up or down at random, so that the expected number is exact, chosen at random among the draws of at
    least the recipe's passes and of as many more as it takes (about `rate` times as many), each pass paired and
    masked anew; the labels of a pair objective stay balanced. Only the chosen draws are assembled."""
    target = int(wanted + _unit(seed, key, recipe))
    skipped: dict[str, int] = {}
    most = recipe.dupe_factor + 4 * math.ceil(rate * recipe.dupe_factor) + 8  # a bound: passes rarely draw none
    drawn: list[_Pass] = []
    if target:
        for one in _passes(bucket, documents, pool, replace(recipe, dupe_factor=most), seed, key, skipped):
            drawn.append(one)
            if one.dupe + 1 >= recipe.dupe_factor and sum(len(p.labels) for p in drawn) >= target:
                break
    labels = np.concatenate([p.labels for p in drawn]) if drawn else np.zeros(0, np.int64)
    rng = numpy_rng(seed, "sampled draws", key, recipe.seq.name)
    # Without a pair objective every instance has the one label 0: there is no balance to keep, and a balanced
    # draw would stop at a single instance.
    balanced = recipe.pair_objective != "none"
    chosen = chosen_draws(labels, target, rng) if balanced else chosen_uniformly(len(labels), target, rng)
    kept, start = [], 0
    for one in drawn:
        rows = chosen[(chosen >= start) & (chosen < start + len(one.labels))] - start
        start += len(one.labels)
        if len(rows):
            kept.append(_Pass(one.dupe, one.draws.take(rows), one.labels[rows], one.first_tokens[rows]))
    return _built(kept, bucket, documents, recipe, special, seed, key, skipped)


def _unit(seed: int, key: str, recipe: InstanceRecipe) -> float:
    return float(numpy_rng(seed, "sampled count", key, recipe.seq.name).random())


def chosen_uniformly(draws: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` of the `draws` (all of them if there are fewer), ascending, chosen at random."""
    return np.sort(rng.choice(draws, min(count, draws), replace=False))


def chosen_draws(labels: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """About `count` of the draws, ascending, chosen at random: half of them of each label, rounded at random, and
    never one label more than one draw ahead of the other. Where one label runs short (documents of one sentence
    make only random next segments), fewer are chosen: labels stay balanced, and the language's share falls short
    (the manifest shows it, and create warns)."""
    positives = np.flatnonzero(labels == 1)
    negatives = np.flatnonzero(labels != 1)
    from_positives = min(len(positives), int(count / 2 + rng.random()))
    from_negatives = min(len(negatives), count - from_positives)
    from_positives = min(len(positives), count - from_negatives, from_negatives + 1)
    from_negatives = min(from_negatives, from_positives + 1)
    return np.sort(
        np.concatenate(
            [rng.choice(positives, from_positives, replace=False), rng.choice(negatives, from_negatives, replace=False)]
        )
    )


def _built(
    drawn_passes,
    bucket: Bucket,
    documents: int,
    recipe: InstanceRecipe,
    special: SpecialIds,
    seed: int,
    key: str,
    skipped: dict[str, int],
) -> BucketInstances:
    """Each pass's draws assembled, masked (or left for masking at load time) and given their random sort keys."""
    seq = recipe.seq
    passes: list[InstanceColumns] = []
    sort_keys: list[np.ndarray] = []
    first_tokens: list[np.ndarray] = []
    counts = {"instances": 0, "positive_labels": 0, "real_tokens": 0, "predictions": 0}
    negatives: list[np.ndarray] = []  # where each random next segment starts (nsp): how many distinct ones
    provenance: list[Provenance] = []
    by_sentence = recipe.provenance == "sentences"
    for drawn in drawn_passes:
        nrng = numpy_rng(seed, "masking", key, seq.name, drawn.dupe)
        labels, draws, firsts = drawn.labels, drawn.draws, drawn.first_tokens
        if recipe.pair_objective == "none":
            rows = assemble_packed(bucket.tokens, draws, seq.max_seq_length, special, bucket.word_continues)
            if recipe.provenance:
                provenance.append(packed_provenance(draws, bucket, by_sentence))
        else:
            columns = draws.columns()
            if recipe.pair_objective == "nsp":
                negatives.append(columns[2][columns[4] == 1])
            rows = assemble(bucket.tokens, columns, seq.max_seq_length, special, nrng, bucket.word_continues)
            if recipe.provenance:
                provenance.append(pair_provenance(columns, bucket, by_sentence))
        passes.append(_masked(rows, labels, recipe, special, nrng))
        sort_keys.append(nrng.integers(0, 2**63, len(labels), dtype=np.int64))
        first_tokens.append(firsts)
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
    built = BucketInstances(InstanceColumns.concatenate(passes), np.concatenate(sort_keys), counts, skipped)
    if provenance:
        built.provenance = Provenance.concatenate(provenance)
    if bucket.languages is not None:
        docs = bucket.document_of_tokens(np.concatenate(first_tokens))
        built.language_tags = sorted({bucket.languages[d] for d in range(documents)})
        numbers = {tag: i for i, tag in enumerate(built.language_tags)}
        per_document = np.array([numbers[tag] for tag in bucket.languages[:documents]], np.int16)
        built.languages = per_document[docs]  # each instance's first segment is of one of these documents
        for tag, n in zip(built.language_tags, np.bincount(built.languages, minlength=len(built.language_tags))):
            counts[f"language:{tag}"] = int(n)
    return built


def _pairs(
    bucket: Bucket,
    documents: int,
    nexts: list[RandomNexts],
    recipe: InstanceRecipe,
    rng,
    owed: int,
    last_pass: bool,
    made: dict[str, int],
) -> InstanceBatch:
    """One pass's A/B pairs over the bucket's documents, labels balanced with what the earlier passes `made`;
    `nexts`: where each document's random next segments come from (random_next_sources)."""
    batch = InstanceBatch(balance=owed)
    max_num_tokens = recipe.seq.max_seq_length - sum(recipe.pair_frame)
    for doc in range(documents):
        if recipe.pair_objective == "sop":
            create_sop_instances_from_document(bucket, doc, max_num_tokens, recipe.short_seq_prob, rng, batch)
            continue
        batch.may_owe = not (last_pass and doc == documents - 1)
        before = len(batch.rows)
        create_instances_from_document(bucket, doc, max_num_tokens, recipe.short_seq_prob, rng, batch, nexts[doc])
        if nexts[doc].other_language:
            batch.count("random_next_of_another_language", sum(row[4] for row in batch.rows[before:]))
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
