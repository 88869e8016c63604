"""tf.train.Example records in TFRecord framing, written without TensorFlow.

The Beam workers must not import TensorFlow, and building Examples field by field through protobuf takes calls
per field and per record. The wire format of an Example with fixed-length int64/float lists is simple, so a whole
batch is encoded with a handful of numpy operations: every part of every record (frame header, Example header,
the fixed-width features, then each variable-width feature's header and packed varints, the footer) becomes a
column block of one padded byte matrix with a mask of its real bytes, and a single masked read lays the
records out back to back. Only the data CRC needs a call per record.

Message layout (field numbers from tensorflow/core/example/{example,feature}.proto):
Example{1: Features{1: repeated MapEntry{1: key, 2: Feature{2: FloatList{1: packed}, 3: Int64List{1: packed}}}}}
TFRecord framing: uint64 length, masked CRC32C of the length, data, masked CRC32C of the data.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import google_crc32c
import numpy as np

# The reference's features, in its order.
FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)
FLOAT_FEATURES = frozenset({"masked_lm_weights"})  # the rest are int64 lists
_LEN = 0x0A  # field 1, length-delimited: Example.features, Features.feature, MapEntry.key, List.value
_VALUE = 0x12  # MapEntry.value
_FLOAT_LIST, _INT64_LIST = 0x12, 0x1A  # Feature.float_list, Feature.int64_list
# Fixed-width features go first as one block per record (map order does not matter to parsers).
_FIXED = ("input_mask", "segment_ids", "masked_lm_weights", "next_sentence_labels")
_VARIABLE = ("input_ids", "masked_lm_positions", "masked_lm_ids")


def feature_spec(length: int, predictions: int) -> dict[str, tuple[bool, int]]:
    """The features of records of `length` tokens with `predictions` masked positions, in the reference's order, as
    example_decoding.parse_examples takes them: name → (is_float, width)."""
    widths = {
        "input_ids": length,
        "input_mask": length,
        "segment_ids": length,
        "masked_lm_positions": predictions,
        "masked_lm_ids": predictions,
        "masked_lm_weights": predictions,
        "next_sentence_labels": 1,
    }
    return {name: (name in FLOAT_FEATURES, widths[name]) for name in FEATURE_NAMES}


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _VarintTable:
    """Varint bytes of every value below a bound (at most 2**28: four bytes), so that a batch is encoded by lookups,
    not arithmetic. Each value's bytes are one little-endian uint32 word, padded with zeros, and which of them are
    real another: a gather of 4-byte words is numpy's fastest, three times the speed of gathering rows of bytes."""

    def __init__(self, bound: int):
        values = np.arange(bound, dtype=np.uint32)
        self.lengths = np.ones(bound, np.uint8)
        for shift in (7, 14, 21):
            self.lengths += values >= (1 << shift)
        self.words = np.zeros(bound, "<u4")
        self.used = np.zeros(bound, "<u4")
        for k in range(4):
            real = self.lengths > k
            more = (self.lengths > k + 1).astype(np.uint32) << 7
            self.words |= np.where(real, ((values >> (7 * k)) & 0x7F) | more, 0) << (8 * k)
            self.used |= real.astype(np.uint32) << (8 * k)


_TABLES: dict[int, _VarintTable] = {}


def _table_for(top: int) -> _VarintTable:
    bound = 1 << max(14, top.bit_length())  # tables of 16K, 32K, ... entries, built once each
    if bound not in _TABLES:
        _TABLES[bound] = _VarintTable(bound)
    return _TABLES[bound]


@dataclass
class _Padded:
    """One part of every record: a (records × width) byte matrix, which of its bytes are real, and how many."""

    data: np.ndarray  # uint8
    used: np.ndarray  # bool, same shape; None when every byte is real
    lengths: np.ndarray  # int64 per record


