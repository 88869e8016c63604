"""create's last step as a Beam DoFn: the instance pieces of one shard, in their sort order, written as a TFRecord,
Parquet or MDS shard (with the provenance Parquet beside a TFRecord shard), and what the manifest needs of it."""

from __future__ import annotations

import io

import numpy as np
import pyarrow.parquet as pq

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import shard_name
from bertcorpus.pipeline.create.job_vocab import StepWithVocab
from bertcorpus.pipeline.create.values import InstancePiece
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instance_mds import mds_shard
from bertcorpus.transforms.instance_parquet import instances_table, provenance_table, write_instances
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.provenance import Provenance
from bertcorpus.transforms.tfrecord import serialize_framed
from bertcorpus.wordpiece.sequence_layout import SequenceLayout


class WriteShards(StepWithVocab):
    """((seq config, split, shard), [InstancePiece]) → one staged shard file, its instances in the order of their
    random keys: TFRecords (static masking), or Parquet or MDS (dynamic)."""

    def use_vocab(self, vocab):
        self.vocab_size = len(vocab) if self.config.masking == "dynamic" else 0
        # Where B starts, counted from A's first token, and its token type: the template's (BERT's: 2 and 1)
        self.b_offset, self.b_type = b_placement(special_ids(vocab).templates, self.config.pair_objective)

    def process(self, element, chinese_ref: bool = False, vocab: bytes | None = None):
        """chinese_ref: whether the output's instances carry a segmenter's words, which MDS shards then store, every
        one of them (so that every sample of an output has the same keys)."""
        self.vocab_ready(vocab)
        (seq_name, split, shard), pieces = element
        written = self.write(seq_name, split, shard, list(pieces), chinese_ref)
        tally.progress("instances_written", written["records"])
        yield written

    def write(self, seq_name: str, split: str, shard: int, pieces: list[InstancePiece], chinese_ref: bool) -> dict:
        cfg = self.config
        seq = next(s for s in cfg.seq_configs if s.name == seq_name)
        rel = shard_name(cfg, seq, split, shard)
        parts, part, row = shard_order(pieces)
        provenance = shard_provenance(pieces, part, row) if cfg.provenance else None
        if cfg.masking == "static":
            chunks = _records_in_order(parts, part, row, self.b_offset, self.b_type)
        else:
            instances = (
                InstanceColumns.gather(parts, part, row) if len(part) else InstanceColumns.empty(seq.max_seq_length)
            )
            languages = instance_languages(pieces, part, row)
            if cfg.file_format == "mds":
                columns = cfg.mds_columns(self.vocab_size, chinese_ref)
                chunks = [mds_shard(instances, columns, languages, self.b_offset, provenance)]
            else:
                chunks = [_parquet_bytes(instances, self.vocab_size, languages, self.b_offset, provenance)]
        size, sha = output.write_bytes(output.staging_path(cfg.output, rel), chunks)
        written = {"path": rel, "records": len(part), "bytes": size, "sha256": sha}
        if provenance is not None and cfg.masking == "static":  # TFRecords keep the reference's features only
            beside = provenance_path(rel)
            sink = io.BytesIO()
            pq.write_table(provenance_table(provenance, sha), sink, compression="zstd")
            side_size, side_sha = output.write_bytes(output.staging_path(cfg.output, beside), [sink.getvalue()])
            written["provenance"] = {"path": beside, "bytes": side_size, "sha256": side_sha}
        return written


def provenance_path(shard: str) -> str:
    """Where a TFRecord shard's provenance lies: seq128/train-00000-of-00004.tfrecord's in
    seq128/provenance/train-00000-of-00004.parquet."""
    folder, name = shard.rsplit("/", 1)
    return f"{folder}/provenance/{name.rsplit('.', 1)[0]}.parquet"


def shard_provenance(pieces: list[InstancePiece], part: np.ndarray, row: np.ndarray) -> Provenance:
    """The provenance of instance row[i] of pieces[part[i]] for every i, in that order."""
    found = [p.provenance for p in pieces]
    first = np.concatenate(([0], np.cumsum([len(f) for f in found]))).astype(np.int64)
    joined = Provenance.concatenate(found) if found else Provenance.concatenate([])
    return joined.take(first[part] + row) if len(part) else joined


def carries_words(keyed_piece: tuple) -> bool:
    """Whether a ((config, split, shard), InstancePiece) holds a segmenter's words (whole-word masking on Chinese)."""
    return keyed_piece[1].instances.word_continues is not None


def shard_order(pieces: list[InstancePiece]) -> tuple[list[InstanceColumns], np.ndarray, np.ndarray]:
    """A shard's pieces, and (piece, row in the piece) of its instances sorted by their random keys; equal keys
    (rare) by bucket, then by their place in the bucket."""
    columns = [[np.zeros(0, np.int64)] for _ in range(5)]  # key, tie, row in the bucket, piece, row in the piece
    for number, piece in enumerate(pieces):
        n = len(piece.sort_keys)
        for values, column in zip((piece.sort_keys, piece.tiebreak, piece.rows, number, np.arange(n)), columns):
            column.append(np.broadcast_to(np.int64(values), n))
    key, tie, row, part, at = (np.concatenate(c) for c in columns)
    order = np.lexsort((row, tie, key))
    return [p.instances for p in pieces], part[order], at[order]


def b_placement(layout: SequenceLayout, pair_objective: str) -> tuple[int, int]:
    """(where B starts counted from A's first token, B's token type) in the rows of an output: a row of one segment
    (pair objective none) has its B, empty, after its closing special tokens."""
    frame = layout.single_frame if pair_objective == "none" else layout.pair_frame
    return frame[0] + frame[1], layout.b_type


def _records_in_order(
    parts: list[InstanceColumns], part: np.ndarray, row: np.ndarray, b_offset: int, b_type: int, chunk: int = 4096
):
    """Framed records of instance row[i] of parts[part[i]] for every i, made a few thousand at a time."""
    for start in range(0, len(part), chunk):
        step = slice(start, start + chunk)
        instances = InstanceColumns.gather(parts, part[step], row[step])
        yield serialize_framed(instances.features(b_offset, b_type)).data


def instance_languages(pieces: list[InstancePiece], part: np.ndarray, row: np.ndarray) -> list[str]:
    """The language of instance row[i] of pieces[part[i]] for every i (und where a piece carries none)."""
    tags = [
        np.array(p.language_tags, dtype=object)[p.languages]
        if p.languages is not None
        else np.full(len(p.rows), UNDETERMINED)
        for p in pieces
    ]
    return [tags[p][r] for p, r in zip(part.tolist(), row.tolist())]


def _parquet_bytes(
    instances: InstanceColumns,
    vocab_size: int,
    languages: list[str] | None = None,
    b_offset: int = 2,
    provenance: Provenance | None = None,
) -> bytes:
    sink = io.BytesIO()
    write_instances(instances_table(instances, vocab_size, languages, b_offset, provenance), sink)
    return sink.getvalue()
