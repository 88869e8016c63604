"""The values that cross dedup's shuffles, and the Beam coders that turn them into bytes.

    "group exact copies", LSH buckets,    nodes (priority, id, digest), read-task numbers and 64-bit band keys:
    candidate pairs, components           Beam's own coders for tuples of ints and strings
    "measure pairs"                       Probe: a node's shingle set, or a partner to measure against
    "group into shards"                   ShardItem: a document with its benchmark matches, a verdict, a dead letter

Only ShardItem holds text, and it crosses one shuffle: the one that groups each output shard's documents, which a
documents sink needs anyway. Each type here has a deterministic coder registered with Beam's coder registry, so the
job code handles objects and the runner does the encoding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import apache_beam as beam
import numpy as np

from bertcorpus.pipeline.coders import DeterministicCoder
from bertcorpus.transforms.decontamination import Region
from bertcorpus.transforms.near_duplicates import Node

NodeType = tuple[int, str, int]  # the type hint of a Node, which Beam encodes with its tuple coder


@dataclass(frozen=True)
class Probe:
    """What a node receives while its pairs are measured: its own shingle set (partner None), a partner to measure
    against (shingles None), or a partner with that partner's shingle set."""

    partner: Node | None
    shingles: np.ndarray | None  # sorted distinct uint64 shingle hashes


@dataclass(frozen=True)
class Verdict:
    """Why a document leaves the corpus: an exact or near copy of `twin`, the document its cluster keeps."""

    reason: str  # exact, near
    twin: Node
    jaccard: float | None = None  # near: measured between the document and its twin
    linked_by: tuple[Node, float] | None = None  # near, where jaccard is under the threshold: its closest neighbour


@dataclass(frozen=True)
class ShardItem:
    """One of the things an output shard is made from: a document (with its benchmark matches), the verdict on a
    document of the shard, or a dead letter of the source (shard 0 writes them)."""

    document: dict | None = None  # id, source, title, text, url, language, language_confidence, digest
    regions: tuple[Region, ...] = ()
    verdict: tuple[str, int, Verdict] | None = None  # (id, digest, verdict)
    error: dict | None = None


def _node_json(node: Node | None):
    return None if node is None else list(node)


def _node(value) -> Node | None:
    return None if value is None else (int(value[0]), str(value[1]), int(value[2]))


class ProbeCoder(DeterministicCoder):
    """A JSON header (the partner) and the shingle hashes as little-endian uint64."""

    def encode(self, probe: Probe) -> bytes:
        header = json.dumps([_node_json(probe.partner), probe.shingles is not None], ensure_ascii=False)
        header = header.encode("utf-8", "surrogatepass")
        body = b"" if probe.shingles is None else probe.shingles.astype("<u8").tobytes()
        return len(header).to_bytes(4, "little") + header + body

    def estimate_size(self, probe: Probe) -> int:
        # Beam weighs sampled elements for its counters; encoding a large one only to weigh it costs as much.
        return 64 + (0 if probe.shingles is None else 8 * probe.shingles.size)

    def decode(self, data: bytes) -> Probe:
        size = int.from_bytes(data[:4], "little")
        partner, has_shingles = json.loads(data[4 : 4 + size].decode("utf-8", "surrogatepass"))
        shingles = np.frombuffer(data, "<u8", offset=4 + size).astype(np.uint64) if has_shingles else None
        return Probe(_node(partner), shingles)


def _region_json(region: Region) -> list:
    return [region.start, region.end, region.match_start, region.match_end, list(region.texts), region.matches]


def _verdict_json(item: tuple[str, int, Verdict]) -> list:
    doc_id, digest, v = item
    linked = None if v.linked_by is None else [list(v.linked_by[0]), v.linked_by[1]]
    return [doc_id, digest, v.reason, list(v.twin), v.jaccard, linked]


def _verdict(value: list) -> tuple[str, int, Verdict]:
    doc_id, digest, reason, twin, jaccard, linked = value
    linked_by = None if linked is None else (_node(linked[0]), linked[1])
    return doc_id, digest, Verdict(reason, _node(twin), jaccard, linked_by)


class ShardItemCoder(DeterministicCoder):
    """A JSON header (everything but a document's text) and the text as UTF-8 after it."""

    def encode(self, item: ShardItem) -> bytes:
        text = b""
        header: dict = {}
        if item.document is not None:
            header["d"] = {k: v for k, v in item.document.items() if k != "text"}
            text = item.document["text"].encode("utf-8", "surrogatepass")
            if item.regions:
                header["r"] = [_region_json(r) for r in item.regions]
        if item.verdict is not None:
            header["v"] = _verdict_json(item.verdict)
        if item.error is not None:
            header["e"] = item.error
        encoded = json.dumps(header, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")
        return len(encoded).to_bytes(4, "little") + encoded + text

    def estimate_size(self, item: ShardItem) -> int:
        return 256 + (len(item.document["text"]) if item.document is not None else 0)

    def decode(self, data: bytes) -> ShardItem:
        size = int.from_bytes(data[:4], "little")
        header = json.loads(data[4 : 4 + size].decode("utf-8", "surrogatepass"))
        document = None
        if "d" in header:
            document = {**header["d"], "text": data[4 + size :].decode("utf-8", "surrogatepass")}
        regions = tuple(Region(s, e, ms, me, tuple(t), n) for s, e, ms, me, t, n in header.get("r", ()))
        verdict = _verdict(header["v"]) if "v" in header else None
        return ShardItem(document, regions, verdict, header.get("e"))


beam.coders.registry.register_coder(Probe, ProbeCoder)
beam.coders.registry.register_coder(ShardItem, ShardItemCoder)
