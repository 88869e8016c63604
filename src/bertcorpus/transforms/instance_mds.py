"""Unmasked instances as MosaicML streaming (MDS) shards: the form ModernBERT-class trainers read, written here with
our own code (a Beam job never imports mosaicml-streaming) and read back by StreamingDataset as it is.

An output's split is a folder seq{L}/{split}/ of uncompressed shards shard.NNNNN.mds and an index.json that lists
them. One sample per instance, unpadded, with the columns (MDS orders them by name):

    chinese_ref          ndarray:uint16   the positions of the tokens that continue a segmenter's word (Hugging
                                          Face's chinese_ref), in every shard of an output whose instances have
                                          such words (Chinese text with create --whole-word-mask)
    input_ids            ndarray:int64    [CLS] A [SEP] B [SEP]; with create --mds-ids compact, ndarray:uint16
                                          (ndarray:uint32 for a vocab past 65,536 ids)
    language             str              the language of the document of segment A (BCP 47, as the documents')
    len                  uint16           len(input_ids)
    next_sentence_label  uint8            nsp: 1 = random next; sop: 1 = swapped (not with --pair-objective none)
    segment_b_start      uint16           position of B's first token (not with --pair-objective none)
    provenance           json             with create --provenance: the pieces of document text its tokens came
                                          from, [{"document", "start", "end", "segment"}, ...]

The MDS layout, as the format defines it (version 2):
    shard file   [samples: u32] [offsets: u32 × (samples + 1), from the file's start] [config: JSON] [samples]
    sample       [the byte size of each variable-size column: u32 each] [each column's bytes, in column order]
    ndarray      [ndim << 2 | shape width code (0: u8, 1: u16, 2: u32)] [shape] [values]; dtype named in the column
    index.json   {"shards": [config + {"raw_data": {"basename", "bytes", "hashes"}, "samples", "zip_data"}],
                  "version": 2}, keys sorted
Everything here is a pure function of the instances, so a shard's bytes are the same on every runner.

Why int64 by default: ModernBERT's StreamingTextDataset reads a sample's ids as np.frombuffer(sample["input_ids"],
np.int64), which reads an ndarray:int64 column (and a bytes column of int64s) right and silently turns narrower ids
into garbage; its NoStreamingDataset keeps only the ndarray columns of a sample, each taken for token ids (so not
chinese_ref, which only whole-word masking on Chinese writes). MosaicML's StreamingDataset and our loader read every
encoding and column here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instance_parquet import CHINESE_REF, LANGUAGE, WIDE_IDS
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.provenance import PROVENANCE, Provenance
from bertcorpus.wordpiece.ranges import concat_ranges

MDS_VERSION = 2
INDEX = "index.json"
_SCALARS = {"uint8": "<u1", "uint16": "<u2", "uint32": "<u4"}
_ARRAYS = {"ndarray:uint16": "<u2", "ndarray:uint32": "<u4", "ndarray:int64": "<i8"}
_TEXTS = ("str", "json")  # variable-size columns of bytes alone, no shape before them
ID_ENCODINGS = ("int64", "compact")  # create --mds-ids: what readers of int64 ids expect, or the narrowest that fits


@dataclass(frozen=True)
class MdsColumns:
    """The columns of an output's samples, sorted by name as MDS keeps them."""

    names: tuple[str, ...]
    encodings: tuple[str, ...]

    @staticmethod
    def for_output(
        vocab_size: int,
        pair_objective: str,
        ids: str,
        chinese_ref: bool = False,
        language: bool = True,
        provenance: bool = False,
    ) -> MdsColumns:
        """The columns for a vocab of vocab_size, a pair objective and an ids encoding of ID_ENCODINGS; with
        chinese_ref, the positions of the tokens that continue a word; with language, each sample's (create writes
        it; the shards of bertcorpus 0.1 lack it); with provenance, where its tokens came from."""
        if ids == "int64":
            id_column = "ndarray:int64"
        else:
            id_column = "ndarray:uint32" if vocab_size > WIDE_IDS else "ndarray:uint16"
        columns = {"input_ids": id_column, "len": "uint16"}
        if pair_objective != "none":
            columns |= {"next_sentence_label": "uint8", "segment_b_start": "uint16"}
        if chinese_ref:
            columns |= {CHINESE_REF: "ndarray:uint16"}
        if language:
            columns |= {LANGUAGE: "str"}
        if provenance:
            columns |= {PROVENANCE: "json"}
        names = tuple(sorted(columns))
        return MdsColumns(names, tuple(columns[n] for n in names))

    @staticmethod
    def from_config(config: dict) -> MdsColumns:
        """The columns that a shard's header or an index entry names (none where it names none)."""
        return MdsColumns(tuple(config.get("column_names") or ()), tuple(config.get("column_encodings") or ()))

    @staticmethod
    def ours(pair_objectives: tuple[str, ...]) -> set[MdsColumns]:
        """The columns of every output create may write with these pair objectives."""
        return {
            MdsColumns.for_output(size, objective, ids, chinese_ref, language, provenance)
            for size in (0, WIDE_IDS + 1)
            for objective in pair_objectives
            for ids in ID_ENCODINGS
            for chinese_ref in (False, True)
            for language in (False, True)
            for provenance in (False, True)
        }

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


