"""Stable hashing and seeded generators: every random choice derives from (global seed, stage, key)."""

from __future__ import annotations

import hashlib
import random

import numpy as np


def stable_hash(*parts: object) -> int:
    """A 64-bit hash that is the same in every process, run and Python version (unlike hash())."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def unit_interval(*parts: object) -> float:
    """A stable pseudo-random number in [0, 1) for the given key."""
    return stable_hash(*parts) / 2.0**64


def python_rng(*parts: object) -> random.Random:
    return random.Random(stable_hash(*parts))


def numpy_rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(stable_hash(*parts))