def _packed_varints(values: np.ndarray) -> _Padded:
    """Rows of a non-negative int matrix as packed varints."""
    values = np.asarray(values)
    n, width = values.shape
    top = int(values.max()) if values.size else 0
    if top < 0x80:  # every value is one byte: the matrix is its own encoding
        return _Padded(values.astype(np.uint8), None, np.full(n, width, np.int64))
    if top >= 1 << 28:
        raise ValueError(f"value {top} is too large for a feature of this job")
    table = _table_for(top)
    flat = values.reshape(-1)
    # np.take rather than fancy indexing: numpy's cheaper path for gathering table entries.
    return _Padded(
        np.take(table.words, flat).view(np.uint8).reshape(n, -1),
        np.take(table.used, flat).view(bool).reshape(n, -1),
        np.take(table.lengths, flat).reshape(n, width).sum(axis=1, dtype=np.int64),
    )


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _entry_prefix(name: str, payload_len: int) -> bytes:
    """Everything of one Features.feature field that comes before its packed values."""
    key = name.encode()
    list_len = 1 + len(varint(payload_len)) + payload_len
    tag = _FLOAT_LIST if name in FLOAT_FEATURES else _INT64_LIST
    feature_len = 1 + len(varint(list_len)) + list_len
    entry_head = bytes([_LEN, len(key)]) + key + bytes([_VALUE]) + varint(feature_len)
    entry_len = len(entry_head) + feature_len
    return (
        bytes([_LEN])
        + varint(entry_len)
        + entry_head
        + bytes([tag])
        + varint(list_len)
        + bytes([_LEN])
        + varint(payload_len)
    )


def _frame_header(length: int) -> bytes:
    """TFRecord header: uint64 length and the masked CRC32C of those 8 bytes."""
    raw = struct.pack("<Q", length)
    return raw + struct.pack("<I", masked_crc32c(raw))


class _ByLength:
    """make(length) for every length up to a bound, as a padded byte table, grown on demand.

    Shard writers may serialise in several threads of one worker: a grown table is built aside and replaces the
    old one in a single assignment, so a reader always sees one whole table."""

    def __init__(self, make):
        self.make = make
        self.table = _LengthTable(np.zeros((0, 0), np.uint8), np.zeros((0, 0), bool), np.zeros(0, np.int64), True)

    def rows(self, lengths: np.ndarray) -> _Padded:
        table = self.table
        top = int(lengths.max(initial=0))
        if top >= len(table.lengths):
            table = self.table = self._grown(1 << max(10, (top + 1).bit_length()))
        return _Padded(
            np.take(table.data, lengths, axis=0),
            None if table.fixed else np.take(table.used, lengths, axis=0),
            np.take(table.lengths, lengths),
        )

    def _grown(self, size: int) -> _LengthTable:
        items = [self.make(n) for n in range(size)]
        width = max(map(len, items))
        lengths = np.fromiter(map(len, items), np.int64, size)
        used = np.arange(width)[None, :] < lengths[:, None]
        data = np.frombuffer(b"".join(x.ljust(width, b"\0") for x in items), np.uint8).reshape(-1, width)
        return _LengthTable(data, used, lengths, bool(used.all()))


@dataclass(frozen=True)
class _LengthTable:
    data: np.ndarray  # (lengths, width) uint8: make(n), padded
    used: np.ndarray  # which of those bytes are real
    lengths: np.ndarray  # len(make(n))
    fixed: bool  # every make(n) has the same length


_FRAME_HEADERS = _ByLength(_frame_header)
_EXAMPLE_HEADS = _ByLength(lambda n: bytes([_LEN]) + varint(n))  # Example.features tag + length
_VARIABLE_PREFIXES = {name: _ByLength(lambda n, name=name: _entry_prefix(name, n)) for name in _VARIABLE}


def _fixed_block(features: dict[str, np.ndarray]) -> _Padded:
    """Every fixed-width feature of every record, headers included, as one (records × width) byte matrix."""
    n = len(features["input_ids"])
    columns = []
    for name in _FIXED:
        values = np.asarray(features[name])
        if name in FLOAT_FEATURES:
            payload = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(n, -1)
        elif values.dtype == bool:  # the masks: their bytes are their one-byte varints already
            payload = values.view(np.uint8).reshape(n, -1)
        else:
            if values.size and (values.min() < 0 or values.max() > 0x7F):
                raise ValueError(f"{name} must hold values in [0, 127]")
            payload = values.astype(np.uint8).reshape(n, -1)
        prefix = np.frombuffer(_entry_prefix(name, payload.shape[1]), np.uint8)
        columns += [np.broadcast_to(prefix, (n, len(prefix))), payload]
    block = np.concatenate(columns, axis=1)
    return _Padded(block, None, np.full(n, block.shape[1], np.int64))


@dataclass
class FramedBatch:
    """Framed TFRecords back to back: record i is data[offsets[i]:offsets[i + 1]]."""

    data: np.ndarray  # uint8; a buffer that file writes and compressors take as it is
    offsets: np.ndarray  # int64, len = records + 1


