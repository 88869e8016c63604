"""Fixed-length features of serialized tf.train.Examples, decoded for a whole batch of records at once.

No TensorFlow and no protobuf: every record's entries are walked in step, a few numpy operations per feature
entry over all records, so the cost per record is a small share of a Python call. Entries may come in any order
and features not asked for are skipped; int64 and float lists must be packed, as every writer packs them.
"""

from __future__ import annotations

import numpy as np

from bertcorpus.transforms.row_streams import mix64

_FIVE = np.arange(5)
_SEVENS = 7 * np.arange(5)


def _varints_at(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varint starting at each position (lengths inside a record: 5 bytes at most) and the position after it."""
    pos = np.minimum(pos, len(buf) - 1)
    first = buf[pos]
    if (first < 0x80).all():
        return first.astype(np.int64), pos + 1
    raw = buf[np.minimum(pos[:, None] + _FIVE, len(buf) - 1)].astype(np.int64)
    continued = np.cumprod(raw >= 0x80, axis=1)  # 1 up to the last byte of each varint
    if continued[:, -1].any():
        raise ValueError("a length field runs past five bytes")
    size = continued.sum(axis=1) + 1
    used = _FIVE[None, :] < size[:, None]
    return (((raw & 0x7F) << _SEVENS) * used).sum(axis=1), pos + size


def _expect(buf: np.ndarray, pos: np.ndarray, tag: int, what: str) -> None:
    if pos.size and (buf[np.minimum(pos, len(buf) - 1)] != tag).any():
        raise ValueError(f"{what} is not where a tf.train.Example has it")


def _payloads(data: bytes, at: np.ndarray, size: np.ndarray, lead: bytes = b"") -> np.ndarray:
    """The bytes data[at[i]:at[i] + size[i]] of every record, back to back (after `lead`)."""
    return np.frombuffer(b"".join([lead, *(data[a : a + n] for a, n in zip(at.tolist(), size.tolist()))]), np.uint8)


def _unpack_varints(data: bytes, at: np.ndarray, size: np.ndarray, width: int) -> np.ndarray:
    """Packed int64 lists of non-negative values, record i's in data[at[i]:at[i] + size[i]], each of `width`
    values → (n, width), int32 where every value is below 2**21.

    The lists are copied back to back behind a zero byte, and each value is decoded from its last byte (one
    without the continuation bit) back; the byte before a value's first byte is the end of the value before it
    or that zero, so no walk back runs into another value. Values of up to three bytes (token ids, positions)
    take a branch-free path."""
    n = len(at)
    raw = _payloads(data, at, size, b"\0")
    if (size == width).all() and (raw < 0x80).all():  # every value in one byte: masks, segment ids, labels
        return raw[1:].reshape(n, width).astype(np.int32)
    last = np.flatnonzero(raw < 0x80)[1:]
    record_ends = np.cumsum(size)  # the position in raw of each list's last byte
    counts = np.diff(np.searchsorted(last, record_ends, side="right"), prepend=0)
    if (counts != width).any():
        raise FeatureWidthError(int(counts[counts != width][0]))
    if (raw[record_ends[size > 0]] >= 0x80).any():  # a value would run on into the next record's list
        raise ValueError("a packed list ends inside a value")
    last = last.reshape(n, width)
    before = raw[last - 1]
    two = before >> 7  # 1 where the value has a byte before its last one
    earlier = raw[np.maximum(last - 2, 0)]
    three = two & (earlier >> 7)  # 1 where it has two
    if (three & (raw[np.maximum(last - 3, 0)] >> 7)).any():
        return _long_varints(raw, last)
    low = raw[last].astype(np.int32) << (7 * (two + three))
    return low | ((before & 0x7F) * two).astype(np.int32) << (7 * three) | (earlier & 0x7F) * three


def _long_varints(buf: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Varints of up to five bytes ending at positions `last`."""
    values = buf[last].astype(np.int64)
    going = np.ones(last.shape, bool)
    for back in range(1, 6):
        before = buf[last - back]
        going &= before >= 0x80
        if not going.any():
            return values
        if back == 5:
            raise ValueError("a packed value runs past five bytes")
        values = np.where(going, (values << 7) | (before & 0x7F), values)
    return values


class FeatureWidthError(ValueError):
    """A feature whose records hold another number of values than asked for."""

    def __init__(self, found: int):
        super().__init__(found)
        self.found = found


def parse_examples(
    data: bytes, starts: np.ndarray, ends: np.ndarray, spec: dict[str, tuple[bool, int]]
) -> dict[str, np.ndarray]:
    """Fixed-length features of serialized tf.train.Examples, all records at once (no TensorFlow, no protobuf).

    Record i is data[starts[i]:ends[i]]. spec: name → (is_float, width). Entries may come in
    any order and other features are skipped; int64 and float lists must be packed (as every writer packs them).
    The work is a few numpy steps per feature entry, each over all records. Raises ValueError where the bytes
    are not such Examples (FeatureWidthError where a feature has another length).
    """
    n = len(starts)
    buf = np.frombuffer(data, np.uint8)
    names = list(spec)
    keys = _KeyTable(names)
    _expect(buf, starts, 0x0A, "Example.features")
    size, pos = _varints_at(buf, starts + 1)
    if (pos + size != ends).any():
        raise ValueError("a record's length does not match its Example")
    at = np.full((len(names) + 1, n), -1, np.int64)  # the last row collects features not asked for
    sizes = np.zeros((len(names) + 1, n), np.int64)
    kinds = np.zeros((len(names) + 1, n), np.uint8)
    active = np.arange(n)
    while active.size:
        p = pos[active]
        _expect(buf, p, 0x0A, "a feature entry")
        entry_size, q = _varints_at(buf, p + 1)
        _expect(buf, q, 0x0A, "a feature name")
        key_size = buf[np.minimum(q + 1, len(buf) - 1)].astype(np.int64)
        feature = keys.lookup(buf, q + 2, key_size)
        value = q + 2 + key_size
        _expect(buf, value, 0x12, "a feature value")
        list_at = _varints_at(buf, value + 1)[1]
        list_size, inner = _varints_at(buf, list_at + 1)
        has_values = list_size > 0
        _expect(buf, inner[has_values], 0x0A, "a packed value list")
        values_size, values_at = _varints_at(buf, inner + 1)
        at[feature, active] = values_at
        sizes[feature, active] = np.where(has_values, values_size, 0)
        kinds[feature, active] = buf[np.minimum(list_at, len(buf) - 1)]
        pos[active] = q + entry_size
        active = active[pos[active] < ends[active]]
    out = {}
    for row, (name, (is_float, width)) in enumerate(spec.items()):
        if (at[row] < 0).any():
            raise ValueError(f"records have no feature {name!r}")
        if (kinds[row] != (0x12 if is_float else 0x1A)).any():
            raise ValueError(f"feature {name!r} is not a{' float' if is_float else 'n int64'} list")
        if is_float:
            if (sizes[row] != 4 * width).any():
                raise FeatureWidthError(int(sizes[row][sizes[row] != 4 * width][0]) // 4)
            out[name] = _payloads(data, at[row], sizes[row]).view("<f4").reshape(n, width)
        else:
            out[name] = _unpack_varints(data, at[row], sizes[row], width)
    return out


class _KeyTable:
    """Feature names → their row in parse_examples' tables (len(names) for any other name), by a hash of the
    name's bytes that is checked against the names themselves."""

    def __init__(self, names: list[str]):
        self.width = max(len(n) for n in names)
        self.weights = mix64(np.arange(self.width, dtype=np.uint64))
        encoded = np.zeros((len(names), self.width), np.uint64)
        for i, name in enumerate(names):
            encoded[i, : len(name)] = np.frombuffer(name.encode(), np.uint8)
        self.lengths = np.array([len(n) for n in names])
        hashes = self._hash(encoded, self.lengths)
        self.order = np.argsort(hashes)
        self.hashes = hashes[self.order]
        self.encoded = encoded

    def _hash(self, matrix: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        return (matrix * self.weights).sum(axis=1) + lengths.astype(np.uint64)

    def lookup(self, buf: np.ndarray, key_at: np.ndarray, key_size: np.ndarray) -> np.ndarray:
        matrix = buf[np.minimum(key_at[:, None] + np.arange(self.width), len(buf) - 1)].astype(np.uint64)
        matrix *= np.arange(self.width)[None, :] < np.minimum(key_size, self.width)[:, None]
        hashes = self._hash(matrix, key_size)
        slot = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
        row = self.order[slot]
        known = (self.hashes[slot] == hashes) & (self.lengths[row] == key_size)
        known &= (self.encoded[row] == matrix).all(axis=1)
        return np.where(known, row, len(self.lengths))


def joined_records(records: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(the records back to back, each one's start, each one's end) for parse_examples."""
    sizes = np.fromiter(map(len, records), np.int64, len(records))
    ends = np.cumsum(sizes)
    return b"".join(records), ends - sizes, ends
