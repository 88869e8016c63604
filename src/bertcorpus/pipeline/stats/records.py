"""The records pass of `bertcorpus stats`: one pass over a records stage's shards, per seq config and split, through
the reader of their stored form (RECORD_READERS: TFRecords as stored; Parquet with the masks trainer.loader draws
for epoch 0), into the counts of transforms/record_stats.py.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertcorpus.pipeline.errors import UserError
from bertcorpus.pipeline.stats.stages import MANIFEST, SPLITS, Stage
from bertcorpus.transforms.bucket_instances import bins_of_manifest

RECORD_BATCH = 4096  # records decoded at once


def token_ids(vocab):
    """What the records' statistics need of a vocab.txt or a tokenizer.json (-1: a token it has none of)."""
    from bertcorpus.transforms.record_stats import TokenIds
    from bertcorpus.wordpiece.tokenizer_file import TokenizerFile
    from bertcorpus.wordpiece.vocab import MASK, SEP, UNK

    if isinstance(vocab, TokenizerFile):
        separator = vocab.layout.single_suffix[-1] if vocab.layout.single_suffix else -1
        return TokenIds(len(vocab), vocab.specials["mask"], vocab.specials.get("unk", -1), separator)
    ids = vocab.ids
    return TokenIds(vocab_size=len(vocab), mask=ids[MASK], unk=ids[UNK], sep=ids[SEP])


def _quotas(sizes: list[int], cap: int) -> list[int]:
    """Records to read from each shard: all of them, or `cap` in all, shared in proportion to the shards' sizes
    (largest remainders first), so that a sample draws on every shard and on both splits."""
    total = sum(sizes)
    if cap <= 0 or cap >= total:
        return list(sizes)
    exact = [cap * n / total for n in sizes]
    quotas = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: quotas[i] - exact[i])
    for i in by_remainder[: cap - sum(quotas)]:
        quotas[i] += 1
    return quotas


@dataclass
class SplitRead:
    """One split of one seq config, as a reader is asked for it: its shards (manifest entries) and how many records
    of each to read (a reader that cannot choose its records by shard reads as many in all). A reader may say how
    it drew the masks in `masks`."""

    stage: Stage
    split: str
    length: int
    predictions: int
    shards: list[dict]
    quotas: list[int]
    masks: dict | None = None

    def path(self, shard: int) -> Path:
        return self.stage.dir / self.shards[shard]["path"]

    def miscount(self, shard: int) -> str:
        return f"{self.path(shard)} does not hold the {self.shards[shard]['records']:,} records its manifest says"


def read_tfrecord_split(request: SplitRead, warnings: list[str]) -> Iterator[tuple[np.ndarray, dict]]:
    """The first `quota` records of each TFRecord shard, decoded into the reference feature layout a batch at a
    time, with each record's shard number. A whole shard is read one record past its count, to find records its
    manifest does not know."""
    from bertcorpus.transforms.record_stats import RecordFormatError, decode_batch
    from bertcorpus.transforms.tfrecord import iter_tfrecords

    for number, quota in enumerate(request.quotas):
        path, whole, read = request.path(number), quota == request.shards[number]["records"], 0
        try:
            with open(path, "rb") as f:
                records = itertools.islice(iter_tfrecords(f), quota + whole)
                while batch := list(itertools.islice(records, RECORD_BATCH)):
                    n = min(len(batch), quota - read)
                    if n < len(batch):
                        warnings.append(request.miscount(number))
                    if n:
                        decoded = decode_batch(batch[:n], request.length, request.predictions)
                        read += n
                        yield np.full(n, number), decoded
        except (ValueError, RecordFormatError) as e:
            raise UserError(f"{path}, after record {read}: {e}") from None
        if read < quota:
            warnings.append(request.miscount(number))


def read_parquet_split(request: SplitRead, warnings: list[str]) -> Iterator[tuple[np.ndarray, dict]]:
    """Instances of the Parquet form with the masks that trainer.loader draws for epoch 0 with its default seed and
    the manifest's masking settings (the first epoch of a trainer that leaves them alone), in the reference feature
    layout, padded to the batch's length bin; with each instance's shard number.

    Every instance once, in epoch order: the loader completes a split's (or a bin's) last batch with instances it
    gave already, and those are left out here; a sample is the epoch's first instances, spread over every shard
    by the epoch's shuffle. What is held beyond a batch is one flag per instance of the split."""
    import tempfile

    from bertcorpus.trainer.loader import LoaderError, PretrainingLoader

    total, wanted = sum(s["records"] for s in request.shards), sum(request.quotas)
    if not wanted:
        return
    first_instance = np.cumsum([0] + [s["records"] for s in request.shards])
    # The loader keeps its index of instance lengths in a cache; stats leaves nothing behind outside its output.
    with tempfile.TemporaryDirectory(prefix="bertcorpus-stats-") as cache:
        try:
            loader = PretrainingLoader(
                str(request.stage.dir),
                seq_length=request.length,
                split=request.split,
                batch_size=min(RECORD_BATCH, total),
                drop_remainder=False,
                cache_dir=cache,
            )
            state = loader.state_dict(0)
            request.masks = {
                "drawn_by": "bertcorpus.PretrainingLoader",
                "epoch": state["epoch"],
                "seed": state["seed"],
                "masked_lm_prob": state["masked_lm_prob"],
                "max_predictions_per_seq": state["max_predictions_per_seq"],
                "whole_word_mask": state["whole_word_mask"],
            }
            seen = np.zeros(total, bool)
            taken = 0
            for i in range(len(loader)):
                instances = loader.batch_instances(i)
                fresh = np.zeros(len(instances), bool)
                fresh[np.unique(instances, return_index=True)[1]] = True
                fresh &= ~seen[instances]
                fresh[np.flatnonzero(fresh)[wanted - taken :]] = False
                if not fresh.any():
                    continue
                batch = loader[i]
                seen[instances[fresh]] = True
                taken += int(fresh.sum())
                yield (
                    np.searchsorted(first_instance, instances[fresh], side="right") - 1,
                    {name: values[fresh] for name, values in batch.items()},
                )
                if taken == wanted:
                    break
        except LoaderError as e:
            raise UserError(str(e)) from None


