"""The files of a `create` output as the loader reads them: its manifest, its shards (Parquet row groups, TFRecords
by record offsets) and the cache of per-shard indexes, locally or through Beam's FileSystems for remote paths.

TFRecords are read at random through record offsets found once by a scan of the frame headers (which also checks
each shard's sha256 against the manifest) and kept in a cache directory keyed by that sha256; create's files are
never touched.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from google_crc32c import value as crc32c

from bertcorpus.trainer.storage import file_sizes, is_remote, join, open_binary, read_bytes
from bertcorpus.transforms.bucket_instances import bins_of_manifest
from bertcorpus.transforms.example_decoding import joined_records, parse_examples
from bertcorpus.transforms.instance_parquet import (
    CHINESE_REF,
    CHINESE_REF_TYPE,
    ROW_GROUP_ROWS,
    WIDE_IDS,
    instance_schema,
)
from bertcorpus.transforms.manifest_paths import manifest_paths_problem
from bertcorpus.transforms.tfrecord import masked_crc32c

BLOCK_ROWS = ROW_GROUP_ROWS  # instances per block: a Parquet row group of the dynamic form; a run of TFRecords
_SCAN_CHUNK = 8 << 20
CACHED_BLOCKS = 24  # decoded Parquet row groups or remote TFRecord blocks kept per process
_INSTANCE_COLUMNS = tuple(instance_schema(0).names)


class LoaderError(ValueError):
    """Input the loader cannot use (a path, an argument, the data, a saved state); the message is one line."""


def changed(path: str, how: str) -> LoaderError:
    return LoaderError(f"{path} is not the file that `create` wrote ({how}); recreate the output or restore the file")


def default_cache_dir() -> Path:
    """$BERTCORPUS_CACHE_DIR, else $XDG_CACHE_HOME/bertcorpus, else ~/.cache/bertcorpus."""
    if os.environ.get("BERTCORPUS_CACHE_DIR"):
        return Path(os.environ["BERTCORPUS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bertcorpus"


# ------------------------------------------------------------------------------------------------ manifest


@dataclass(frozen=True)
class Shard:
    path: str  # full path or URL
    name: str  # as the manifest names it, relative to the output
    records: int
    sha256: str
    bytes: int | None = None  # as the manifest lists it (older manifests may not)
    # A TFRecord shard's provenance beside it (create --provenance): its path and sha256, as the manifest lists them
    provenance: tuple[str, str] | None = None


def check_size(shard: Shard, size: int) -> None:
    """A shard's size, found in a listing or by a process that opened it, against the manifest."""
    if shard.bytes is not None and size != shard.bytes:
        raise changed(shard.path, f"it has {size:,} bytes, the manifest lists {shard.bytes:,}")


