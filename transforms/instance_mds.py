"""Unmasked instances as MosaicML streaming (MDS) shards: the form ModernBERT-class trainers read, written here with
our own code (a Beam job never imports mosaicml-streaming) and read back by StreamingDataset as it is.

An output's split is a folder seq{L}/{split}/ of uncompressed shards shard.NNNNN.mds and an index.json that lists
them. One sample per instance, unpadded, with the columns (MDS orders them by name):

    input_ids            ndarray:int64    [CLS] A [SEP] B [SEP]; with create --mds-ids compact, ndarray:uint16
                                          (ndarray:uint32 for a vocab past 65,536 ids)
    len                  uint16           len(input_ids)
    next_sentence_label  uint8            nsp: 1 = random next; sop: 1 = swapped (not with --pair-objective none)
    segment_b_start      uint16           position of B's first token (not with --pair-objective none)

The MDS layout, as the format defines it (version 2):
    shard file   [samples: u32] [offsets: u32 × (samples + 1), from the file's start] [config: JSON] [samples]
    sample       [the byte size of each variable-size column: u32 each] [each column's bytes, in column order]
    ndarray      [ndim << 2 | shape width code (0: u8, 1: u16, 2: u32)] [shape] [values]; dtype named in the column
    index.json   {"shards": [config + {"raw_data": {"basename", "bytes", "hashes"}, "samples", "zip_data"}],
                  "version": 2}, keys sorted
Everything here is a pure function of the instances, so a shard's bytes are the same on every runner.

Why int64 by default: ModernBERT's StreamingTextDataset reads a sample's ids as np.frombuffer(sample["input_ids"],
np.int64), which reads an ndarray:int64 column (and a bytes column of int64s) right and silently turns narrower ids
into garbage; its NoStreamingDataset keeps only the ndarray columns of a sample. MosaicML's StreamingDataset and our
loader read every encoding here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instance_parquet import WIDE_IDS
from bertcorpus.wordpiece.ranges import concat_ranges

MDS_VERSION = 2
INDEX = "index.json"
_SCALARS = {"uint8": "<u1", "uint16": "<u2", "uint32": "<u4"}
_ARRAYS = {"ndarray:uint16": "<u2", "ndarray:uint32": "<u4", "ndarray:int64": "<i8"}
ID_ENCODINGS = ("int64", "compact")  # create --mds-ids: what readers of int64 ids expect, or the narrowest that fits


def shard_basename(shard: int) -> str:
    return f"shard.{shard:05d}.mds"


@dataclass(frozen=True)
class MdsColumns:
    """The columns of an output's samples, sorted by name as MDS keeps them."""

    names: tuple[str, ...]
    encodings: tuple[str, ...]

    @staticmethod
    def for_output(vocab_size: int, pair_objective: str, ids: str) -> MdsColumns:
        """The columns for a vocab of vocab_size, a pair objective and an ids encoding of ID_ENCODINGS."""
        if ids == "int64":
            id_column = "ndarray:int64"
        else:
            id_column = "ndarray:uint32" if vocab_size > WIDE_IDS else "ndarray:uint16"
        columns = {"input_ids": id_column, "len": "uint16"}
        if pair_objective != "none":
            columns |= {"next_sentence_label": "uint8", "segment_b_start": "uint16"}
        names = tuple(sorted(columns))
        return MdsColumns(names, tuple(columns[n] for n in names))

    @property
    def sizes(self) -> list[int | None]:
        return [np.dtype(_SCALARS[e]).itemsize if e in _SCALARS else None for e in self.encodings]

    def config(self) -> dict:
        """What every shard's header and index entry say of its layout (nothing is compressed or hashed)."""
        return {
            "column_encodings": list(self.encodings),
            "column_names": list(self.names),
            "column_sizes": self.sizes,
            "compression": None,
            "format": "mds",
            "hashes": [],
            "size_limit": None,
            "version": MDS_VERSION,
        }


def _put(buffer: np.ndarray, at: np.ndarray, values: np.ndarray, dtype: str) -> None:
    """Write values[i] (little-endian, `dtype`) at byte at[i] of buffer, for every i at once."""
    width = np.dtype(dtype).itemsize
    raw = np.ascontiguousarray(values, dtype).view(np.uint8).reshape(len(values), width)
    buffer[(at[:, None] + np.arange(width)[None, :]).reshape(-1)] = raw.reshape(-1)