# How each stored form of records is read: {manifest form's file_format: reader}. The loader reads the MDS form as
# it reads Parquet. A reader yields batches in the
# reference feature layout (what RecordStats counts) with each record's shard, so that a new form needs only its
# reader here.
RECORD_READERS = {"tfrecord": read_tfrecord_split, "parquet": read_parquet_split, "mds": read_parquet_split}
STATIC_NSP_FORM = {
    "masking": "static",
    "pair_objective": "nsp",
    "bin_size": None,
    "file_format": "tfrecord",
    "label": "random_next",
}


def record_form(stage: Stage) -> dict:
    """The manifest's description of its records; manifests written before create had other forms name none."""
    form = stage.manifest.get("form")
    return {**STATIC_NSP_FORM, **form} if isinstance(form, dict) else dict(STATIC_NSP_FORM)


def records_pass(stage: Stage, ids, max_records: int, warnings: list[str]) -> dict:
    """{seq name: (config and shard table, {split: RecordStats})}, reading at most max_records per seq config."""
    from tqdm import tqdm

    from bertcorpus.transforms.record_stats import LABELS, RecordFormatError, RecordStats

    form = record_form(stage)
    reader = RECORD_READERS.get(form["file_format"])
    if reader is None:
        raise UserError(
            f"{stage.dir / MANIFEST} names records stored as {form['file_format']}; stats reads "
            f"{', '.join(RECORD_READERS)} records"
        )
    if form["label"] not in LABELS:
        raise UserError(f"{stage.dir / MANIFEST} names the label {form['label']}; stats knows {', '.join(LABELS)}")
    result = {}
    for seq, out in stage.manifest["outputs"].items():
        length, predictions = int(out["max_seq_length"]), int(out["max_predictions_per_seq"])
        splits = [split for split in SPLITS if split in out]
        quotas = iter(_quotas([s["records"] for split in splits for s in out[split]["shards"]], max_records))
        requests = [
            SplitRead(
                stage, split, length, predictions, out[split]["shards"], [next(quotas) for _ in out[split]["shards"]]
            )
            for split in splits
        ]
        for request in requests:
            for number in range(len(request.shards)):
                if not request.path(number).is_file():
                    raise UserError(f"{request.path(number)} is named in {stage.dir / MANIFEST} but missing")
        accumulators = {split: RecordStats(length, predictions, ids, form["label"]) for split in splits}
        rows = []
        with tqdm(
            total=sum(sum(r.quotas) for r in requests),
            desc=f"{stage.name} {seq}",
            unit=" records",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None,
        ) as bar:  # (as in documents_pass)
            for request in requests:
                read = np.zeros(len(request.shards), np.int64)
                for shard_of, batch in reader(request, warnings):
                    try:
                        accumulators[request.split].add(batch)
                    except RecordFormatError as e:
                        where = np.unique(shard_of)
                        raise UserError(
                            f"{request.path(where[0]) if len(where) == 1 else stage.dir / seq}: {e}"
                        ) from None
                    read += np.bincount(shard_of, minlength=len(read))
                    bar.update(len(shard_of))
                for number, shard in enumerate(request.shards):
                    path = request.path(number)
                    row = {
                        "path": shard["path"],
                        "split": request.split,
                        "records": shard["records"],
                        "bytes": shard.get("bytes"),
                        "file_bytes": path.stat().st_size,
                        "records_read": int(read[number]),
                    }
                    rows.append(row)
                    if row["bytes"] is not None and row["file_bytes"] != row["bytes"]:
                        warnings.append(f"{path} has {row['file_bytes']:,} bytes, its manifest says {row['bytes']:,}")
        masks = next((r.masks for r in requests if r.masks), {"stored": "in the records, as create drew them"})
        result[seq] = (
            {
                "max_seq_length": length,
                "max_predictions_per_seq": predictions,
                "instances": {split: out[split]["instances"] for split in splits},
                "manifest_bins": {
                    split: bins_of_manifest(out[split]["bins"]) for split in splits if "bins" in out[split]
                },
                "draws_skipped": {
                    split: skipped
                    for split in splits
                    for key, skipped in out[split].items()
                    if key.endswith("_draws_skipped")
                },
                "masks": masks,
                "shards": rows,
            },
            accumulators,
        )
    return result
