"""Duplicates across a corpus of several sources: which documents are exact copies, which pairs LSH proposes, how
clusters are joined transitively, and which document of a cluster stays.

A document is a node `(priority, id, digest)`: its source's place in the priority order (0 first), its id, and 63
bits of its exact key. Nodes compare as tuples, so the smallest node of a cluster is the document that stays: the
highest-priority source first, then the lowest id (the digest only tells apart two texts that share an id).

Connected components are found with the alternating large-star / small-star steps of Kiveris et al. ("Connected
Components in MapReduce and Beyond", SoCC 2014). Each step needs one node and its neighbours at a time, so each is a
group-by-node in a distributed engine; after enough rounds every component is a star around its smallest node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from bertcorpus.transforms.minhash import casefolded

Node = tuple[int, str, int]  # (priority, id, digest)

MAX_ALL_PAIRS = 16  # an LSH bucket of at most this many documents proposes every pair of them
ANCHORS = 4  # a larger bucket proposes each document with its ANCHORS smallest ones only


def exact_key(text: str, is_casefolded: bool = False) -> bytes:
    """16 bytes that two texts share exactly when they are equal after NFKC, casefolding, and whitespace made single
    spaces (leading and trailing whitespace dropped): the normalisation of an exact duplicate. `text` may be
    casefolded() already."""
    normalised = " ".join((text if is_casefolded else casefolded(text)).split())
    return hashlib.blake2b(normalised.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def digest_of(key: bytes) -> int:
    """63 bits of an exact key, a non-negative int that every coder carries."""
    return int.from_bytes(key[:8], "big") >> 1


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The chance that two documents of this Jaccard similarity share at least one LSH band."""
    return 1 - (1 - similarity**rows) ** bands


def bucket_pairs(members: Iterable[Node]) -> list[tuple[Node, Node]]:
    """The pairs (a, b), a < b, that one LSH bucket proposes: all of them in a small bucket; in a large one each
    document with the ANCHORS smallest, so that a bucket of n documents costs O(n) pairs, not O(n²). A large bucket
    is most often many copies of one text, which the anchors join into one cluster."""
    nodes = sorted(set(members))
    if len(nodes) <= MAX_ALL_PAIRS:
        return [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
    return [(a, b) for i, a in enumerate(nodes[:ANCHORS]) for b in nodes[i + 1 :]]


def large_star(node: Node, neighbours: Iterable[Node]) -> list[tuple[Node, Node]]:
    """Large-star at one node: every larger neighbour is linked to the smallest of the node and its neighbours."""
    around = set(neighbours)
    smallest = min(around | {node})
    return [(smallest, v) for v in sorted(around) if v > node]


def small_star(node: Node, smaller: Iterable[Node]) -> list[tuple[Node, Node]]:
    """Small-star at one node, given its smaller neighbours: the node and each of them is linked to the smallest."""
    around = set(smaller) | {node}
    smallest = min(around)
    return [(smallest, v) for v in sorted(around) if v != smallest]


def connected_components(edges: Iterable[tuple[Node, Node]], rounds: int) -> list[tuple[Node, Node]]:
    """The edges after `rounds` rounds of large-star then small-star, computed in one place: what the Beam job
    computes step by step, for tests and benchmarks to compare with."""
    current = {(min(a, b), max(a, b)) for a, b in edges if a != b}
    for _ in range(rounds):
        around: dict[Node, set[Node]] = {}
        for a, b in current:
            around.setdefault(a, set()).add(b)
            around.setdefault(b, set()).add(a)
        current = {e for u, vs in around.items() for e in large_star(u, vs)}
        smaller: dict[Node, set[Node]] = {}
        for a, b in current:
            smaller.setdefault(b, set()).add(a)
        current = {e for u, vs in smaller.items() for e in small_star(u, vs)}
    return sorted(current)


def is_star_forest(edges: Iterable[tuple[Node, Node]]) -> bool:
    """Whether every component is a star around its smallest node: no node is both a centre and a leaf, and no
    leaf has two centres. That is where the rounds have converged."""
    centres: set[Node] = set()
    leaves: dict[Node, Node] = {}
    for a, b in edges:
        if leaves.setdefault(b, a) != a:
            return False
        centres.add(a)
    return not centres & leaves.keys()


# The Jaccard histogram of removed pairs: bins of 0.02 from 0 to 1, the last one [0.98, 1.0].
JACCARD_BINS = 50


def jaccard_bin(similarity: float) -> int:
    return min(JACCARD_BINS - 1, int(similarity * JACCARD_BINS))
