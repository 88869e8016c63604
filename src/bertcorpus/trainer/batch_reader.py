"""A batch's instances read in one process, as the loader's layouts give them.

    static form   TFRecords: the records read (through the shards' offsets) and parsed in one go, as stored
    dynamic form  Parquet or MDS: the instances' rows gathered into padded rows and masked here, with
                  transforms.masking (the code create masks with), by the loader's masking policy

Both give the reference layout's features; `huggingface_features` turns them into what BertForPreTraining takes.
A BatchReader holds what a process opens and caches for a loader (open shards, recent blocks of rows, the epoch's
plan, the vocab's special ids): it is never pickled, and each DataLoader worker makes its own (trainer/loader.py).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from bertcorpus.trainer.epoch_plan import EpochPlan
from bertcorpus.trainer.mds_files import MdsShard
from bertcorpus.trainer.packed_layout import IGNORE_INDEX
from bertcorpus.trainer.record_files import (
    BLOCK_ROWS,
    CACHED_BLOCKS,
    IndexMismatch,
    InstanceRows,
    LoaderError,
    ParquetShard,
    TFRecordShard,
)
from bertcorpus.trainer.storage import read_bytes
from bertcorpus.transforms.example_decoding import FeatureWidthError, joined_records, parse_examples
from bertcorpus.transforms.masking import Assembled, Masked, SpecialIds, mask_tokens, special_ids
from bertcorpus.transforms.row_streams import RowStreams, row_keys
from bertcorpus.transforms.seeding import stable_hash
from bertcorpus.transforms.tfrecord import feature_spec
from bertcorpus.wordpiece.ranges import concat_ranges
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile, TokenizerFileError, read_tokenizer_source
from bertcorpus.wordpiece.vocab import Vocab, VocabError


@dataclass
class MaskedRows:
    """A dynamic batch's rows once masked: the masks, and per row its length, where the token type of B starts
    (the row's length where the template gives every token type 0) and its label."""

    masked: Masked
    length: np.ndarray
    b_start: np.ndarray
    label: np.ndarray


class BatchReader:
    """What a process opens and caches for a loader, and the batches it reads with them. Each method takes the
    loader it serves (a PretrainingLoader), whose settings it reads."""

    def __init__(self, pid: int):
        self.pid = pid
        self.plan_key = None
        self.plan: EpochPlan | None = None
        self.shards: dict[int, object] = {}
        self.blocks: OrderedDict = OrderedDict()
        self._bins: np.ndarray | None = None
        self._lengths: np.ndarray | None = None
        self._special: SpecialIds | None = None
        self._mask_base: int | None = None

    # ---------------------------------------------------------------- what the process keeps

    def lengths(self, loader) -> np.ndarray:
        """Every instance's length, in manifest order (for packing)."""
        if self._lengths is None:
            self._lengths = np.concatenate([loader.shard_index(s, "lengths") for s in loader.dataset.shards])
        return self._lengths

    def bins(self, loader) -> np.ndarray:
        """Every instance's length bin, in manifest order."""
        if self._bins is None:
            lengths = np.concatenate([loader.shard_index(s, "lengths") for s in loader.dataset.shards])
            self._bins = ((lengths - 1) // loader.dataset.bin_size).astype(np.int16)
        return self._bins

    def tfrecord(self, loader, s: int) -> TFRecordShard:
        if s not in self.shards:
            shard = loader.dataset.shards[s]
            self.shards[s] = TFRecordShard(shard, loader.shard_index(shard, "offsets"), self.blocks)
        return self.shards[s]

    def parquet_block(self, loader, s: int, block: int) -> InstanceRows:
        key = (s, block)
        rows = self.blocks.get(key)
        if rows is not None:
            self.blocks.move_to_end(key)
            return rows
        if s not in self.shards and loader.dataset.file_format == "mds":
            self.shards[s] = MdsShard(loader.dataset.shards[s], loader.dataset)
        elif s not in self.shards:
            self.shards[s] = ParquetShard(loader.dataset.shards[s], loader.dataset.seq_length)
        shard = self.shards[s]
        first = block * BLOCK_ROWS
        rows = self.blocks[key] = shard.rows(first, min(first + BLOCK_ROWS, shard.shard.records))
        while len(self.blocks) > CACHED_BLOCKS:
            self.blocks.popitem(last=False)
        return rows

    def special(self, loader) -> SpecialIds:
        if self._special is None:
            self._special = special_ids(output_vocab(loader.vocab_path, loader.dataset))
        return self._special

    def mask_base(self, loader) -> int:
        if self._mask_base is None:
            self._mask_base = stable_hash(
                loader.seed, "loader-masks", loader.dataset.split, f"seq{loader.dataset.seq_length}"
            )
        return self._mask_base

    # ---------------------------------------------------------------- reading a batch

    def static_features(self, loader, ids: np.ndarray, width: int) -> dict[str, np.ndarray]:
        """The instances' records, parsed as stored; with bins, the rows cut to the batch's width."""
        d = loader.dataset
        spec = feature_spec(d.seq_length, d.max_predictions)
        records: list[bytes] = [b""] * len(ids)
        for s, rows, at in by_shard(loader.shard_start, ids):
            try:
                found = self.tfrecord(loader, s).records(rows)
            except IndexMismatch:  # the cached offsets are wrong, not the shard: index it again, once
                loader.shard_index(d.shards[s], "offsets", rebuild=True)
                self.shards.pop(s, None)
                found = self.tfrecord(loader, s).records(rows)
            for where, record in zip(at.tolist(), found):
                records[where] = record
        try:  # one parse for the whole batch, whichever shards its records come from
            parsed = parse_examples(*joined_records(records), spec)
        except FeatureWidthError as e:
            raise LoaderError(
                f"{d.output_dir}: seq{d.seq_length} records do not hold features of "
                f"{d.seq_length} tokens and {d.max_predictions} predictions (found a feature of "
                f"{e.found} values)"
            ) from None
        except ValueError as e:
            raise LoaderError(f"{d.output_dir}: seq{d.seq_length} records are not tf.train.Examples: {e}") from None
        out = {
            name: values.astype(np.float32 if spec[name][0] else np.int32, copy=False)
            for name, values in parsed.items()
        }
        if width < d.seq_length:  # bins: the records are padded to L, the batch only to its bin's edge
            for name in ("input_ids", "input_mask", "segment_ids"):
                out[name] = np.ascontiguousarray(out[name][:, :width])
        return out

    def masked_rows(self, loader, ids: np.ndarray, width: int, rate: float) -> MaskedRows:
        """The instances' rows, padded to `width`, with masks drawn at `rate` for the loader's epoch."""
        n = len(ids)
        input_ids = np.zeros((n, width), np.int32)
        length, b_start, label = (np.zeros(n, np.int64) for _ in range(3))
        continues = None  # the tokens that continue a segmenter's word, where the shards say (chinese_ref)
        for s, rows, at in by_shard(loader.shard_start, ids):
            block = rows // BLOCK_ROWS
            for k in np.unique(block).tolist():
                here = block == k
                part = self.parquet_block(loader, s, k)
                r = rows[here] - k * BLOCK_ROWS
                dest = at[here]
                count = part.length[r]
                if (count > width).any():
                    raise LoaderError(
                        f"{loader.dataset.shards[s].path}: an instance of {int(count.max())} tokens "
                        f"is longer than its bin's width {width}"
                    )
                source = concat_ranges(part.starts[r], count)
                flat = np.repeat(dest * width - part.starts[r], count) + source
                input_ids.reshape(-1)[flat] = part.ids[source]
                length[dest], b_start[dest], label[dest] = count, part.segment_b_start[r], part.label[r]
                if part.ref is not None and loader.whole_word_mask:
                    continues = np.zeros((n, width), bool) if continues is None else continues
                    per_row = part.ref_starts[r + 1] - part.ref_starts[r]
                    refs = part.ref[concat_ranges(part.ref_starts[r], per_row)]
                    continues.reshape(-1)[np.repeat(dest * width, per_row) + refs] = True
        special = self.special(loader)
        rows = unmasked_rows(input_ids, length, b_start, continues, special, loader.dataset.pair_objective)
        streams = RowStreams(row_keys(self.mask_base(loader), loader.epoch, ids))
        policy = loader.masking
        masked = mask_tokens(
            rows,
            rate,
            loader.max_predictions,
            special,
            streams,
            whole_word=loader.whole_word_mask,
            mask_replace_prob=policy.mask_replace_prob,
            random_replace_prob=policy.random_replace_prob,
            keyed=True,
        )
        # Token types start at B where the template gives B its own (BERT's); RoBERTa's gives every token type 0.
        return MaskedRows(masked, length, b_start if special.templates.b_type else length, label)


def output_vocab(path: str, dataset) -> Vocab | TokenizerFile:
    """The vocab.txt or the tokenizer a dynamic output's ids came from (its copy, or `path`), checked against the
    sha256 its manifest records."""
    what = "tokenizer" if dataset.tokenizer is not None else "vocab"
    try:
        if dataset.tokenizer is not None:
            source = read_tokenizer_source(path, dataset.tokenizer.get("specials") or {})
            data, vocab = source.json_bytes, TokenizerFile(source)
        else:
            data = read_bytes(path)
            vocab = Vocab.from_bytes(data, path)
    except (OSError, VocabError, TokenizerFileError) as e:
        raise LoaderError(f"cannot read {what} {path}: {e}") from None
    expected = dataset.vocab_sha256
    if expected and (found := hashlib.sha256(data).hexdigest()) != expected:
        raise LoaderError(
            f"{what} {path} is not the one the ids came from (sha256 {found[:12]}..., the manifest's "
            f"{expected[:12]}...): its masks would draw from other tokens"
        )
    return vocab


def unmasked_rows(
    input_ids: np.ndarray,
    length: np.ndarray,
    b_start: np.ndarray,
    continues: np.ndarray | None,
    special: SpecialIds,
    pair_objective: str,
) -> Assembled:
    """Rows read back from their stored columns, in the layout masking takes: the tokenizer's pair template, or in
    a row of one segment its single template with the suffixes between documents as separators."""
    lay = special.templates
    separators = None
    frame = lay.pair_frame
    if pair_objective == "none":
        frame = lay.single_frame
        col = np.arange(input_ids.shape[1])[None, :]
        inner = (col >= frame[0]) & (col < length[:, None] - frame[1])
        separators = np.isin(input_ids, lay.single_suffix) & inner
    return Assembled(input_ids, length, b_start - frame[0] - frame[1], separators, continues, frame)


def by_shard(shard_start: np.ndarray, ids: np.ndarray):
    """(shard number, rows in that shard, where those instances go in the batch) for each shard they come from;
    shard_start holds the global number of each shard's first instance."""
    shard = np.searchsorted(shard_start, ids, side="right") - 1
    for s in np.unique(shard).tolist():
        at = np.flatnonzero(shard == s)
        yield s, ids[at] - shard_start[s], at


def predicted(masked: Masked, max_predictions: int) -> np.ndarray:
    """(N, max_predictions) bool: the prediction slots that hold a prediction."""
    return np.arange(max_predictions)[None, :] < masked.count[:, None]


def dynamic_features(rows: MaskedRows, max_predictions: int) -> dict[str, np.ndarray]:
    """Masked rows in the reference layout, as a static record would hold them."""
    masked, length, b_start = rows.masked, rows.length, rows.b_start
    col = np.arange(masked.input_ids.shape[1])[None, :]
    real = col < length[:, None]
    return {
        "input_ids": masked.input_ids.astype(np.int32, copy=False),
        "input_mask": real.astype(np.int32),
        "segment_ids": ((col >= b_start[:, None]) & real).astype(np.int32),
        "masked_lm_positions": masked.positions,
        "masked_lm_ids": masked.label_ids,
        "masked_lm_weights": predicted(masked, max_predictions).astype(np.float32),
        "next_sentence_labels": rows.label[:, None].astype(np.int32),
    }


def huggingface_features(f: dict[str, np.ndarray], pair_label: bool) -> dict[str, np.ndarray]:
    """What BertForPreTraining takes: labels are -100 but at real predictions (never at padded slots); the pair
    label where the output has a pair objective."""
    n, width = f["input_ids"].shape
    labels = np.full((n, width), IGNORE_INDEX, np.int64)
    real = f["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(n)[:, None], real.shape)
    labels[rows[real], f["masked_lm_positions"][real]] = f["masked_lm_ids"][real]
    out = {
        "input_ids": f["input_ids"].astype(np.int64),
        "token_type_ids": f["segment_ids"].astype(np.int64),
        "attention_mask": f["input_mask"].astype(np.int64),
        "labels": labels,
    }
    if pair_label:
        out["next_sentence_label"] = f["next_sentence_labels"][:, 0].astype(np.int64)
    return out
