"""The provenance of a `create --provenance` output, shard by shard, as the loader and inspect read it: the
`provenance` column of the Parquet and MDS forms, and the Parquet beside each TFRecord shard, which must still be
that shard's: its sha256 as the manifest lists it, and in its own metadata the shard's sha256 and record count."""

from __future__ import annotations

import hashlib
import io

from bertcorpus.trainer.record_files import LoaderError, Shard
from bertcorpus.trainer.storage import read_bytes
from bertcorpus.transforms.instance_mds import MdsColumns, read_header, read_provenance
from bertcorpus.transforms.provenance import PROVENANCE


def shard_provenance(file_format: str, shard: Shard) -> list[list[dict]]:
    """Each record's pieces ({document, start, end, segment}) of one shard, in record order; LoaderError where the
    output has none or it is not the shard's."""
    import pyarrow.parquet as pq

    if file_format == "tfrecord":
        return sidecar_table(shard).column(PROVENANCE).to_pylist()
    data = _read(shard.path)
    if file_format == "mds":
        try:
            n, config = read_header(data)
            found = read_provenance(data, 0, n, MdsColumns.from_config(config))
        except ValueError as e:
            raise LoaderError(f"{shard.path}: {e}") from None
    else:
        table = pq.read_table(io.BytesIO(data))
        found = table.column(PROVENANCE).to_pylist() if PROVENANCE in table.column_names else None
    if found is None:
        raise LoaderError(f"{shard.path} has no provenance: the output was made without create --provenance")
    return found


def sidecar_table(shard: Shard):
    """A TFRecord shard's provenance table, once it is checked to be the one create wrote for that very shard."""
    import pyarrow.parquet as pq

    if shard.provenance is None:
        raise LoaderError(f"{shard.path} has no provenance: the output was made without create --provenance")
    path, expected = shard.provenance
    data = _read(path)
    if (found := hashlib.sha256(data).hexdigest()) != expected:
        raise LoaderError(
            f"{path} is not the provenance create wrote (sha256 {found[:12]}..., the manifest's {expected[:12]}...)"
        )
    table = pq.read_table(io.BytesIO(data))
    metadata = table.schema.metadata or {}
    if (
        metadata.get(b"bertcorpus.shard_sha256", b"").decode() != shard.sha256
        or metadata.get(b"bertcorpus.shard_records", b"").decode() != str(shard.records)
        or table.num_rows != shard.records
    ):
        raise LoaderError(
            f"{path} no longer matches its shard {shard.name}: it was written for another sha256 or record count"
        )
    return table


def _read(path: str) -> bytes:
    try:
        return read_bytes(path)
    except OSError as e:
        raise LoaderError(f"cannot read {path}: {e.strerror or e}") from None


def documents_of(pieces: list[dict]) -> list[str]:
    """The documents an instance's pieces name, each once, in the order they first come."""
    return list(dict.fromkeys(p["document"] for p in pieces))