# Rows are encoded a few MB of padded bytes at a time: temporaries that small are reused by malloc, where
# larger ones are mapped afresh, and page faults on new maps cost more than the encoding itself.
_CHUNK_BYTES = 4 << 20


def serialize_framed(features: dict[str, np.ndarray]) -> FramedBatch:
    """The rows of the 2-D arrays keyed by FEATURE_NAMES as framed tf.train.Example records, in row order."""
    n = len(features["input_ids"])
    padded_row = 5 * features["input_ids"].shape[1] + 8 * features["masked_lm_ids"].shape[1] + 200
    step = max(1, _CHUNK_BYTES // padded_row)
    parts = [
        _serialize_rows({name: values[i : i + step] for name, values in features.items()}) for i in range(0, n, step)
    ] or [_serialize_rows(features)]
    lengths = np.concatenate([part[1] for part in parts])
    return FramedBatch(np.concatenate([part[0] for part in parts]), np.concatenate(([0], np.cumsum(lengths))))


def _serialize_rows(features: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(framed records back to back, the length of each)."""
    n = len(features["input_ids"])
    body = [_fixed_block(features)]
    for name in _VARIABLE:
        payload = _packed_varints(features[name])
        body += [_VARIABLE_PREFIXES[name].rows(payload.lengths), payload]
    body_len = sum(part.lengths for part in body)
    head = _EXAMPLE_HEADS.rows(body_len)
    data_len = head.lengths + body_len
    footer = _Padded(np.zeros((n, 4), np.uint8), None, np.full(n, 4, np.int64))  # filled in below
    parts = [_FRAME_HEADERS.rows(data_len), head, *body, footer]
    padded = np.concatenate([p.data for p in parts], axis=1)
    used = np.concatenate([np.ones(p.data.shape, bool) if p.used is None else p.used for p in parts], axis=1)
    out = np.compress(used.ravel(), padded.ravel())  # on flat arrays: a third of the time of padded[used]
    ends = np.cumsum(data_len + 16)
    # The data CRC of each record, then its footer: the one step that needs a call per record.
    raw = out.tobytes()
    crc = google_crc32c.value
    checks = np.fromiter((crc(raw[e - d - 4 : e - 4]) for e, d in zip(ends.tolist(), data_len.tolist())), np.uint32, n)
    masked = ((checks >> np.uint32(15)) | (checks << np.uint32(17))) + np.uint32(0xA282EAD8)
    out[(ends - 4)[:, None] + np.arange(4)] = masked.astype("<u4").view(np.uint8).reshape(n, 4)
    return out, data_len + 16


def is_frame_header(header: bytes) -> bool:
    """Whether 12 bytes are a TFRecord frame's start: a record's length and that length's masked CRC."""
    return len(header) == 12 and masked_crc32c(header[:8]) == struct.unpack("<I", header[8:])[0]


def iter_tfrecords(stream: BinaryIO) -> Iterator[bytes]:
    """The records of a TFRecord byte stream; both CRCs are checked."""
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("truncated TFRecord header")
        (length,) = struct.unpack("<Q", header[:8])
        if not is_frame_header(header):
            raise ValueError("TFRecord length CRC mismatch")
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) < length or len(footer) < 4:
            raise ValueError("truncated TFRecord")
        if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
            raise ValueError("TFRecord data CRC mismatch")
        yield data


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes):
    """(field number, wire type, value) of a protobuf message; value is an int or a bytes slice."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 2:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def parse_example(record: bytes) -> dict[str, list]:
    """A serialized tf.train.Example → {feature name: list of values}, without TensorFlow."""
    features: dict[str, list] = {}
    for number, _, features_msg in _fields(record):
        if number != 1:
            continue
        for _, _, entry in _fields(features_msg):
            name, feature = "", b""
            for n, _, v in _fields(entry):
                if n == 1:
                    name = v.decode()
                elif n == 2:
                    feature = v
            values: list = []
            for kind, _, lst in _fields(feature):
                for _, wire, v in _fields(lst):
                    if kind == 1:  # bytes_list
                        values.append(bytes(v))
                    elif kind == 2:  # float_list, packed (wire 2) or one value (wire 5)
                        values.extend(struct.unpack(f"<{len(v) // 4}f", v))
                    elif wire == 0:  # int64_list, unpacked
                        values.append(v)
                    else:  # int64_list, packed
                        pos = 0
                        while pos < len(v):
                            x, pos = read_varint(v, pos)
                            values.append(x - (1 << 64) if x >= 1 << 63 else x)
            features[name] = values
    return features
