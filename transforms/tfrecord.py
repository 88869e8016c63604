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


def pack_varint_rows(values: np.ndarray) -> tuple[bytes, list[int]]:
    """Rows of a non-negative int matrix as packed varints: one buffer and the row boundaries into it."""
    values = np.asarray(values)
    n, width = values.shape
    top = int(values.max()) if values.size else 0
    if top < 0x80:  # every value is one byte: the matrix is its own encoding
        return values.astype(np.uint8).tobytes(), list(range(0, n * width + 1, width))
    v = values.astype(np.uint64).reshape(-1)
    size = (top.bit_length() + 6) // 7
    shifts = np.arange(size, dtype=np.uint64) * np.uint64(7)
    groups = (v[:, None] >> shifts[None, :]) & np.uint64(0x7F)          # (values, size) 7-bit groups
    nbytes = 1 + (v[:, None] >= (np.uint64(1) << (shifts[1:] if size > 1 else shifts[:0]))[None, :]).sum(axis=1)
    used = np.arange(size)[None, :] < nbytes[:, None]
    more = np.arange(size)[None, :] < (nbytes - 1)[:, None]
    encoded = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    row_bounds = np.concatenate(([0], np.cumsum(nbytes.reshape(n, width).sum(axis=1))))
    return encoded[used].tobytes(), row_bounds.tolist()


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


class _Prefixes(dict):
    """name, payload length → header bytes, computed once per distinct length."""

    def __missing__(self, key: tuple[str, int]) -> bytes:
        value = self[key] = _entry_prefix(*key)
        return value


_PREFIXES = _Prefixes()
_U32 = struct.Struct("<I").pack
_U64 = struct.Struct("<Q").pack


def _packed_rows(name: str, values: np.ndarray) -> tuple[bytes, list[int]]:
    if name in _FLOAT_FEATURES:
        buf = np.ascontiguousarray(values, dtype="<f4")
        width = buf.shape[1] * 4
        return buf.tobytes(), list(range(0, len(buf) * width + 1, width))
    return pack_varint_rows(values)


def serialize_framed(features: dict[str, np.ndarray]) -> list[bytes]:
    """One framed TFRecord (bytes) per row of the 2-D arrays keyed by FEATURE_NAMES."""
    n = len(features["input_ids"])
    columns = [(name, *_packed_rows(name, features[name])) for name in FEATURE_NAMES]
    prefixes = _PREFIXES
    records = []
    for i in range(n):
        parts = []
        for name, buf, bounds in columns:
            payload = buf[bounds[i]:bounds[i + 1]]
            parts.append(prefixes[name, len(payload)])
            parts.append(payload)
        body = b"".join(parts)
        example = b"".join((b"\x0a", _vint(len(body)), body))
        length = _U64(len(example))
        records.append(b"".join((length, _U32(masked_crc32c(length)), example, _U32(masked_crc32c(example)))))
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


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
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
        key, pos = _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
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
                            x, pos = _read_varint(v, pos)
                            values.append(x - (1 << 64) if x >= 1 << 63 else x)
            features[name] = values
    return features
