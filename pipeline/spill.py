"""Shuffling through files on local runs: bulky values cross a GroupByKey as the places they were written to.

A local runner relays every shuffled byte through its one process and holds it there until the next stage, which
caps how far local workers scale and makes the runner's memory grow with the data. So when a job's output is
local, it puts SpillByKey between keying its values and grouping them:

    (key, value) ─ SpillByKey ─ (key, (path, offset, size)) ─ GroupByKey ─ unspilled(places) → the values

Each bundle gathers its values by key and writes them, whenever they reach SPILL_BYTES of text and at the end of
the bundle, to one file under the output's staging area, one zstd-compressed pickled list per key. So a worker
holds a few times SPILL_BYTES (Python objects are larger than their text). A file is named by the hash of its
bytes, so a retried bundle rewrites identical files, and a failed attempt's files are never read. The files go
when the staging area does: at publish, or when the next run into the output clears a failed run's staging area.
Object-store outputs (Dataflow) send the values through the runner's shuffle, which is built for them.

A local runner gives the k-th key to reach a GroupByKey to worker k mod workers, and when several workers spill,
their keys reach it in whatever order their bundles end. With more than one worker, DealToWorkers therefore
gathers the places on one worker first and sends them on in the order that shares the keys out evenly by size:

    (key, place) ─ DealToWorkers ─ (key, place) in dealing order ─ GroupByKey

For batch jobs in the global window, as every job here is: values gathered across elements leave in one window.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import typing
from collections import defaultdict
from collections.abc import Iterable, Iterator

import apache_beam as beam
import zstandard
from apache_beam.transforms.window import GlobalWindows

from pipeline import output

SPILL_BYTES = 32 * 2**20  # characters of text a bundle gathers before it writes what it gathered to one file


def spills_to_files(output_dir: str) -> bool:
    """Whether a job writing to output_dir passes its bulky shuffled values through files: local outputs do."""
    return not output.is_remote(output_dir)


def read_spilled(where: tuple[str, int, int]) -> bytes:
    """The bytes at a spilled value's place: (path, offset, size)."""
    path, offset, size = where
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def _rough_size(value) -> int:
    """The length of the strings in a value, its tuples and lists included: what the gathering budget counts."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (tuple, list)):
        return sum(_rough_size(v) for v in value)
    return 8


@beam.typehints.with_output_types(tuple[typing.Any, tuple[str, int, int]])  # declared: inferring costs ~6 ms
class SpillByKey(beam.DoFn):
    """(key, value) → (key, (path, offset, size)) per key and file: the bundle's values gathered by key and written
    to OUT/.staging/pieces/NAME-HASH.bin whenever they reach spill_bytes, and at the end of the bundle."""

    def __init__(self, output_dir: str, name: str, spill_bytes: int = SPILL_BYTES):
        self.output_dir, self.name, self.spill_bytes = output_dir, name, spill_bytes

    def setup(self):
        self.compressor = zstandard.ZstdCompressor(level=1)

    def start_bundle(self):
        self.gathered: dict = defaultdict(list)
        self.gathered_bytes = 0

    def process(self, element):
        key, value = element
        self.gathered[key].append(value)
        self.gathered_bytes += _rough_size(value)
        if self.gathered_bytes >= self.spill_bytes:
            yield from self._spill()

    def finish_bundle(self):
        for element in self._spill():
            yield GlobalWindows.windowed_value(element)

    def _spill(self) -> list[tuple[object, tuple[str, int, int]]]:
        keys = sorted(self.gathered)
        blobs = [self.compressor.compress(pickle.dumps(self.gathered[key], protocol=5)) for key in keys]
        self.gathered.clear()
        self.gathered_bytes = 0
        if not blobs:
            return []
        digest = hashlib.sha256()
        for blob in blobs:
            digest.update(blob)
        path = output.staging_path(self.output_dir, f"pieces/{self.name}-{digest.hexdigest()[:32]}.bin")
        # A local file (spills_to_files), read back by read_spilled: plain file I/O, hashed once above.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.writelines(blobs)
        places, offset = [], 0
        for key, blob in zip(keys, blobs):
            places.append((key, (path, offset, len(blob))))
            offset += len(blob)
        return places


# The most places DealToWorkers gathers on one worker (~150 bytes each). A job with more has enough keys per worker
# for the runner's dealing in arrival order to come out nearly even, so it skips the step.
DEAL_MAX_PLACES = 1_000_000


def spilled_size(place: tuple[str, int, int]) -> int:
    return place[2]


class DealToWorkers(beam.PTransform):
    """(key, value) → the same pairs, sent on by one worker in dealing_order, so that the GroupByKey after this
    shares its keys evenly between a local runner's `workers`; weight(value) is the value's part of its key's
    work. Only the balance of the work depends on this order, never what the job writes."""

    def __init__(self, workers: int, weight):
        super().__init__()
        self.workers, self.weight = workers, weight

    def expand(self, pairs):
        # (key, value) → (0, (key, value)) → (0, every pair) on one worker → (key, value), dealt
        return (pairs
                | "onto one worker" >> beam.Map(_under_one_key)
                | "gather" >> beam.GroupByKey()
                | "deal" >> beam.FlatMap(dealt, self.workers, self.weight))


def _under_one_key(pair):
    return 0, pair


def dealt(gathered, workers: int, weight) -> Iterator:
    """(0, pairs) → the pairs, grouped by key, keys in dealing_order of their summed weights."""
    values: dict = defaultdict(list)
    sizes: dict = defaultdict(int)
    for key, value in gathered[1]:
        values[key].append(value)
        sizes[key] += weight(value)
    for key in dealing_order(sizes, workers):
        for value in values[key]:
            yield key, value


def dealing_order(sizes: dict, workers: int) -> list:
    """The keys in the order that shares them evenly between a local runner's workers, when the k-th key goes
    to worker k mod workers: largest first, a round of `workers` at a time, and in each round the larger keys
    placed where the workers with the least so far will receive them."""
    keys = sorted(sizes, key=lambda k: (-sizes[k], k))
    load = [0] * workers
    order = []
    for start in range(0, len(keys), workers):
        round_keys = keys[start:start + workers]
        placed = [None] * len(round_keys)
        lightest_first = sorted(range(len(round_keys)), key=lambda w: (load[w], w))
        for key, worker in zip(round_keys, lightest_first):
            placed[worker] = key
            load[worker] += sizes[key]
        order += placed
    return order


def unspilled(places: Iterable[tuple[str, int, int]]) -> Iterator:
    """The values written at the given places, one place after another."""
    decompressor = zstandard.ZstdDecompressor()
    for where in places:
        yield from pickle.loads(decompressor.decompress(read_spilled(where)))
