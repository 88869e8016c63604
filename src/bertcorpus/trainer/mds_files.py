"""The MDS form of a `create` output (`--record-format mds`) as the loader reads it: each split's index.json checked
against the manifest and the shards, and the shards' samples read as the instances of the Parquet form
(transforms/instance_mds.py has the layout). Local shards are memory-mapped; remote ones read whole, once.
"""

from __future__ import annotations

import json
import mmap

import numpy as np

from bertcorpus.trainer.record_files import Dataset, InstanceRows, LoaderError, Shard
from bertcorpus.trainer.storage import is_remote, join, read_bytes
from bertcorpus.transforms.instance_mds import INDEX, MdsColumns, read_header, read_samples


def columns_of(dataset: Dataset, config: dict, where: str) -> MdsColumns:
    """The columns a shard or an index entry names, if they are those of a bertcorpus output of this objective."""
    columns = MdsColumns.from_config(config)
    if (
        columns not in MdsColumns.ours((dataset.pair_objective,))
        or config.get("compression")
        or config.get("format") != "mds"
    ):
        raise LoaderError(
            f"{where} is not an uncompressed bertcorpus MDS shard for --pair-objective {dataset.pair_objective} "
            f"(columns {', '.join(columns.names) or 'none'}, compression {config.get('compression')})"
        )
    return columns


def check_index(dataset: Dataset) -> None:
    """The split's index.json lists the manifest's shards, in order, with their sample counts."""
    folder = join(dataset.output_dir, f"seq{dataset.seq_length}", dataset.split)
    path = join(folder, INDEX)
    try:
        index = json.loads(read_bytes(path))
        entries = index["shards"]
        listed = [(e["raw_data"]["basename"], int(e["samples"])) for e in entries]
    except FileNotFoundError:
        raise LoaderError(f"{path} is missing: the MDS folder has no index of its shards") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LoaderError(f"{path} is not an MDS index: {e}") from None
    expected = [(s.name.rsplit("/", 1)[1], s.records) for s in dataset.shards]
    if listed != expected:
        differ = next(
            (f"{a[0]}: {a[1]} samples there, {b[1]} in the manifest" for a, b in zip(listed, expected) if a != b),
            f"{len(listed)} shards there, {len(expected)} in the manifest",
        )
        raise LoaderError(f"{path} disagrees with the shards of the manifest ({differ})")
    for entry in entries:
        columns_of(dataset, entry, f"{path} ({entry['raw_data']['basename']})")


class MdsShard:
    """Samples of one shard by number, as InstanceRows (ParquetShard's interface)."""

    def __init__(self, shard: Shard, dataset: Dataset):
        self.shard = shard
        self.seq_length = dataset.seq_length
        try:
            if is_remote(shard.path):
                self.data = read_bytes(shard.path)
            else:
                with open(shard.path, "rb") as f:
                    self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            samples, config = read_header(self.data)
        except (OSError, ValueError) as e:
            raise LoaderError(f"{shard.path} is not an MDS shard: {e}") from None
        self.columns = columns_of(dataset, config, shard.path)
        if samples != shard.records:
            raise LoaderError(f"{shard.path} holds {samples} samples, the manifest says {shard.records}")

    def rows(self, first: int, stop: int) -> InstanceRows:
        # A local shard is hashed once per version of the file (loader_checks.py), so one damaged in place with its
        # modification time put back is found here, by its fields, as the samples are read.
        try:
            rows = InstanceRows(*read_samples(self.data, first, stop, self.columns))
        except ValueError as e:
            raise LoaderError(f"{self.shard.path} is damaged: {e}") from None
        if (rows.length > self.seq_length).any() or (rows.segment_b_start > rows.length).any():
            raise LoaderError(f"{self.shard.path} has instances that do not fit seq_length {self.seq_length}")
        if len(rows.ids) != rows.length.sum():
            raise LoaderError(f"{self.shard.path}: a sample's len differs from its input_ids")
        if rows.ref is not None and (rows.ref >= np.repeat(rows.length, np.diff(rows.ref_starts))).any():
            raise LoaderError(f"{self.shard.path} has a chinese_ref position past its instance's tokens")
        return rows

    def lengths(self) -> np.ndarray:
        return self.rows(0, self.shard.records).length.astype(np.int32)


def streaming_dataset(output_dir, seq_length: int, split: str = "train", **kwargs):
    """MosaicML's StreamingDataset over the MDS form of a `create` output (local=OUT/seq{L}, split=...), after the
    checks above; kwargs go to StreamingDataset (shuffle, batch_size, ...). Needs the [mds] extra."""
    from bertcorpus.trainer.record_files import read_dataset

    dataset = read_dataset(str(output_dir), seq_length, split)
    if dataset.file_format != "mds":
        raise LoaderError(f"{output_dir} holds {dataset.file_format} files: create with --record-format mds")
    check_index(dataset)
    try:
        from streaming import StreamingDataset
    except ImportError:
        raise LoaderError(
            "reading MDS with StreamingDataset needs mosaicml-streaming: pip install 'bertcorpus[mds]' "
            "(our loader reads the MDS form without it)"
        ) from None
    return StreamingDataset(local=join(str(output_dir), f"seq{seq_length}"), split=split, **kwargs)
