"""Pretraining batches from a `create` output, without TensorFlow: map-style over batches, for PyTorch, Keras, JAX.

    loader = PretrainingLoader("out", seq_length=128, batch_size=256, rank=r, world_size=w, seed=0)
    len(loader)    # batches of this rank in this epoch, the same on every rank
    loader[i]      # dict of numpy arrays in the reference layout (or layout="huggingface")

    PretrainingLoader("out", seq_length=1024, layout="packed", tokens_per_batch=65536, masked_lm_prob=0.3)
    # each batch one flat stream of whole instances with cu_seqlens, for unpadded attention

It reads every form `create` writes: static TFRecords (masks fixed in the records) and dynamic Parquet or MDS
(instances unmasked, masks drawn at load time with transforms.masking, the code create masks with, by the masking
policy of trainer/masking_policy.py). The vocab and the masking settings come from the output's manifest.json;
keyword arguments override them. docs/loader.md is the user's guide: the epoch order, the remainder rule, bins,
masks, resume and the layouts.

Epoch order: a split's instances are numbered in manifest order (shard by shard, row by row) and cut into blocks of
BLOCK_ROWS (a Parquet row group; a run of TFRecords). An epoch permutes the blocks with a generator seeded by
(seed, epoch), groups them WINDOW_BLOCKS at a time into windows, and shuffles the instances inside each window:
reads stay within a few blocks at a time. Global batches (batch_size * world_size instances) are consecutive
instances of that order (of one bin's instances where the output has bins); rank r takes the r-th slice of each.

This module decides which instances make each batch of each rank, and checks what it is given. The epoch order is
trainer/epoch_plan.py's, the files are read by trainer/record_files.py, and a batch's instances become features in
trainer/batch_reader.py. Files are opened lazily in each process, so a loader pickles small and cleanly (DataLoader
workers).
"""

from __future__ import annotations

import numbers
import os
import sys
from pathlib import Path

import numpy as np

from bertcorpus.trainer.batch_reader import BatchReader, dynamic_features, huggingface_features, predicted
from bertcorpus.trainer.epoch_plan import EpochPlan
from bertcorpus.trainer.loader_checks import (
    check_bin_sizes,
    check_state,
    epoch_number,
    index_fits,
    scan_and_verify,
    verify_sha256,
    whole_number,
    yes_or_no,
)
from bertcorpus.trainer.masking_policy import MaskingPolicy
from bertcorpus.trainer.mds_files import MdsShard, check_index
from bertcorpus.trainer.packed_layout import PackedPlan, packed_batch, packed_stream
from bertcorpus.trainer.provenance_files import sidecar_table
from bertcorpus.trainer.record_files import (
    BLOCK_ROWS,
    IndexCache,
    LoaderError,
    ParquetShard,
    Shard,
    default_cache_dir,
    read_dataset,
    tfrecord_lengths,
    write_tfrecord_indexes,
)
from bertcorpus.transforms.bucket_instances import bin_edges
from bertcorpus.transforms.local_files import special_file_problem

__all__ = ["LAYOUTS", "LoaderError", "PretrainingLoader", "write_tfrecord_indexes"]

LAYOUTS = ("reference", "huggingface", "packed")
STATE_VERSION = 1


