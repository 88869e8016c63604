"""What the loader checks before it serves a batch: the numbers a user types (epochs, batch sizes, a saved state),
that every shard is still the file `create` wrote, and that a cached index fits its shard.

A shard is checked against its manifest entry in three ways, each where it is cheap (docs/loader.md has the table):
its size whenever a loader is made (from one listing of the folder) and whenever a process opens it; its rows or
records when it is opened or indexed; and, for a local shard, its sha256 once per version of the file on this
machine: a marker in the index cache, keyed by the shard's sha256 and path, remembers the size, modification time
and inode that were hashed, so that the next loader hashes only a file that was written since.
"""

from __future__ import annotations

import hashlib
import numbers
import os
import warnings

import numpy as np

from bertcorpus.trainer.record_files import (
    Dataset,
    IndexCache,
    LoaderError,
    ParquetShard,
    Shard,
    changed,
    scan_tfrecord_offsets,
)
from bertcorpus.trainer.storage import is_remote

EPOCHS = 2**63  # epochs are numbered 0 .. 2**63 - 1: an int64, which the mask streams mix as a 64-bit word
_HASH_CHUNK = 8 << 20


def whole_number(name: str, value, low: int, high: int | None = None) -> int:
    """value as an int, when it is a whole number in [low, high); else a LoaderError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LoaderError(f"{name} must be a whole number, not {value!r}")
    if value < low or (high is not None and value >= high):
        span = f"at least {low:,}" if high is None else f"in [{low:,}, {high:,})"
        raise LoaderError(f"{name} must be {span}, not {value:,}")
    return int(value)


def yes_or_no(name: str, value) -> bool:
    """value, when it is a bool (Python's or numpy's); a string such as "false" would otherwise count as True."""
    if not isinstance(value, (bool, np.bool_)):
        raise LoaderError(f"{name} must be True or False, not {value!r}")
    return bool(value)


def epoch_number(value) -> int:
    return whole_number("epoch", value, 0, EPOCHS)


def check_state(state, mine: dict, batches: int) -> tuple[int, int]:
    """(epoch, batch) of a state saved by state_dict(), checked for its keys and the types of its numbers;
    `mine` is this loader's own state (the keys a state has), `batches` the batches of an epoch."""
    if not isinstance(state, dict) or state.get("version") != mine["version"]:
        raise LoaderError("not a state saved by PretrainingLoader.state_dict()")
    missing = [key for key in mine if key not in state]
    if missing:
        raise LoaderError(f"the saved state has no {', '.join(missing)}: not a whole PretrainingLoader.state_dict()")
    epoch = epoch_number(state["epoch"])
    batch = whole_number("the saved state's batch", state["batch"], 0)
    if batch >= batches:
        raise LoaderError(f"the saved state's batch {batch:,} is past the end of an epoch of {batches:,} batches")
    return epoch, batch


# ------------------------------------------------------------------------------------------------ shards


def file_version(path: str) -> np.ndarray:
    """What tells one version of a local file from another without reading it: size, modification time, inode."""
    st = os.stat(path)
    return np.array([st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev], np.int64)


def _marker(shard: Shard) -> str:
    where = hashlib.sha256(os.path.realpath(shard.path).encode()).hexdigest()[:16]
    return f"verified-{where}"


def is_verified(shard: Shard, cache: IndexCache) -> bool:
    """Whether this version of a local shard was hashed on this machine and found to be the manifest's file."""
    found = cache.load(shard.sha256, _marker(shard))
    return found is not None and np.array_equal(found, file_version(shard.path))


def mark_verified(shard: Shard, cache: IndexCache, version: np.ndarray) -> None:
    cache.store(shard.sha256, _marker(shard), version)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def damaged_part(shard: Shard) -> str:
    """Where a Parquet shard whose sha256 differs can no longer be decoded, if anywhere (read on that error only)."""
    if not shard.path.endswith(".parquet"):
        return ""
    try:
        ParquetShard(shard, 0).check_readable()
    except LoaderError as e:
        reason = str(e).replace(f"corrupt Parquet file {shard.path}: ", "").replace(f"{shard.path} ", "it ")
        return f"; {reason}"
    return ""


def verify_sha256(shard: Shard, cache: IndexCache) -> None:
    """Hash a local shard (about 1.3 GB/s on one core) unless this version of it was hashed before."""
    if is_remote(shard.path) or not shard.sha256 or is_verified(shard, cache):
        return
    version = file_version(shard.path)
    if file_sha256(shard.path) != shard.sha256:
        raise changed(shard.path, f"its sha256 differs{damaged_part(shard)}")
    if np.array_equal(version, file_version(shard.path)):  # not rewritten while it was read
        mark_verified(shard, cache, version)


def check_bin_sizes(dataset: Dataset, edges: np.ndarray, counts: np.ndarray, global_batch: int) -> None:
    """With drop_remainder, a length bin smaller than a global batch is never served: an error when that leaves no
    batch at all, a warning naming the bins otherwise."""
    small = counts < global_batch
    if not small.any():
        return
    bins = ", ".join(f"up to {e}: {n:,}" for e, n in zip(edges[small].tolist(), counts[small].tolist()))
    where = f"the {dataset.split} split of seq{dataset.seq_length}"
    if small.all():
        raise LoaderError(
            f"every length bin of {where} holds fewer instances than a global batch of {global_batch:,} ({bins}), "
            f"so an epoch has no batch: use a smaller batch_size, or drop_remainder=False"
        )
    warnings.warn(
        f"{int(counts[small].sum()):,} instances of {where} are in length bins smaller than a global batch of "
        f"{global_batch:,} ({bins}) and are left out of every epoch; drop_remainder=False serves them",
        stacklevel=4,
    )


def scan_and_verify(shard: Shard, cache: IndexCache) -> np.ndarray:
    """A TFRecord shard's offsets from a scan of its frames, which also hashes it (a local shard is then marked as
    verified), checked against the manifest's record count."""
    version = None if is_remote(shard.path) else file_version(shard.path)
    offsets = scan_tfrecord_offsets(shard.path, shard.sha256)
    if len(offsets) - 1 != shard.records:
        raise LoaderError(f"{shard.path} holds {len(offsets) - 1} records, the manifest says {shard.records}")
    if version is not None and np.array_equal(version, file_version(shard.path)):
        mark_verified(shard, cache, version)
    return offsets


def index_fits(found: np.ndarray, what: str, shard: Shard, seq_length: int) -> bool:
    """Whether a cached index can be this shard's (offsets or instance lengths); a cache file that was damaged or
    written for other bytes is then built again rather than blamed on the shard."""
    return offsets_fit(found, shard) if what == "offsets" else lengths_fit(found, shard, seq_length)


def offsets_fit(offsets: np.ndarray, shard: Shard) -> bool:
    """Whether a cached offsets index can be the one of this shard: a record count and a last offset that the
    manifest confirms, and frames that follow one another (each at least a 16-byte header and footer)."""
    return (
        offsets.ndim == 1
        and len(offsets) == shard.records + 1
        and offsets[0] == 0
        and (shard.bytes is None or offsets[-1] == shard.bytes)
        and bool((np.diff(offsets) >= 16).all())
    )


def lengths_fit(lengths: np.ndarray, shard: Shard, seq_length: int) -> bool:
    """Whether a cached index of instance lengths can be the one of this shard."""
    return (
        lengths.ndim == 1 and len(lengths) == shard.records and bool(((lengths >= 1) & (lengths <= seq_length)).all())
    )