@dataclass(frozen=True)
class Dataset:
    """What the loader needs from a create output's manifest, for one (seq length, split)."""

    output_dir: str
    seq_length: int
    split: str
    max_predictions: int
    masking: str  # static | dynamic
    pair_objective: str  # nsp | sop | none
    file_format: str  # tfrecord | parquet | mds
    bin_size: int | None
    bins: dict | None  # upper edge -> instances, as the manifest counts them
    shards: tuple[Shard, ...]
    masked_lm_prob: float
    whole_word_mask: bool
    vocab_path: str | None
    vocab_sha256: str | None  # of the vocab the ids came from, as the manifest records it
    # A tokenizer.json's output: the manifest's account of it (its specials, templates, sha256), and vocab_path is
    # the folder of its copy; None for a vocab.txt's.
    tokenizer: dict | None = None
    provenance: bool = False  # made with create --provenance

    @property
    def instances(self) -> int:
        return sum(s.records for s in self.shards)

    @property
    def fingerprint(self) -> str:
        """The identity of the split's data: its files' digests and its form."""
        parts = [
            self.masking,
            self.pair_objective,
            str(self.bin_size),
            str(self.seq_length),
            self.split,
            *(s.sha256 for s in self.shards),
        ]
        return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def read_dataset(output_dir: str, seq_length: int, split: str) -> Dataset:
    output_dir = str(output_dir)
    manifest_path = join(output_dir, "manifest.json")
    try:
        manifest = json.loads(read_bytes(manifest_path))
    except FileNotFoundError:
        raise LoaderError(f"{output_dir} has no manifest.json: not a finished `bertcorpus create` output") from None
    except (OSError, ValueError) as e:
        raise LoaderError(f"cannot read {manifest_path}: {e}") from None
    if not isinstance(manifest, dict):
        raise LoaderError(f"{manifest_path} is not the manifest of a `bertcorpus create` output")
    if problem := manifest_paths_problem(manifest):
        raise LoaderError(f"{manifest_path} is not a manifest bertcorpus reads: {problem}")
    outputs = manifest.get("outputs") or {}
    name = f"seq{seq_length}"
    if name not in outputs:
        have = ", ".join(sorted(outputs)) or "none"
        raise LoaderError(f"{output_dir} has no seq_length {seq_length} (it has {have})")
    entry = outputs[name]
    if split not in entry:
        raise LoaderError(
            f"{output_dir} has no {split!r} split for {name} (it has "
            f"{', '.join(k for k in ('train', 'eval') if k in entry) or 'none'})"
        )
    form = manifest.get("form") or {}  # runs from before the form field are static NSP TFRecords
    file_format = form.get("file_format", "tfrecord")
    suffix = {"tfrecord": ".tfrecord", "parquet": ".parquet", "mds": ".mds"}.get(file_format)
    if suffix is None:
        raise LoaderError(f"{manifest_path}: unknown file format {file_format!r}")
    # one listing of the shards' folder: a folder per split for MDS, with its index.json (trainer/mds_files.py)
    sizes = file_sizes(join(output_dir, name, split) if file_format == "mds" else join(output_dir, name))
    found = [n for n in sizes if n.endswith((".tfrecord", ".parquet"))]
    kinds = {n.rsplit(".", 1)[1] for n in found}
    if len(kinds) > 1:
        raise LoaderError(
            f"{join(output_dir, name)} mixes TFRecord and Parquet files; point the loader at the "
            f"output of one `bertcorpus create` run"
        )
    if file_format == "mds":
        found = [n for n in sizes if n.endswith(suffix)]
    shards = tuple(
        Shard(
            join(output_dir, s["path"]),
            s["path"],
            int(s["records"]),
            s["sha256"],
            s.get("bytes"),
            (join(output_dir, s["provenance"]["path"]), s["provenance"]["sha256"]) if s.get("provenance") else None,
        )
        for s in entry[split]["shards"]
    )
    for shard in shards:
        if not shard.name.endswith(suffix) or Path(shard.name).name not in found:
            raise LoaderError(f"{shard.path} is missing or is not the {file_format} file that the manifest lists")
    config = manifest.get("config") or {}
    tokenizer = manifest.get("tokenizer")
    vocab = (manifest.get("vocab") or {}) if not isinstance(tokenizer, dict) else tokenizer
    vocab_path = join(output_dir, vocab["copy"]) if vocab.get("copy") else vocab.get("path")
    dataset = Dataset(
        output_dir,
        seq_length,
        split,
        int(entry["max_predictions_per_seq"]),
        form.get("masking", "static"),
        form.get("pair_objective", "nsp"),
        file_format,
        form.get("bin_size"),
        bins_of_manifest(entry[split].get("bins")),
        shards,
        float(config.get("masked_lm_prob", 0.15)),
        bool(config.get("whole_word_mask", False)),
        vocab_path,
        vocab.get("sha256"),
        tokenizer if isinstance(tokenizer, dict) else None,
        bool(config.get("provenance")),
    )
    for shard in shards:
        check_size(shard, sizes[Path(shard.name).name])
    return dataset


# ------------------------------------------------------------------------------------------------ index cache


