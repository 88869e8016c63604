"""Counter-based random numbers with one stream per row, for masks that depend on the instance alone.

Masks drawn at load time must be a function of (seed, epoch, instance): not of the batch an instance lands in, of
the world size or of the worker that reads it. `RowStreams` gives each row of a batch its own stream, keyed by a
64-bit number per row, and offers the two draws `transforms.masking.mask_tokens` makes (`random` and `integers`,
shaped (rows, k)). Draw j of the c-th call for a row is splitmix64's finaliser of the row's key mixed with the
number (c, j): a pure function of those three numbers, so a row's draws never depend on the other rows, and the
value for column j of a call is the same whatever the width of the call (a row padded to a bin's edge or to the
full length draws the same numbers at its real positions).
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_COLUMNS_PER_CALL = 1 << 20  # more than any width or prediction count
_UNIT = 2.0**-53
_CACHED_DRAWS = 8192  # 64 KB of uint64: well inside any core's L2 cache


def mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64 (add the golden gamma, then its finaliser) of each uint64: a bijection that scatters bits."""
    return _mix_in_place(np.array(values, np.uint64, ndmin=1))  # arrays (not scalars) wrap around without a warning


def _mix_in_place(z: np.ndarray) -> np.ndarray:
    """mix64 over z's own memory: a batch's keys are one array of rows x width, allocated once."""
    z += _GOLDEN
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return z


def row_keys(base: int, epoch: int, instances: np.ndarray) -> np.ndarray:
    """The stream key of each instance in an epoch: base is a 64-bit key of the seed and the data set."""
    epoch_key = mix64(mix64(base) ^ mix64(epoch))
    return mix64(epoch_key ^ mix64(instances))


class RowStreams:
    """A stand-in for numpy's Generator in mask_tokens where row i draws from its own stream keyed by keys[i]."""

    def __init__(self, keys: np.ndarray):
        self.keys = np.asarray(keys, np.uint64)
        self.calls = 0

    def _counters(self, shape: tuple[int, int]) -> np.ndarray:
        """The mixed numbers (c, j) of this call's columns j; the next call is c + 1."""
        rows, columns = shape
        if rows != len(self.keys) or columns > _COLUMNS_PER_CALL:
            raise ValueError(f"a draw of shape {shape} from {len(self.keys)} row streams")
        counters = mix64(np.arange(columns, dtype=np.uint64) + np.uint64(self.calls * _COLUMNS_PER_CALL))
        self.calls += 1
        return counters

    def bits(self, shape: tuple[int, int]) -> np.ndarray:
        """Uniform 64-bit draws, the bits random() makes its floats of (their top 53)."""
        counters = self._counters(shape)
        out = np.empty(shape, np.uint64)
        # A few rows at a time, so that the six passes of the mix run over memory still in the core's cache: over
        # the whole batch at once (half a megabyte and more) the same arithmetic takes twice as long.
        step = max(1, _CACHED_DRAWS // max(shape[1], 1))
        for i in range(0, shape[0], step):
            _mix_in_place(np.bitwise_xor.outer(self.keys[i : i + step], counters, out=out[i : i + step]))
        return out

    def random(self, shape: tuple[int, int]) -> np.ndarray:
        """Uniform floats in [0, 1), 53 random bits each."""
        return _unit_floats(self.bits(shape))

    def integers(self, low: int, high: int, shape: tuple[int, int]) -> np.ndarray:
        """Uniform ints in [low, high) (the bias of a 53-bit float scaled to the range is below 2**-30)."""
        return _in_range(self.random(shape), low, high)

    def integers_at(self, low: int, high: int, where: np.ndarray) -> np.ndarray:
        """integers(low, high, where.shape)[where]: the same values, drawn only where asked (a tenth of the
        predictions take a random token)."""
        counters = self._counters(where.shape)
        rows, columns = np.nonzero(where)
        bits = _mix_in_place(self.keys[rows] ^ counters[columns])
        return _in_range(_unit_floats(bits), low, high)


def _unit_floats(bits: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) of the top 53 of each uint64 (bits is consumed)."""
    bits >>= np.uint64(11)
    floats = bits.astype(np.float64)
    floats *= _UNIT
    return floats


def _in_range(floats: np.ndarray, low: int, high: int) -> np.ndarray:
    """Ints in [low, high) of floats in [0, 1)."""
    return low + (floats * (high - low)).astype(np.int64)
