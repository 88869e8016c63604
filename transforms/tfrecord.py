"""tf.train.Example records in TFRecord framing, written without TensorFlow.

The Beam workers must not import TensorFlow, and building Examples field by field through protobuf costs
microseconds per field. The wire format of an Example with fixed-length int64/float lists is simple, so a batch
is encoded in two steps: numpy packs every list of the batch at once (varints, 0/1 bytes, little-endian
floats), then one short loop joins each record's slices with precomputed headers and frames it for TFRecord
(uint64 length, masked CRC32C of the length, data, masked CRC32C of the data).

Message layout (field numbers from tensorflow/core/example/{example,feature}.proto):
Example{1: Features{1: repeated MapEntry{1: key, 2: Feature{2: FloatList{1: packed}, 3: Int64List{1: packed}}}}}
"""
from __future__ import annotations

import struct
from typing import BinaryIO, Iterator

import google_crc32c
import numpy as np

# The reference's features, in its order.
FEATURE_NAMES = ("input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                 "masked_lm_weights", "next_sentence_labels")
_FLOAT_FEATURES = frozenset({"masked_lm_weights"})
_LEN = 0x0A           # field 1, length-delimited: Example.features, Features.feature, MapEntry.key, List.value
_VALUE = 0x12         # MapEntry.value
_FLOAT_LIST, _INT64_LIST = 0x12, 0x1A  # Feature.float_list, Feature.int64_list


def varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_VARINTS = [varint(n) for n in range(1 << 14)]  # every length a record of up to 16 KB can hold


def _vint(n: int) -> bytes:
    return _VARINTS[n] if n < (1 << 14) else varint(n)


class _VarintTable:
    """Varint bytes of every value below a bound, so that a batch is encoded by lookups, not arithmetic."""

    def __init__(self, bound: int):
        values = np.arange(bound, dtype=np.uint64)
        self.width = max(1, (int(bound - 1).bit_length() + 6) // 7)
        shifts = np.arange(self.width, dtype=np.uint64) * np.uint64(7)
        self.lengths = np.ones(bound, np.int64)
        for shift in shifts[1:]:
            self.lengths += values >= (np.uint64(1) << shift)
        more = np.arange(self.width)[None, :] < (self.lengths - 1)[:, None]
        self.bytes = (((values[:, None] >> shifts[None, :]) & np.uint64(0x7F)) | (more.astype(np.uint64) << 7)
                      ).astype(np.uint8)
        self.used = np.arange(self.width)[None, :] < self.lengths[:, None]
        self.bound = bound


_TABLES: dict[int, _VarintTable] = {}


def _table_for(top: int) -> _VarintTable:
    bound = 1 << max(14, top.bit_length())  # tables of 16K, 32K, ... entries, built once each
    if bound not in _TABLES:
        _TABLES[bound] = _VarintTable(bound)
    return _TABLES[bound]


def pack_varint_rows(values: np.ndarray) -> tuple[bytes, list[int]]:
    """Rows of a non-negative int matrix as packed varints: one buffer and the row boundaries into it."""
    values = np.asarray(values)
    n, width = values.shape
    top = int(values.max()) if values.size else 0
    if top < 0x80:  # every value is one byte: the matrix is its own encoding
        return values.astype(np.uint8).tobytes(), list(range(0, n * width + 1, width))
    if top >= 1 << 28:
        raise ValueError(f"value {top} is too large for a feature of this job")
    table = _table_for(top)
    flat = values.reshape(-1)
    # np.take is many times faster than fancy indexing for gathering whole table rows.
    encoded = np.take(table.bytes, flat, axis=0)[np.take(table.used, flat, axis=0)]
    row_bounds = np.concatenate(([0], np.cumsum(np.take(table.lengths, flat).reshape(n, width).sum(axis=1))))
    return encoded.tobytes(), row_bounds.tolist()


def masked_crc32c(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _entry_prefix(name: str, payload_len: int) -> bytes:
    """Everything of one Features.feature field that comes before its packed values."""
    key = name.encode()
    list_len = 1 + len(_vint(payload_len)) + payload_len
    tag = _FLOAT_LIST if name in _FLOAT_FEATURES else _INT64_LIST
    feature_len = 1 + len(_vint(list_len)) + list_len
    entry_head = bytes([_LEN, len(key)]) + key + bytes([_VALUE]) + _vint(feature_len)
    entry_len = len(entry_head) + feature_len
    return (bytes([_LEN]) + _vint(entry_len) + entry_head + bytes([tag]) + _vint(list_len)
            + bytes([_LEN]) + _vint(payload_len))


class _ByLength(list):
    """length → bytes from `make(length)`, kept in a list that grows on demand (indexing beats hashing)."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def upto(self, length: int) -> "_ByLength":
        while len(self) <= length:
            self.append(self.make(len(self)))
        return self


def _frame_header(length: int) -> bytes:
    """TFRecord header: uint64 length and the masked CRC32C of those 8 bytes."""
    raw = struct.pack("<Q", length)
    return raw + struct.pack("<I", masked_crc32c(raw))


_FRAME_HEADERS = _ByLength(_frame_header)
_EXAMPLE_HEADS = _ByLength(lambda n: b"\x0a" + _vint(n))  # Example.features tag + length
_U32 = struct.Struct("<I").pack
# Fixed-width features go first as one block per record (map order does not matter to parsers).
_FIXED = ("input_mask", "segment_ids", "masked_lm_weights", "next_sentence_labels")
_VARIABLE = ("input_ids", "masked_lm_positions", "masked_lm_ids")
_VARIABLE_PREFIXES = {name: _ByLength(lambda n, name=name: _entry_prefix(name, n)) for name in _VARIABLE}


def _fixed_block(features: dict[str, np.ndarray]) -> tuple[bytes, int]:
    """Every fixed-width feature of every record, headers included, as one (records × width) byte matrix."""
    n = len(features["input_ids"])
    columns = []
    for name in _FIXED:
        values = np.asarray(features[name])
        if name in _FLOAT_FEATURES:
            payload = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(n, -1)
        else:
            if values.size and (values.min() < 0 or values.max() > 0x7F):
                raise ValueError(f"{name} must hold values in [0, 127]")
            payload = values.astype(np.uint8).reshape(n, -1)
        prefix = np.frombuffer(_entry_prefix(name, payload.shape[1]), np.uint8)
        columns += [np.broadcast_to(prefix, (n, len(prefix))), payload]
    block = np.concatenate(columns, axis=1)
    return block.tobytes(), block.shape[1]


def serialize_framed(features: dict[str, np.ndarray]) -> list[bytes]:
    """One framed TFRecord (bytes) per row of the 2-D arrays keyed by FEATURE_NAMES."""
    n = len(features["input_ids"])
    fixed, width = _fixed_block(features)
    (ids, ids_at), (pos, pos_at), (lbl, lbl_at) = (pack_varint_rows(features[name]) for name in _VARIABLE)
    longest = max(np.diff(ids_at).max(initial=0), np.diff(pos_at).max(initial=0), np.diff(lbl_at).max(initial=0))
    pre_ids, pre_pos, pre_lbl = (_VARIABLE_PREFIXES[name].upto(int(longest)) for name in _VARIABLE)
    heads = _EXAMPLE_HEADS.upto(width + 3 * (int(longest) + 16))
    frames = _FRAME_HEADERS.upto(len(heads) + 8)
    crc, extend, join = google_crc32c.value, google_crc32c.extend, b"".join
    records = []
    append = records.append
    for i in range(n):
        a, b, c = ids[ids_at[i]:ids_at[i + 1]], pos[pos_at[i]:pos_at[i + 1]], lbl[lbl_at[i]:lbl_at[i + 1]]
        body = join((fixed[i * width:(i + 1) * width], pre_ids[len(a)], a, pre_pos[len(b)], b, pre_lbl[len(c)], c))
        head = heads[len(body)]
        check = extend(crc(head), body)
        append(join((frames[len(head) + len(body)], head, body,
                     _U32((((check >> 15) | (check << 17)) + 0xA282EAD8) & 0xFFFFFFFF))))
    return records


def iter_tfrecords(stream: BinaryIO) -> Iterator[bytes]:
    """The records of a TFRecord byte stream; both CRCs are checked."""
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("truncated TFRecord header")
        (length,) = struct.unpack("<Q", header[:8])
        if masked_crc32c(header[:8]) != struct.unpack("<I", header[8:])[0]:
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
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
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