class IndexCache:
    """Per-shard arrays (TFRecord offsets, instance lengths) in files named by the shard's sha256: a shard's
    content fixes them, wherever it is stored. None as directory: kept in memory only."""

    def __init__(self, directory: Path | None):
        self.directory = directory

    def path(self, sha256: str, what: str) -> Path | None:
        return self.directory / f"{sha256}.{what}.npy" if self.directory else None

    def load(self, sha256: str, what: str) -> np.ndarray | None:
        path = self.path(sha256, what)
        if path is None or not path.exists():
            return None
        try:
            return np.load(path, mmap_mode="r")
        except (OSError, ValueError):  # a damaged cache file is rebuilt
            return None

    def store(self, sha256: str, what: str, values: np.ndarray) -> bool:
        path = self.path(sha256, what)
        if path is None:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                np.save(f, values)
            os.replace(tmp, path)  # another process building the same index writes the same bytes
            return True
        except OSError:
            return False


def scan_tfrecord_offsets(path: str, sha256: str | None = None) -> np.ndarray:
    """The byte offset of every record of a TFRecord file, and its size as the last entry (int64, records + 1),
    from the frame headers (length CRCs checked); with sha256, the file's bytes are checked against it."""
    digest = hashlib.sha256()
    offsets = [0]
    pos = buf_start = 0
    buf = b""
    with open_binary(path) as f:
        while True:
            chunk = f.read(_SCAN_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            buf = buf + chunk if buf else chunk  # the file's bytes from buf_start on
            end = buf_start + len(buf)
            while pos + 12 <= end:
                at = pos - buf_start
                (length,) = struct.unpack_from("<Q", buf, at)
                if masked_crc32c(buf[at : at + 8]) != struct.unpack_from("<I", buf, at + 8)[0]:
                    raise LoaderError(f"corrupt record file {path}: bad length checksum at byte {pos}")
                pos += length + 16
                offsets.append(pos)
            if pos < end:
                buf, buf_start = buf[pos - buf_start :], pos
            else:
                buf, buf_start = b"", end
    if pos != buf_start + len(buf) or buf:
        raise LoaderError(f"corrupt record file {path}: truncated record at byte {offsets[-2]}")
    if sha256 is not None and digest.hexdigest() != sha256:
        raise changed(path, "its sha256 differs")
    return np.asarray(offsets, np.int64)


# ------------------------------------------------------------------------------------------------ shard readers


@dataclass
class InstanceRows:
    """Instances of one block, unpadded: instance i's ids are ids[starts[i]:starts[i] + length[i]]."""

    ids: np.ndarray
    starts: np.ndarray
    length: np.ndarray
    segment_b_start: np.ndarray
    label: np.ndarray
    # Whole-word masking by a segmenter's words (the chinese_ref column): instance i's continuing tokens are at
    # positions ref[ref_starts[i]:ref_starts[i + 1]]; None where the shard has no such column.
    ref: np.ndarray | None = None
    ref_starts: np.ndarray | None = None


def _check_instance_schema(schema, path: str) -> None:
    """The columns of bertcorpus.transforms.instance_parquet.instance_schema, with 16- or 32-bit ids."""
    missing = [c for c in _INSTANCE_COLUMNS if c not in schema.names]
    if missing:
        raise LoaderError(
            f"{path} is not a bertcorpus instances file: it has no column {', '.join(missing)} "
            f"(found: {', '.join(schema.names)})"
        )
    for column in _INSTANCE_COLUMNS:
        found = schema.field(column).type
        allowed = {instance_schema(size).field(column).type for size in (0, WIDE_IDS + 1)}
        if not any(found.equals(a) for a in allowed):
            raise LoaderError(
                f"{path} is not a bertcorpus instances file: {column} is {found}, expected "
                f"{' or '.join(sorted(map(str, allowed)))}"
            )
    if CHINESE_REF in schema.names and not schema.field(CHINESE_REF).type.equals(CHINESE_REF_TYPE):
        raise LoaderError(
            f"{path} is not a bertcorpus instances file: {CHINESE_REF} is {schema.field(CHINESE_REF).type}, "
            f"expected {CHINESE_REF_TYPE}"
        )


class ParquetShard:
    def __init__(self, shard: Shard, seq_length: int):
        import pyarrow.parquet as pq

        self.shard = shard
        self.seq_length = seq_length
        source = open_binary(shard.path)
        if not is_remote(shard.path):
            check_size(shard, os.fstat(source.fileno()).st_size)
        try:
            self.file = pq.ParquetFile(source)
        except Exception as e:  # pyarrow's ArrowInvalid and friends: the file is no Parquet
            raise LoaderError(f"{shard.path} is not a Parquet file: {str(e).splitlines()[0]}") from None
        _check_instance_schema(self.file.schema_arrow, shard.path)
        self.has_chinese_ref = CHINESE_REF in self.file.schema_arrow.names
        meta = self.file.metadata
        self.group_starts = np.concatenate(
            ([0], np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)]))
        )
        if self.group_starts[-1] != shard.records:
            raise LoaderError(f"{shard.path} holds {self.group_starts[-1]} rows, the manifest says {shard.records}")

    def _read(self, groups: list[int], columns: list[str]):
        """Row groups of the file; one that cannot be decoded is named."""
        import pyarrow as pa

        try:
            return self.file.read_row_groups(groups, columns=columns)
        except (OSError, pa.ArrowException):
            for group in groups:  # which one: the error does not say
                try:
                    self.file.read_row_group(group, columns=columns)
                except (OSError, pa.ArrowException) as e:
                    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
                    raise LoaderError(
                        f"corrupt Parquet file {self.shard.path}: row group {group} of "
                        f"{self.file.metadata.num_row_groups} cannot be read ({reason})"
                    ) from None
            raise

    def lengths(self) -> np.ndarray:
        """The length of every instance of the shard."""
        table = self._read(list(range(self.file.metadata.num_row_groups)), ["length"])
        return table.column("length").to_numpy().astype(np.int32)

    def check_readable(self) -> None:
        """Decode every row group, one at a time: a LoaderError names the first that fails."""
        for group in range(self.file.metadata.num_row_groups):
            self._read([group], list(_INSTANCE_COLUMNS))

    def rows(self, first: int, stop: int) -> InstanceRows:
        groups = np.arange(
            np.searchsorted(self.group_starts, first, side="right") - 1,
            np.searchsorted(self.group_starts, stop, side="left"),
        )
        table = self._read(groups.tolist(), list(_INSTANCE_COLUMNS) + [CHINESE_REF] * self.has_chinese_ref)
        table = table.slice(first - self.group_starts[groups[0]], stop - first)
        ids = table.column("input_ids").combine_chunks()
        if ids.null_count:
            raise LoaderError(f"{self.shard.path} has an instance without input_ids")
        columns = [table.column(c).to_numpy().astype(np.int64) for c in _INSTANCE_COLUMNS[1:]]
        offsets = ids.offsets.to_numpy().astype(np.int64)
        rows = InstanceRows(ids.values.to_numpy(), offsets[:-1], *[columns[2], columns[0], columns[1]])
        if self.has_chinese_ref:
            ref = table.column(CHINESE_REF).combine_chunks()
            rows.ref, rows.ref_starts = ref.values.to_numpy().astype(np.int64), ref.offsets.to_numpy().astype(np.int64)
            ends = np.repeat(rows.length, np.diff(rows.ref_starts))
            if (rows.ref >= ends).any():
                raise LoaderError(f"{self.shard.path} has a chinese_ref position past its instance's tokens")
        if (
            (np.diff(offsets) != rows.length).any()
            or (rows.length > self.seq_length).any()
            or (rows.segment_b_start > rows.length).any()
        ):
            raise LoaderError(f"{self.shard.path} has instances that do not fit seq_length {self.seq_length}")
        return rows