def mds_shard(instances: InstanceColumns, columns: MdsColumns) -> bytes:
    """The bytes of one MDS shard holding `instances` in order."""
    n = len(instances)
    header = json.dumps(columns.config(), sort_keys=True).encode()
    length = np.asarray(instances.length, np.int64)
    id_type = _ARRAYS[columns.encodings[columns.names.index("input_ids")]]
    id_width = np.dtype(id_type).itemsize
    shape_code = (length >= 256).astype(np.int64)  # the width of the stored shape: u8 below 256, else u16
    ids_bytes = 1 + (1 << shape_code) + length * id_width  # the input_ids column of each sample
    fixed = sum(size for size in columns.sizes if size)
    sizes = 4 + ids_bytes + fixed
    start = 4 + 4 * (n + 1) + len(header)
    offsets = start + np.concatenate(([0], np.cumsum(sizes)))
    if offsets[-1] >= 1 << 32:
        raise ValueError(f"an MDS shard of {offsets[-1]:,} bytes: past the format's 4 GiB (u32 offsets)")
    buffer = np.zeros(int(offsets[-1]), np.uint8)
    buffer[:4] = np.frombuffer(np.uint32(n).tobytes(), np.uint8)
    buffer[4 : 4 + 4 * (n + 1)] = np.frombuffer(offsets.astype("<u4").tobytes(), np.uint8)
    buffer[4 + 4 * (n + 1) : start] = np.frombuffer(header, np.uint8)
    at = offsets[:-1]
    _put(buffer, at, ids_bytes, "<u4")
    buffer[at + 4] = (1 << 2) | shape_code  # one dimension
    short = shape_code == 0
    _put(buffer, at[short] + 5, length[short], "<u1")
    _put(buffer, at[~short] + 5, length[~short], "<u2")
    # The ids: the real tokens of each padded row, placed one row after another.
    values_at = at + 5 + (1 << shape_code)
    real = np.arange(instances.input_ids.shape[1])[None, :] < length[:, None]
    flat = np.ascontiguousarray(instances.input_ids[real], id_type).view(np.uint8)
    buffer[concat_ranges(values_at, length * id_width)] = flat
    place = at + 4 + ids_bytes
    values = {
        "len": length,
        "next_sentence_label": instances.next_sentence,
        "segment_b_start": np.asarray(instances.len_a) + 2,
    }
    for name, encoding, size in zip(columns.names, columns.encodings, columns.sizes):
        if size:
            _put(buffer, place, values[name], _SCALARS[encoding])
            place = place + size
    return buffer.tobytes()


def index_entry(basename: str, samples: int, size: int, columns: MdsColumns) -> dict:
    return {
        **columns.config(),
        "raw_data": {"basename": basename, "bytes": size, "hashes": {}},
        "samples": samples,
        "zip_data": None,
    }


def index_bytes(entries: list[dict]) -> bytes:
    return json.dumps({"shards": entries, "version": MDS_VERSION}, sort_keys=True).encode()


# ------------------------------------------------------------------------------------------------ reading


def read_header(data) -> tuple[int, dict]:
    """(samples, config) of an MDS shard's bytes (a buffer of the whole file, or of its start)."""
    n = int(np.frombuffer(data, "<u4", 1)[0])
    first = int(np.frombuffer(data, "<u4", 1, 4)[0])
    return n, json.loads(bytes(data[4 + 4 * (n + 1) : first]))


def read_samples(data, first: int, stop: int, columns: MdsColumns) -> tuple[np.ndarray, ...]:
    """Samples first..stop-1 of a shard of ours (columns as MdsColumns.for_output gives them) from its bytes, as
    flat columns (ids, starts, length, segment_b_start, label): sample i's ids are ids[starts[i]:][:length[i]]."""
    buffer = np.frombuffer(data, np.uint8)
    offsets = np.frombuffer(data, "<u4", stop - first + 1, 4 + 4 * first).astype(np.int64)
    at = offsets[:-1]
    ids_bytes = _get(buffer, at, "<u4")
    shape_code = buffer[at + 4].astype(np.int64) & 3
    values_at = at + 5 + (1 << shape_code)
    width = np.dtype(_ARRAYS[columns.encodings[columns.names.index("input_ids")]]).itemsize
    length = (ids_bytes - 1 - (1 << shape_code)) // width
    raw = buffer[concat_ranges(values_at, length * width)]
    ids = raw.view(_ARRAYS[columns.encodings[columns.names.index("input_ids")]])
    place = at + 4 + ids_bytes
    found = {}
    for name, encoding, size in zip(columns.names, columns.encodings, columns.sizes):
        if size:
            found[name] = _get(buffer, place, _SCALARS[encoding])
            place = place + size
    starts = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64)
    label = found.get("next_sentence_label", np.zeros(len(at), np.int64))
    return ids, starts, found["len"], found.get("segment_b_start", found["len"]), label


def _get(buffer: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    raw = buffer[(at[:, None] + np.arange(width)[None, :]).reshape(-1)]
    return raw.view(dtype).astype(np.int64)