class PretrainingLoader:
    """Batches of one split of a `create` output, map-style: len(loader) batches, loader[i] a dict of numpy arrays.

    Every rank gets the same number of batches; within an epoch each instance goes to one rank. See
    docs/loader.md for the epoch order, the remainder rule, bins, masks, resume and the layouts.
    """

    def __init__(
        self,
        output_dir,
        *,
        seq_length: int,
        split: str = "train",
        batch_size: int | None = None,
        tokens_per_batch: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        epoch: int = 0,
        drop_remainder: bool = True,
        layout: str = "reference",
        vocab: str | None = None,
        masked_lm_prob: float | None = None,
        max_predictions_per_seq: int | None = None,
        whole_word_mask: bool | None = None,
        mask_replace_prob: float | None = None,
        random_replace_prob: float | None = None,
        cache_dir: str | os.PathLike | None = None,
    ):
        if layout not in LAYOUTS:
            raise LoaderError(f"layout must be one of {', '.join(LAYOUTS)}, not {layout!r}")
        if split not in ("train", "eval"):
            raise LoaderError(f"split must be 'train' or 'eval', not {split!r}")
        rank = whole_number("rank", rank, 0)
        world_size, epoch = whole_number("world_size", world_size, 1), epoch_number(epoch)
        seed = whole_number("seed", seed, -(2**63), 2**63)
        if rank >= world_size:
            raise LoaderError(f"rank must be in [0, world_size): rank {rank}, world_size {world_size}")
        packed = layout == "packed"
        if packed != (tokens_per_batch is not None) or packed == (batch_size is not None):
            raise LoaderError(
                "layout='packed' takes tokens_per_batch (a token budget per batch) and no batch_size; the other "
                "layouts take batch_size"
            )
        if packed:
            tokens_per_batch = whole_number("tokens_per_batch", tokens_per_batch, 1)
        else:
            batch_size = whole_number("batch_size", batch_size, 1)
        self.dataset = read_dataset(str(output_dir), seq_length, split)
        d = self.dataset
        if not packed and batch_size * world_size > d.instances:
            raise LoaderError(
                f"a global batch of {batch_size * world_size} (batch_size {batch_size} x world_size "
                f"{world_size}) is larger than the {split} split of seq{seq_length}, which holds "
                f"{d.instances} instances"
            )
        self.batch_size, self.tokens_per_batch = batch_size, tokens_per_batch
        self.rank, self.world_size = rank, world_size
        self.seed, self.epoch, self.layout = seed, epoch, layout
        self.drop_remainder = yes_or_no("drop_remainder", drop_remainder)
        if whole_word_mask is not None:
            whole_word_mask = yes_or_no("whole_word_mask", whole_word_mask)
        self.masking = MaskingPolicy.build(
            d, masked_lm_prob, max_predictions_per_seq, whole_word_mask, mask_replace_prob, random_replace_prob
        )
        self.max_predictions, self.whole_word_mask = self.masking.max_predictions, self.masking.whole_word
        self.vocab_path = vocab if vocab is not None else d.vocab_path
        if self.vocab_path and (problem := special_file_problem(self.vocab_path, "the vocab")):
            raise LoaderError(problem)
        if d.masking == "dynamic" and not self.vocab_path:
            raise LoaderError(f"{d.output_dir}: the manifest names no vocab; pass vocab=")
        self.cache = IndexCache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
        self.start = 0  # the first batch of the epoch that loader[0] gives (after load_state_dict)
        self.consumed = 0  # batches that iterating over the loader has yielded since `start`
        # Blocks of BLOCK_ROWS instances, numbered in manifest order: the units of the epoch's permutation.
        first_row = [np.arange(0, s.records, BLOCK_ROWS) for s in d.shards]
        self.shard_start = np.concatenate(([0], np.cumsum([s.records for s in d.shards]))).astype(np.int64)
        block_shard = np.repeat(np.arange(len(d.shards)), [len(f) for f in first_row])
        block_first = np.concatenate(first_row).astype(np.int64)
        self.block_start = self.shard_start[block_shard] + block_first
        self.block_rows = np.minimum(BLOCK_ROWS, np.array([s.records for s in d.shards])[block_shard] - block_first)
        self._memory: dict[tuple[str, str], np.ndarray] = {}  # index arrays that the cache could not keep
        self._process: BatchReader | None = None  # this process's open files and plan, made on first use
        if d.file_format == "tfrecord":
            for shard in d.shards:
                self.shard_index(shard, "offsets")
        elif d.file_format == "mds":
            check_index(d)
            MdsShard(d.shards[0], d)
        else:
            ParquetShard(d.shards[0], seq_length)  # a file that is not ours is named now, not in a worker
        for shard in d.shards:  # hashed once per version of a local file (docs/loader.md: what is checked when)
            verify_sha256(shard, self.cache)
            if d.provenance and d.file_format == "tfrecord":  # the provenance beside it must still be its own
                sidecar_table(shard)
        if d.bin_size:
            self._check_bins()
        if packed:
            longest = max(int(self.shard_index(s, "lengths").max(initial=0)) for s in d.shards)
            if tokens_per_batch < longest:
                raise LoaderError(
                    f"tokens_per_batch {tokens_per_batch} is smaller than the longest instance of the {split} "
                    f"split of seq{seq_length} ({longest} tokens); instances are never split"
                )
            self._refuse_an_empty_packed_epoch()
        if d.masking == "dynamic":  # a vocab that cannot be read, or is not the ids' own, is named now
            self._local().special(self)

    def _refuse_an_empty_packed_epoch(self) -> None:
        """A token budget so large that the split fills fewer batches than one step needs gives an epoch of no batch
        at all: refused, as a global batch larger than the split is for the other layouts."""
        plan = self._plan()
        if len(plan):
            return
        d = self.dataset
        tokens = int(plan.lengths.sum())
        raise LoaderError(
            f"tokens_per_batch {self.tokens_per_batch:,} gives an epoch of no batch: the {d.split} split of "
            f"seq{d.seq_length} ({tokens:,} tokens in {d.instances:,} instances) packs into {plan.batches} "
            f"batch(es) to keep, with drop_remainder=True leaving out the least filled one, and a step takes "
            f"{self.world_size} (world_size); give a smaller tokens_per_batch (at most about "
            f"{tokens // (self.world_size + 1):,}) or drop_remainder=False"
        )

    # ---------------------------------------------------------------- per-process state

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_process"] = None  # open files, memory maps and caches are rebuilt in each process
        return state

    def _local(self) -> BatchReader:
        if self._process is None or self._process.pid != os.getpid():
            self._process = BatchReader(os.getpid())
        return self._process

    def shard_index(self, shard: Shard, what: str, rebuild: bool = False) -> np.ndarray:
        """A shard's offsets (TFRecord) or instance lengths, from the cache or built (and cached) now; a cached
        index that cannot be this shard's (a damaged cache file) is built again."""
        found = None if rebuild else self._memory.get((shard.sha256, what))
        if found is None and not rebuild:
            found = self.cache.load(shard.sha256, what)
            if found is not None and not index_fits(found, what, shard, self.dataset.seq_length):
                found = None
        if found is None:
            if what == "offsets":
                found = scan_and_verify(shard, self.cache)
            elif self.dataset.file_format == "tfrecord":
                found = tfrecord_lengths(shard.path, self.shard_index(shard, "offsets"), self.dataset.seq_length)
            elif self.dataset.file_format == "mds":
                found = MdsShard(shard, self.dataset).lengths()
            else:
                found = ParquetShard(shard, self.dataset.seq_length).lengths()
            if not self.cache.store(shard.sha256, what, found):
                self._memory[(shard.sha256, what)] = found
        return found

    # ---------------------------------------------------------------- bins

    @property
    def bin_count(self) -> int:
        size = self.dataset.bin_size
        return -(-self.dataset.seq_length // size) if size else 1

    def bin_width(self, b: int) -> int:
        """The width batches of bin b are padded to (its upper edge, as create counts bins)."""
        size, length = self.dataset.bin_size, self.dataset.seq_length
        return int(bin_edges(np.array([b * size + 1]), size, length)[0]) if size else length

    def _bins_of(self, ids: np.ndarray) -> np.ndarray:
        return self._local().bins(self)[ids]

    def _check_bins(self) -> None:
        lengths = np.concatenate([self.shard_index(s, "lengths") for s in self.dataset.shards])
        edges, counts = np.unique(
            bin_edges(lengths, self.dataset.bin_size, self.dataset.seq_length), return_counts=True
        )
        if self.dataset.bins is not None:
            expected = {int(edge): n for edge, n in self.dataset.bins.items() if n}
            found = dict(zip(edges.tolist(), counts.tolist()))
            if expected != found:
                raise LoaderError(
                    f"{self.dataset.output_dir}: the instances' lengths do not give the bins the "
                    f"manifest counts ({expected} there, {found} in the files)"
                )
        if self.drop_remainder and self.layout != "packed":  # packing sizes its batches by tokens, not by bins
            check_bin_sizes(self.dataset, edges, counts, self.batch_size * self.world_size)

    # ---------------------------------------------------------------- epochs and batches

    def _plan(self) -> EpochPlan | PackedPlan:
        local = self._local()
        key = (self.seed, self.epoch, self.batch_size, self.world_size, self.drop_remainder)
        if local.plan_key != key:
            local.plan, local.plan_key = self.plan_of(self.epoch), key
        return local.plan

    def plan_of(self, epoch: int) -> EpochPlan | PackedPlan:
        """The plan of an epoch: which instances make each global batch (trainer/epoch_plan.py)."""
        local = self._local()
        if self.layout == "packed":  # the epoch order without bins, packed window by window
            order = EpochPlan(
                self.block_start, self.block_rows, self.block_rows[:, None], None, 1, True, self.seed, epoch
            )
            return PackedPlan(order, local.lengths(self), self.tokens_per_batch, self.world_size, self.drop_remainder)
        if self.dataset.bin_size:
            bins = local.bins(self)
            block_of = np.repeat(np.arange(len(self.block_rows)), self.block_rows)
            counts = np.zeros((len(self.block_rows), self.bin_count), np.int64)
            np.add.at(counts, (block_of, bins), 1)
            instance_bins = self._bins_of
        else:
            counts, instance_bins = self.block_rows[:, None].astype(np.int64), None
        global_batch = self.batch_size * self.world_size
        return EpochPlan(
            self.block_start,
            self.block_rows,
            counts,
            instance_bins,
            global_batch,
            self.drop_remainder,
            self.seed,
            epoch,
        )

    def planned_batch(self, plan: EpochPlan | PackedPlan, step: int, rank: int) -> np.ndarray:
        """The global instance numbers of one rank's batch of a plan's step."""
        if self.layout == "packed":
            return plan.instances(step, rank)
        return plan.instances(step, rank * self.batch_size, self.batch_size)[1]

    def write_batch_order(self, path: str, epochs=None, documents: bool | None = None) -> int:
        """Write which batch holds which instance, for every step and rank of `epochs` (default: this loader's
        epoch), as Parquet at `path` (trainer/batch_order.py): without reading a token, the instances and, where the
        output has provenance (or documents=True), their documents. Returns the rows written."""
        from bertcorpus.trainer.batch_order import write_batch_order

        epochs = [self.epoch] if epochs is None else [epoch_number(e) for e in epochs]
        if documents is None:
            documents = self.dataset.provenance
        elif documents and not self.dataset.provenance:
            raise LoaderError(f"{self.dataset.output_dir} has no provenance: it was made without create --provenance")
        return write_batch_order(self, path, epochs, documents)

    def __len__(self) -> int:
        return len(self._plan()) - self.start

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` from its first batch (call it between epochs, before making a DataLoader iterator)."""
        self.epoch, self.start, self.consumed = epoch_number(epoch), 0, 0

    def batch_instances(self, i: int) -> np.ndarray:
        """The global instance numbers (manifest order) of this rank's batch i."""
        return self._batch(i)[1]

    def _batch(self, i: int) -> tuple[int, np.ndarray]:
        n = len(self)
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise LoaderError(f"a batch index must be a whole number, not {i!r}")
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"batch {i} of {n}")
        plan = self._plan()
        if self.layout == "packed":
            return -1, self.planned_batch(plan, self.start + i, self.rank)
        return plan.instances(self.start + i, self.rank * self.batch_size, self.batch_size)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        b, ids = self._batch(i)
        if b >= 0:
            width = self.bin_width(b)
        else:  # packed: rows as wide as the batch's longest instance, then flattened
            width = self._packed_width(ids)
        pair_label = self.dataset.pair_objective != "none"
        reader = self._local()
        if self.dataset.masking == "static":
            features = reader.static_features(self, ids, width)
            if self.layout == "packed":
                return packed_batch(features, pair_label)
        else:
            batch = self.start + (i if i >= 0 else i + len(self))
            rate = self.masking.rate(self.epoch, batch, len(self._plan()))
            rows = reader.masked_rows(self, ids, width, rate)
            if self.layout == "packed":  # straight from the rows: the padded features would only be undone
                m = rows.masked
                return packed_stream(
                    m.input_ids,
                    rows.length,
                    rows.b_start,
                    m.positions,
                    m.label_ids,
                    predicted(m, self.max_predictions),
                    rows.label if pair_label else None,
                )
            features = dynamic_features(rows, self.max_predictions)
        return features if self.layout == "reference" else huggingface_features(features, pair_label)

    def _packed_width(self, ids: np.ndarray) -> int:
        if self.dataset.masking == "static":  # records are read whole, padded to L
            return self.dataset.seq_length
        return int(self._local().lengths(self)[ids].max(initial=1))

    def filled_share(self) -> float:
        """layout="packed": the share of this epoch's token budget (batches × tokens_per_batch) that holds tokens."""
        if self.layout != "packed":
            raise LoaderError("filled_share() is a measure of layout='packed'")
        return self._plan().filled()

    def __iter__(self):
        """The batches from loader[0] on; state_dict() then knows how many were taken."""
        for i in range(len(self)):
            batch = self[i]
            self.consumed = i + 1
            yield batch

    # ---------------------------------------------------------------- resume

    def state_dict(self, batches: int | None = None) -> dict:
        """Where this rank stands: `batches` of loader[0], loader[1], ... have been consumed (default: as many as
        iterating over this loader has yielded). A loader given this state by load_state_dict goes on from there."""
        # A count past the epoch's end, or below 0, is no place in it: refused rather than rounded to one.
        done = self.start + (self.consumed if batches is None else whole_number("batches", batches, 0, len(self) + 1))
        epoch = self.epoch
        if done >= len(self._plan()):  # a finished epoch resumes at the next one
            epoch, done = epoch + 1, 0
        return {
            "version": STATE_VERSION,
            "dataset": self.dataset.fingerprint,
            "split": self.dataset.split,
            "seq_length": self.dataset.seq_length,
            "seed": self.seed,
            "epoch": epoch,
            "batch": done,
            "global_batch_size": self.batch_size * self.world_size if self.batch_size else None,
            "drop_remainder": self.drop_remainder,
            "masked_lm_prob": self.masking.describe_rate(),
            "max_predictions_per_seq": self.max_predictions,
            "whole_word_mask": self.whole_word_mask,
            "mask_replace_prob": self.masking.mask_replace_prob,
            "random_replace_prob": self.masking.random_replace_prob,
            "layout": self.layout,
            "tokens_per_batch": self.tokens_per_batch,
            "packed_world_size": self.world_size if self.layout == "packed" else None,  # packing depends on it
        }

    def load_state_dict(self, state: dict) -> None:
        """Go on from a state_dict(): loader[0] is then the next batch of the run that saved it."""
        mine = self.state_dict(0)
        epoch, batch = check_state(state, mine, len(self._plan()))
        if state["dataset"] != mine["dataset"]:
            raise LoaderError(
                "the saved state is from another dataset (its files, form, split or seq_length "
                "differ); it cannot resume this one"
            )
        # States saved before the replacement split and the packed layout were 80/10/10 batches of rows.
        defaults = {
            "mask_replace_prob": 0.8,
            "random_replace_prob": 0.1,
            "tokens_per_batch": None,
            "packed_world_size": None,
        }
        for key in (
            "seed",
            "global_batch_size",
            "drop_remainder",
            "masked_lm_prob",
            "max_predictions_per_seq",
            "whole_word_mask",
            "mask_replace_prob",
            "random_replace_prob",
            "tokens_per_batch",
            "packed_world_size",
        ):
            saved = state.get(key, defaults.get(key))
            if saved != mine[key]:
                raise LoaderError(
                    f"the saved state has {key} {saved!r}, this loader {mine[key]!r}; resuming would give other batches"
                )
        self.epoch, self.start, self.consumed = epoch, batch, 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bertcorpus.loader", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="write index files for the `tfrecord` package (PyTorch)")
    index.add_argument("output_dir", help="a `bertcorpus create` output (local or gs://...)")
    index.add_argument("--to", required=True, help="local directory for the .index files")
    index.add_argument("--cache-dir", help="index cache (default: $XDG_CACHE_HOME/bertcorpus)")
    args = parser.parse_args(argv)
    try:
        written = write_tfrecord_indexes(args.output_dir, args.to, args.cache_dir)
    except (LoaderError, OSError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} index files under {args.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
