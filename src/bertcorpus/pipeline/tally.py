"""Counts that travel as data: every step emits {name: n} dicts, summed once at the end.

Counts carried in a PCollection are exact under bundle retries (a failed bundle's outputs are discarded),
so the manifest can state read = kept + skipped + errors. The same numbers go to Beam metrics for live
progress in the runner's UI, and in a local run to its progress line (pipeline/engines/live_counts.py). Counts
that only show progress, such as the bytes a reader has read so far, go to those two alone (`progress`).
"""

from __future__ import annotations

from collections import Counter

import apache_beam as beam
from apache_beam.metrics import Metrics

from bertcorpus.pipeline.engines import live_counts

TALLY = "tally"
PROGRESS = "progress"  # the namespace of counts that only show progress


def emit(namespace: str, counts: dict[str, int]):
    """Increment Beam counters and return the tagged output carrying the same counts."""
    for name, value in counts.items():
        if value:
            Metrics.counter(namespace, name).inc(value)
    live_counts.add(namespace, counts)
    return beam.pvalue.TaggedOutput(TALLY, dict(counts))


def progress(name: str, value: int) -> None:
    """Count progress that no output states, such as bytes read so far: a Beam counter in PROGRESS, and the run's
    progress line."""
    if value:
        Metrics.counter(PROGRESS, name).inc(value)
        live_counts.add(PROGRESS, {name: value})


class SumCounts(beam.CombineFn):
    def create_accumulator(self) -> Counter:
        return Counter()

    def add_input(self, acc: Counter, counts: dict) -> Counter:
        acc.update(counts)
        return acc

    def merge_accumulators(self, accs) -> Counter:
        total = Counter()
        for acc in accs:
            total.update(acc)
        return total

    def extract_output(self, acc: Counter) -> dict:
        return dict(sorted(acc.items()))
