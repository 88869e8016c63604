"""dedup's duplicate steps as PTransforms, each over ids and hashes only:

    (exact key, (node, task, bands)) ─ ExactCopies ─┬─ (node, Verdict exact)            one document stays per key
                                                    └─ (band key, (node, task))
    (band key, (node, task)) ─ CandidatePairs ─ ((a, task), (b, task)) distinct         LSH: pairs sharing a band
    pairs ─ CandidateShingles ─ (node, Probe: shingle set)        only the paired documents, read again
    pairs + shingle sets ─ MeasurePairs ─ ((a, b), Jaccard)       the exact Jaccard similarity of every pair
    pairs at or above the threshold ─ ConnectedComponents ─ (kept node, removed node)
    (kept, removed) ─ MeasureTwins: their Jaccard, measured where no candidate pair gave it
    those pairs measured + each node's closest neighbour ─ NearVerdicts ─ (node, Verdict near)

Nodes are (priority, id, digest) and compare as tuples, so the smallest of a cluster is the document that stays
(transforms/near_duplicates.py).
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.read import METRICS, ReadCandidateShingles
from bertcorpus.pipeline.dedup.values import NodeType, Probe, Verdict
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues
from bertcorpus.transforms.minhash import jaccard
from bertcorpus.transforms.near_duplicates import bucket_pairs, large_star, small_star

Task = tuple[NodeType, int]  # a node and the number of the read task that holds it


class _ExactCopies(beam.DoFn):
    def process(self, element):
        _, members = element
        kept, *copies = sorted(dict((node, (task, bands)) for node, task, bands in members).items())
        for node, _ in copies:
            yield beam.pvalue.TaggedOutput("verdicts", (node, Verdict("exact", kept[0])))
        node, (task, bands) = kept
        for band in np.frombuffer(bands, "<u8").tolist():
            yield int(band) >> 1, (node, task)  # 63 bits: a key every coder carries
        if copies:
            yield tally.emit(METRICS, {"exact:groups": 1})


class ExactCopies(beam.PTransform):
    """(exact key, (node, task, band keys)) → main: (band key, (node, task)) of the document each key keeps (the
    smallest node); 'verdicts': (node, Verdict exact, twin: the kept node) for the others; counts."""

    def expand(self, fingerprints):
        return (
            fingerprints
            | "group exact copies" >> beam.GroupByKey()
            | "keep the first of each"
            >> beam.ParDo(_ExactCopies())
            .with_output_types(tuple[int, Task])
            .with_outputs("verdicts", tally.TALLY, main="bands")
        )


def _proposed(element):
    """(band key, [(node, task)]) → the pairs ((a, task), (b, task)) the bucket proposes."""
    _, members = element
    tasks = dict(members)
    for a, b in bucket_pairs(tasks):
        yield (a, tasks[a]), (b, tasks[b])


class CandidatePairs(beam.PTransform):
    """(band key, (node, task)) → ((a, task), (b, task)), a < b: the documents sharing a band, a pair once for each
    band they share (MeasurePairs measures it once)."""

    def expand(self, bands):
        return (
            bands
            | "group bands" >> beam.GroupByKey()
            | "propose pairs" >> beam.FlatMap(_proposed).with_output_types(tuple[Task, Task])
        )


class CandidateShingles(beam.PTransform):
    """Candidate pairs → (node, Probe: shingle set) of every document in one, its read task read again."""

    def __init__(self, config, tasks):
        super().__init__()
        self.config, self.tasks = config, tasks

    def expand(self, pairs):
        # ((a, task), (b, task)) → (task, node) → (task, [nodes]) → (node, shingle set)
        return (
            pairs
            | "nodes to read" >> beam.FlatMap(lambda p: [(t, n) for n, t in p]).with_output_types(tuple[int, NodeType])
            | "group by task" >> beam.GroupByKey()
            | "read shingles"
            >> beam.ParDo(ReadCandidateShingles(self.config, self.tasks)).with_output_types(tuple[NodeType, Probe])
        )


class _SendShingles(beam.DoFn):
    """(node, [its shingle set, partners]) → (partner, Probe(node, its shingle set)) for each partner, once."""

    def process(self, element):
        node, probes = element
        own = next((p.shingles for p in probes if p.partner is None), None)
        for partner in sorted({p.partner for p in probes if p.partner is not None}):
            yield partner, Probe(node, own)


class _Measure(beam.DoFn):
    """(b, [its shingle set, (a, a's shingle set)...]) → ((a, b), Jaccard) for each a; counts of the pairs measured
    and of those at or above the threshold."""

    def __init__(self, what: str, threshold: float):
        self.what, self.threshold = what, threshold

    def process(self, element):
        node, probes = element
        own = next((p.shingles for p in probes if p.partner is None), None)
        measured = similar = 0
        for probe in sorted((p for p in probes if p.partner is not None), key=lambda p: p.partner):
            similarity = jaccard(probe.shingles, own)
            measured += 1
            similar += similarity >= self.threshold
            yield (probe.partner, node), similarity
        yield tally.emit(METRICS, {f"near:measured:{self.what}": measured, f"near:similar:{self.what}": similar})


class MeasurePairs(beam.PTransform):
    """{"pairs": (a, b), "shingles": (node, Probe shingle set)} → ((a, b), exact Jaccard similarity).

    Two hops, each grouping by node: a's shingle set goes to b, where both are at hand. A node holds its own set
    and those of the pairs it closes, never a text."""

    def __init__(self, what: str, threshold: float):
        super().__init__()
        self.what, self.threshold = what, threshold  # what the pairs are, in step names and counts

    def expand(self, parts):
        shingles = parts["shingles"]
        # (a, b) → (a, Probe(b)) + (a, its set) → (b, Probe(a, a's set)) + (b, its set) → ((a, b), Jaccard)
        asks = parts["pairs"] | "ask" >> beam.Map(lambda p: (p[0], Probe(p[1], None))).with_output_types(
            tuple[NodeType, Probe]
        )
        sent = (
            (asks, shingles)
            | "with the first sets" >> beam.Flatten()
            | "group by first" >> GroupLargeValues()
            | "send the first sets" >> beam.ParDo(_SendShingles()).with_output_types(tuple[NodeType, Probe])
        )
        return (
            (sent, shingles)
            | "with the second sets" >> beam.Flatten()
            | "group by second" >> GroupLargeValues()
            | "measure"
            >> beam.ParDo(_Measure(self.what, self.threshold))
            .with_output_types(tuple[tuple[NodeType, NodeType], float])
            .with_outputs(tally.TALLY, main="measured")
        )


def _known_or_not(element):
    """((kept, removed), [its measured Jaccard, if any; "twin"]) → main: ((kept, removed), Jaccard) where the pair was
    measured already; 'unmeasured': (kept, removed) where it was not."""
    pair, parts = element
    if "twin" not in parts:
        return
    known = [p for p in parts if p != "twin"]
    if known:
        yield pair, known[0]
    else:
        yield beam.pvalue.TaggedOutput("unmeasured", pair)


class MeasureTwins(beam.PTransform):
    """{"twins": (kept, removed), "measured": ((a, b), Jaccard) of the candidate pairs, "shingles": (node, Probe)} →
    ((kept, removed), Jaccard). Most removed documents were a candidate pair with the document their cluster
    keeps, whose Jaccard is known; only the others are measured, so shingle sets travel again for those alone."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def expand(self, parts):
        pair = tuple[NodeType, NodeType]
        value = tuple[pair, str | float]
        twins = parts["twins"] | "tag twins" >> beam.Map(lambda t: (t, "twin")).with_output_types(value)
        measured = parts["measured"] | "measured so far" >> beam.Map(lambda m: m).with_output_types(value)
        found = (
            (twins, measured)
            | "merge twins and measured pairs" >> beam.Flatten()
            | "group by pair" >> beam.GroupByKey()
            | "known or not" >> beam.FlatMap(_known_or_not).with_outputs("unmeasured", main="known")
        )
        unmeasured = found.unmeasured | "unmeasured pairs" >> beam.Map(lambda p: p).with_output_types(pair)
        measured_now = {"pairs": unmeasured, "shingles": parts["shingles"]} | "measure the others" >> MeasurePairs(
            "twins", self.threshold
        )
        both = (found.known, measured_now.measured) | "all twins measured" >> beam.Flatten()
        return {"measured": both, tally.TALLY: measured_now[tally.TALLY]}


def _both_ways(edge):
    a, b = edge
    return [(a, b), (b, a)]


def _settle(element):
    """(node, [nodes that name it their smallest]) → (kept, removed) for each of them where the node names itself
    (it is a cluster's smallest node); else they are unsettled, and counted."""
    node, askers = element
    askers = set(askers)
    if node in askers:
        for removed in sorted(askers - {node}):
            yield node, removed
    else:
        yield tally.emit(METRICS, {"near:unsettled": len(askers)})


class ConnectedComponents(beam.PTransform):
    """Edges (a, b), a < b → (kept, removed): each cluster's smallest node and every other node of it.

    `rounds` rounds of large-star then small-star, each a group by node (transforms/near_duplicates.py). Then each
    node names the smallest of itself and its neighbours; where the components have converged that is the
    cluster's smallest node, which names itself. A node that names one that does not is unsettled: it stays, and
    is counted (more rounds settle it)."""

    def __init__(self, rounds: int):
        super().__init__()
        self.rounds = rounds

    def expand(self, edges):
        edge = tuple[NodeType, NodeType]
        for r in range(1, self.rounds + 1):
            # (a, b) → (a, b), (b, a) → (node, [neighbours]) → (smallest around, larger neighbour)
            edges = (
                edges
                | f"round {r}: both ways" >> beam.FlatMap(_both_ways).with_output_types(edge)
                | f"round {r}: group neighbours" >> beam.GroupByKey()
                | f"round {r}: large star" >> beam.FlatMapTuple(large_star).with_output_types(edge)
                # (a, b) → (b, a) → (node, [smaller neighbours]) → (smallest, each other)
                | f"round {r}: by larger" >> beam.Map(lambda e: (e[1], e[0])).with_output_types(edge)
                | f"round {r}: group smaller" >> beam.GroupByKey()
                | f"round {r}: small star" >> beam.FlatMapTuple(small_star).with_output_types(edge)
            )
        # (a, b) → (node, smallest neighbour) → (the smaller of the two, node) → (named, [askers]) → (kept, removed)
        return (
            edges
            | "settle: both ways" >> beam.FlatMap(_both_ways).with_output_types(edge)
            | "settle: smallest neighbour" >> beam.CombinePerKey(min)
            | "settle: name the smallest" >> beam.MapTuple(lambda n, m: (min(n, m), n)).with_output_types(edge)
            | "settle: group by named" >> beam.GroupByKey()
            | "settle: clusters" >> beam.FlatMap(_settle).with_outputs(tally.TALLY, main="removed")
        )


class _NearVerdict(beam.DoFn):
    """(removed node, [("twin", kept, Jaccard), ("edge", neighbour, Jaccard)...]) → (node, Verdict near)."""

    def __init__(self, threshold: float):
        self.threshold = threshold

    def process(self, element):
        node, parts = element
        twin = next((p for p in parts if p[0] == "twin"), None)
        if twin is None:
            return
        linked = None
        if twin[2] < self.threshold:  # joined through others: the most similar neighbour, the smallest of equals
            _, neighbour, similarity = min((p for p in parts if p[0] == "edge"), key=lambda p: (-p[2], p[1]))
            linked = (neighbour, similarity)
        yield node, Verdict("near", twin[1], twin[2], linked)


class NearVerdicts(beam.PTransform):
    """{"twins": ((kept, removed), Jaccard), "edges": ((a, b), Jaccard) at or above the threshold} →
    (removed, Verdict near): its kept twin, their Jaccard, and, where that is under the threshold (the document
    joined the cluster through others), its closest neighbour."""

    def __init__(self, threshold: float):
        super().__init__()
        self.threshold = threshold

    def expand(self, parts):
        part = tuple[NodeType, tuple[str, NodeType, float]]
        twins = parts["twins"] | "twin of each" >> beam.MapTuple(
            lambda pair, j: (pair[1], ("twin", pair[0], j))
        ).with_output_types(part)
        edges = parts["edges"] | "edges both ways" >> beam.FlatMapTuple(
            lambda pair, j: [(pair[0], ("edge", pair[1], j)), (pair[1], ("edge", pair[0], j))]
        ).with_output_types(part)
        return (
            (twins, edges)
            | "merge twins and edges" >> beam.Flatten()
            | "group by removed" >> beam.GroupByKey()
            | "near verdicts" >> beam.ParDo(_NearVerdict(self.threshold)).with_output_types(tuple[NodeType, Verdict])
        )