def _arrays(
    instances: InstanceColumns, columns: MdsColumns, languages: list[str] | None, provenance: Provenance | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{variable-size column: (each sample's number of values, the values of every sample, one after another)}."""
    length = np.asarray(instances.length, np.int64)
    real = np.arange(instances.input_ids.shape[1])[None, :] < length[:, None]
    id_type = _ARRAYS[columns.encodings[columns.names.index("input_ids")]]
    found = {"input_ids": (length, np.ascontiguousarray(instances.input_ids[real], id_type))}
    if CHINESE_REF in columns.names:  # every sample has one, empty where no token continues a word
        continues = np.zeros_like(real) if instances.word_continues is None else instances.word_continues & real
        found[CHINESE_REF] = (continues.sum(axis=1).astype(np.int64), np.nonzero(continues)[1].astype("<u2"))
    if LANGUAGE in columns.names:
        tags = [tag.encode("utf-8") for tag in (languages or [UNDETERMINED] * len(instances))]
        found[LANGUAGE] = (np.array([len(t) for t in tags], np.int64), np.frombuffer(b"".join(tags), np.uint8))
    if PROVENANCE in columns.names:
        pieces = [json.dumps(row, separators=(",", ":")).encode("utf-8") for row in provenance.rows()]
        found[PROVENANCE] = (np.array([len(p) for p in pieces], np.int64), np.frombuffer(b"".join(pieces), np.uint8))
    return found


def mds_shard(
    instances: InstanceColumns,
    columns: MdsColumns,
    languages: list[str] | None = None,
    b_offset: int = 2,
    provenance: Provenance | None = None,
) -> bytes:
    """The bytes of one MDS shard holding `instances` in order (with each one's language where the columns have
    them: und where `languages` gives none)."""
    n = len(instances)
    header = json.dumps(columns.config(), sort_keys=True).encode()
    arrays = _arrays(instances, columns, languages, provenance)
    # A variable-size column of a sample: a str's UTF-8 bytes, or an ndarray of one dimension: its shape's width
    # (u8 below 256 values, else u16), the shape, the values.
    encodings = dict(zip(columns.names, columns.encodings))
    shape_codes = {name: (count >= 256).astype(np.int64) for name, (count, _) in arrays.items()}
    column_bytes = {
        name: count * values.itemsize + (0 if encodings[name] in _TEXTS else 1 + (1 << shape_codes[name]))
        for name, (count, values) in arrays.items()
    }
    fixed = sum(size for size in columns.sizes if size)
    sizes = 4 * len(arrays) + sum(column_bytes.values()) + fixed
    start = 4 + 4 * (n + 1) + len(header)
    offsets = start + np.concatenate(([0], np.cumsum(sizes)))
    if offsets[-1] >= 1 << 32:
        raise ValueError(f"an MDS shard of {offsets[-1]:,} bytes: past the format's 4 GiB (u32 offsets)")
    buffer = np.zeros(int(offsets[-1]), np.uint8)
    buffer[:4] = np.frombuffer(np.uint32(n).tobytes(), np.uint8)
    buffer[4 : 4 + 4 * (n + 1)] = np.frombuffer(offsets.astype("<u4").tobytes(), np.uint8)
    buffer[4 + 4 * (n + 1) : start] = np.frombuffer(header, np.uint8)
    at = offsets[:-1]
    variable = [name for name in columns.names if name in arrays]
    for number, name in enumerate(variable):
        _put(buffer, at + 4 * number, column_bytes[name], "<u4")
    place = at + 4 * len(variable)
    scalars = {
        "len": instances.length,
        "next_sentence_label": instances.next_sentence,
        "segment_b_start": np.asarray(instances.len_a) + b_offset,
    }
    for name, encoding, size in zip(columns.names, columns.encodings, columns.sizes):
        if size:
            _put(buffer, place, scalars[name], _SCALARS[encoding])
            place = place + size
            continue
        count, values = arrays[name]
        values_at = place
        if encoding not in _TEXTS:
            code = shape_codes[name]
            buffer[place] = (1 << 2) | code  # one dimension
            short = code == 0
            _put(buffer, place[short] + 1, count[short], "<u1")
            _put(buffer, place[~short] + 1, count[~short], "<u2")
            values_at = place + 1 + (1 << code)
        buffer[concat_ranges(values_at, count * values.itemsize)] = values.view(np.uint8)
        place = place + column_bytes[name]
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


# Every field of a shard that says where or how large something is gets checked before it is used: a damaged one
# is a ValueError that says which sample and how, never an index past the file or an array sized by the damage (a
# size field of 0xFFFFFFF0 asked numpy for 32 GiB).


def read_header(data) -> tuple[int, dict]:
    """(samples, config) of an MDS shard's bytes (a buffer of the whole file); ValueError where they are no whole
    shard: too short, cut short or extended (its offsets end elsewhere than the file), or a config that is no JSON
    object."""
    size = len(data)
    if size < 8:
        raise ValueError(f"{size} bytes, too few for an MDS shard's header")
    n = int(np.frombuffer(data, "<u4", 1)[0])
    table_end = 4 + 4 * (n + 1)
    if table_end > size:
        raise ValueError(f"its header counts {n:,} samples, whose offsets take {table_end:,} bytes of its {size:,}")
    first, end = (int(np.frombuffer(data, "<u4", 1, at)[0]) for at in (4, table_end - 4))
    if not table_end <= first <= end:
        raise ValueError(
            f"its samples run from byte {first:,} to {end:,}, which no header of {table_end:,} bytes gives"
        )
    if end != size:
        raise ValueError(f"its samples end at byte {end:,}, but the file has {size:,}: cut short or added to")
    config = json.loads(bytes(data[table_end:first]))
    if not isinstance(config, dict):
        raise ValueError("its header's config is not a JSON object")
    return n, config


def _sample_offsets(data, first: int, stop: int) -> np.ndarray:
    """Where samples first..stop-1 of a shard (read_header checked) start, and where the last one ends: each sample
    after the one before it."""
    n = int(np.frombuffer(data, "<u4", 1)[0])
    if not 0 <= first <= stop <= n:
        raise ValueError(f"samples {first:,} to {stop - 1:,} asked of a shard of {n:,}")
    offsets = np.frombuffer(data, "<u4", stop - first + 1, 4 + 4 * first).astype(np.int64)
    if (backwards := np.flatnonzero(np.diff(offsets) < 0)).size:
        raise ValueError(f"sample {first + int(backwards[0]):,} ends before it starts")
    return offsets


def _refuse_where(bad: np.ndarray, first: int, why) -> None:
    """ValueError naming the first sample (counted from `first`) where `bad` holds, with why(its index)."""
    if (found := np.flatnonzero(bad)).size:
        raise ValueError(f"sample {first + int(found[0]):,}: {why(int(found[0]))}")


def _read_columns(data, first: int, stop: int, columns: MdsColumns) -> tuple[dict, dict]:
    """Samples first..stop-1 of a shard of ours: ({fixed-size column: its values}, {variable-size column: (the
    values of every sample, one after another, each sample's number of values)}); a str column's values are its
    UTF-8 bytes. ValueError where a sample's sizes do not fit its place in the file."""
    buffer = np.frombuffer(data, np.uint8)
    offsets = _sample_offsets(data, first, stop)
    at, extent = offsets[:-1], np.diff(offsets)
    variable = [name for name, size in zip(columns.names, columns.sizes) if not size]
    head = 4 * len(variable) + sum(size for size in columns.sizes if size)
    _refuse_where(extent < head, first, lambda i: f"{extent[i]:,} bytes, fewer than its fixed fields' {head}")
    column_bytes = {name: _get(buffer, at + 4 * number, "<u4") for number, name in enumerate(variable)}
    total = head + sum(column_bytes.values(), np.zeros(len(at), np.int64))
    _refuse_where(
        total != extent,
        first,
        lambda i: f"its columns' sizes add up to {total[i]:,} bytes, its offsets give it {extent[i]:,}",
    )
    place = at + 4 * len(variable)
    fixed, arrays = {}, {}
    for name, encoding, size in zip(columns.names, columns.encodings, columns.sizes):
        if size:
            fixed[name] = _get(buffer, place, _SCALARS[encoding])
            place = place + size
            continue
        if encoding in _TEXTS:
            arrays[name] = buffer[concat_ranges(place, column_bytes[name])], column_bytes[name]
        else:
            arrays[name] = _ndarray_values(buffer, place, column_bytes[name], encoding, name, first)
        place = place + column_bytes[name]
    return fixed, arrays


def read_provenance(data, first: int, stop: int, columns: MdsColumns) -> list[list[dict]] | None:
    """Samples first..stop-1's provenance (create --provenance), or None where the shard has none."""
    if PROVENANCE not in columns.names:
        return None
    _, arrays = _read_columns(data, first, stop, columns)
    values, sizes = arrays[PROVENANCE]
    ends = np.cumsum(sizes)
    return [json.loads(bytes(values[end - size : end])) for end, size in zip(ends.tolist(), sizes.tolist())]


def _ndarray_values(buffer: np.ndarray, place: np.ndarray, nbytes: np.ndarray, encoding: str, name: str, first: int):
    """(values, each sample's count) of a one-dimensional ndarray column whose samples start at `place` and take
    `nbytes` (their sizes, which add up to the samples'), after its shape byte and its shape are checked against
    those sizes."""
    _refuse_where(nbytes < 1, first, lambda i: f"its {name} has no bytes, not even its shape's")
    code = buffer[place].astype(np.int64)
    _refuse_where((code >> 2 != 1) | (code & 3 > 2), first, lambda i: f"its {name} is no one-dimensional array")
    width, item = 1 << (code & 3), np.dtype(_ARRAYS[encoding]).itemsize
    values_bytes = nbytes - 1 - width
    _refuse_where(
        (values_bytes < 0) | (values_bytes % item != 0),
        first,
        lambda i: f"its {name} of {nbytes[i]:,} bytes holds no whole {encoding.removeprefix('ndarray:')} values",
    )
    count = values_bytes // item
    shape = np.zeros(len(place), np.int64)
    for shape_width in (1, 2, 4):
        chosen = width == shape_width
        shape[chosen] = _get(buffer, place[chosen] + 1, f"<u{shape_width}")
    _refuse_where(
        shape != count, first, lambda i: f"its {name}'s shape says {shape[i]:,} values, its size {count[i]:,}"
    )
    values = buffer[concat_ranges(place + 1 + width, count * item)].view(_ARRAYS[encoding])
    return values, count


def read_samples(data, first: int, stop: int, columns: MdsColumns) -> tuple[np.ndarray | None, ...]:
    """Samples first..stop-1 of a shard of ours (columns as MdsColumns.for_output gives them) from its bytes, as
    flat columns (ids, starts, length, segment_b_start, label, ref, ref_starts): sample i's ids are
    ids[starts[i]:][:length[i]], and its chinese_ref positions ref[ref_starts[i]:ref_starts[i + 1]] (ref and
    ref_starts None where the shard has no chinese_ref)."""
    fixed, arrays = _read_columns(data, first, stop, columns)
    ids, length = arrays["input_ids"]
    starts = np.concatenate(([0], np.cumsum(length)[:-1])).astype(np.int64)
    label = fixed.get("next_sentence_label", np.zeros(len(length), np.int64))
    ref = ref_starts = None
    if CHINESE_REF in arrays:
        positions, count = arrays[CHINESE_REF]
        ref, ref_starts = positions.astype(np.int64), np.concatenate(([0], np.cumsum(count))).astype(np.int64)
    return ids, starts, fixed["len"], fixed.get("segment_b_start", fixed["len"]), label, ref, ref_starts


def read_languages(data, first: int, stop: int, columns: MdsColumns) -> list[str] | None:
    """The language of samples first..stop-1 of a shard of ours; None where the shard has no language column."""
    if LANGUAGE not in columns.names:
        return None
    text, size = _read_columns(data, first, stop, columns)[1][LANGUAGE]
    ends = np.cumsum(size).tolist()
    raw = text.tobytes()
    return [raw[a:b].decode("utf-8") for a, b in zip([0, *ends[:-1]], ends)]


def _get(buffer: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    raw = buffer[(at[:, None] + np.arange(width)[None, :]).reshape(-1)]
    return raw.view(dtype).astype(np.int64)