class IndexMismatch(LoaderError):
    """A record's frame header disagrees with the offsets index: the index, not the shard, is wrong (a shard that
    changed is found by its size or sha256 first)."""


class TFRecordShard:
    """Records by number: locally through a memory map of the file, remotely in blocks read on demand."""

    def __init__(self, shard: Shard, offsets: np.ndarray, blocks: OrderedDict):
        self.shard = shard
        self.offsets = offsets
        self.blocks = blocks  # the process's cache of remote blocks, shared by its shards
        self.map = None
        if not is_remote(shard.path):
            with open(shard.path, "rb") as f:
                self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            check_size(shard, len(self.map))
            if len(self.map) != offsets[-1]:
                raise IndexMismatch(f"the offsets index of {shard.path} ends at byte {offsets[-1]}, not at its end")

    def records(self, rows: np.ndarray) -> list[bytes]:
        """The data of each record (a serialized Example), its CRC checked; and each frame's length header against
        the offsets index."""
        starts = (self.offsets[rows]).tolist()
        stops = (self.offsets[rows + 1]).tolist()  # the length, its CRC, the data and its CRC
        if self.map is not None:
            framed = [self.map[a:z] for a, z in zip(starts, stops)]
        else:
            framed = []
            for row, a, z in zip(rows.tolist(), starts, stops):
                first, data = self._block(row // BLOCK_ROWS)
                framed.append(data[a - first : z - first])
        headers = np.frombuffer(b"".join(f[:8] for f in framed), "<u8")
        if (headers != np.asarray(stops, np.int64) - np.asarray(starts, np.int64) - 16).any():
            raise IndexMismatch(f"the offsets index of {self.shard.path} does not point at its records")
        found = np.fromiter((crc32c(f[12:-4]) for f in framed), np.uint32, len(framed))
        expected = np.frombuffer(b"".join(f[-4:] for f in framed), "<u4")
        if (_masked(found) != expected).any():
            raise LoaderError(f"corrupt record file {self.shard.path}: a record's data checksum does not match")
        return [f[12:-4] for f in framed]

    def _block(self, block: int) -> tuple[int, bytes]:
        """(offset of its first byte, bytes) of a block of a remote shard, read once and kept a while."""
        key = (self.shard.path, block)
        found = self.blocks.get(key)
        if found is not None:
            self.blocks.move_to_end(key)
            return found
        first = int(self.offsets[block * BLOCK_ROWS])
        stop = int(self.offsets[min((block + 1) * BLOCK_ROWS, len(self.offsets) - 1)])
        with open_binary(self.shard.path) as f:
            f.seek(first)
            found = self.blocks[key] = (first, f.read(stop - first))
        while len(self.blocks) > CACHED_BLOCKS:
            self.blocks.popitem(last=False)
        return found


def _masked(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC32C, vectorised (bertcorpus.transforms.tfrecord.masked_crc32c for one)."""
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(0xA282EAD8)


def tfrecord_lengths(path: str, offsets: np.ndarray, seq_length: int) -> np.ndarray:
    """The real tokens of every record of a static shard (its input_mask's sum), for bins."""
    blocks: OrderedDict = OrderedDict()
    reader = TFRecordShard(Shard(path, path, len(offsets) - 1, ""), offsets, blocks)
    lengths = []
    for first in range(0, len(offsets) - 1, BLOCK_ROWS):
        rows = np.arange(first, min(first + BLOCK_ROWS, len(offsets) - 1))
        mask = parse_examples(*joined_records(reader.records(rows)), {"input_mask": (False, seq_length)})
        lengths.append(mask["input_mask"].sum(axis=1))
    return np.concatenate(lengths).astype(np.int32) if lengths else np.zeros(0, np.int32)


# ------------------------------------------------------------------------------------------------ tfrecord indexes


def write_tfrecord_indexes(output_dir: str, destination: str, cache_dir: str | None = None) -> list[Path]:
    """Index files for the `tfrecord` package (one "offset length" line per record) of every TFRecord shard of a
    create output, written under destination with the shards' relative paths plus ".index"."""
    output_dir = str(output_dir)
    manifest = json.loads(read_bytes(join(output_dir, "manifest.json")))
    cache = IndexCache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    written = []
    for seq in manifest["outputs"].values():
        for split in ("train", "eval"):
            for entry in seq.get(split, {}).get("shards", []):
                if not entry["path"].endswith(".tfrecord"):
                    continue
                offsets = cache.load(entry["sha256"], "offsets")
                if offsets is None:
                    offsets = scan_tfrecord_offsets(join(output_dir, entry["path"]), entry["sha256"])
                    cache.store(entry["sha256"], "offsets", offsets)
                target = Path(destination) / (entry["path"] + ".index")
                target.parent.mkdir(parents=True, exist_ok=True)
                lines = np.stack([offsets[:-1], np.diff(offsets)], axis=1)
                np.savetxt(target, lines, fmt="%d")
                written.append(target)
    return written
