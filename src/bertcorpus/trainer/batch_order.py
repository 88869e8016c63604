"""Which batch holds which instance: for a loader's configuration (seed, epochs, world size, batch size or tokens
per batch, layout), every step's batch on every rank, written without reading a token: the epoch's plan decides it
(trainer/epoch_plan.py, trainer/packed_layout.py) from the shards' record counts (and, for bins and packing, their
lengths). With provenance, each instance's documents too: the data order a run was trained on.

One row per instance of each batch: epoch, step, rank, position in the rank's batch, the instance's global number
(manifest order), its shard and row there, and with provenance its documents.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from bertcorpus.trainer.provenance_files import documents_of, shard_provenance

COLUMNS = ("epoch", "step", "rank", "position", "instance", "shard", "row")


def batch_rows(loader, epochs: list[int]) -> Iterator[dict[str, np.ndarray]]:
    """The rows of each epoch, a step (every rank's batch) at a time, as columns."""
    shard_start, shards = loader.shard_start, loader.dataset.shards
    for epoch in epochs:
        plan = loader.plan_of(epoch)
        for step in range(len(plan)):
            parts = [loader.planned_batch(plan, step, rank) for rank in range(loader.world_size)]
            ids = np.concatenate(parts)
            shard = np.searchsorted(shard_start, ids, side="right") - 1
            yield {
                "epoch": np.full(len(ids), epoch, np.int64),
                "step": np.full(len(ids), step, np.int64),
                "rank": np.repeat(np.arange(len(parts)), [len(p) for p in parts]).astype(np.int64),
                "position": np.concatenate([np.arange(len(p)) for p in parts]).astype(np.int64),
                "instance": ids,
                "shard": np.array([shards[s].name for s in shard.tolist()], object),
                "row": ids - shard_start[shard],
            }


class ShardDocuments:
    """The documents of each instance, read a shard's provenance at a time (the last few kept)."""

    def __init__(self, loader, keep: int = 8):
        self.loader, self.keep = loader, keep
        self.cache: dict[int, list[list[str]]] = {}

    def of(self, shards: np.ndarray, rows: np.ndarray) -> list[list[str]]:
        names = {s.name: i for i, s in enumerate(self.loader.dataset.shards)}
        out = []
        for name, row in zip(shards.tolist(), rows.tolist()):
            number = names[name]
            if number not in self.cache:
                if len(self.cache) >= self.keep:
                    self.cache.pop(next(iter(self.cache)))
                dataset = self.loader.dataset
                pieces = shard_provenance(dataset.file_format, dataset.shards[number])
                self.cache[number] = [documents_of(p) for p in pieces]
            out.append(self.cache[number][row])
        return out


def write_batch_order(loader, path: str, epochs: list[int], documents: bool) -> int:
    """The batch order of `epochs` as Parquet at `path` (local or any filesystem the loader reads); rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bertcorpus.trainer.storage import open_output

    fields = [(name, pa.int64()) for name in COLUMNS]
    fields[COLUMNS.index("shard")] = ("shard", pa.string())
    if documents:
        fields.append(("documents", pa.list_(pa.string())))
    schema = pa.schema(fields)
    docs = ShardDocuments(loader) if documents else None
    written = 0
    with open_output(path) as sink, pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for rows in batch_rows(loader, epochs):
            if docs is not None:
                rows["documents"] = docs.of(rows["shard"], rows["row"])
            writer.write_table(pa.table({name: rows[name] for name in schema.names}, schema=schema))
            written += len(rows["instance"])
    return written
