"""The graph of `bertcorpus dedup`, which command.py runs: several documents sources in priority order → one
cleaned documents output per source, without exact and near copies (across and within sources) and without the
benchmark text the user names; every removal a row of the ledger.

    read tasks ─ read documents (once: word hashes → exact key, MinHash bands, benchmark matches) ─┬─ fingerprints
      fingerprints ─ ExactCopies ─ bands ─ CandidatePairs ─ CandidateShingles ─ MeasurePairs ─ similar pairs
      similar pairs ─ ConnectedComponents ─ (kept, removed) ─ MeasureTwins ─ NearVerdicts ─┐
      exact verdicts ────────────────────────────────────────────────────────────────────┴─ verdicts ─ TopClusters
    documents (with their matches) + verdicts + dead letters ─ WriteShards: OUT/NAME/documents-*, removed-NAME-*
    benchmark hits ─ ContaminationReport: contaminated-*.jsonl
    counts, file infos, input stats, reports ─ Publish: OUT/NAME/manifest.json, then OUT/manifest.json

Texts cross one shuffle, the one into output shards; every other shuffle carries ids and hashes (shingle sets of
the documents LSH paired, read again for them). All decisions are made on sorted values, so the output is the same
whatever the runner and its workers. In pipeline/dedup/, command.py has the flags and the run, near.py the
duplicate steps, read.py the reading, write.py the shards, report.py the reports, publish.py the manifests; the
pure functions are transforms/near_duplicates.py, minhash.py, decontamination.py and benchmark_texts.py.
docs/dedup.md says what is removed and why.
"""

from __future__ import annotations

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.benchmark_files import load_index
from bertcorpus.pipeline.dedup.config import DedupConfig
from bertcorpus.pipeline.dedup.near import (
    CandidatePairs,
    CandidateShingles,
    ConnectedComponents,
    ExactCopies,
    MeasurePairs,
    MeasureTwins,
    NearVerdicts,
)
from bertcorpus.pipeline.dedup.publish import Publish
from bertcorpus.pipeline.dedup.read import ReadSources, shard_of
from bertcorpus.pipeline.dedup.report import ContaminationReport, TopClusters
from bertcorpus.pipeline.dedup.values import NodeType, ShardItem
from bertcorpus.pipeline.dedup.write import WriteShards


class Dedup(beam.PTransform):
    """The whole job on a pipeline; returns the PCollection holding the top manifest."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self.config = config

    def _to_shard(self, node, verdict):
        priority, doc_id, digest = node
        shard = shard_of(doc_id, self.config.num_shards[priority])
        return (priority, shard), ShardItem(verdict=(doc_id, digest, verdict))

    def expand(self, pbegin):
        cfg = self.config
        tasks = cfg.tasks()
        # benchmark files → one n-gram index (None without benchmarks), read on a worker
        index = (
            pbegin
            | "list benchmark files" >> beam.Create([cfg.benchmarks])
            | "index benchmark n-grams"
            >> beam.Map(
                lambda paths: (
                    load_index(paths, cfg.benchmark_names, cfg.benchmark_text_fields, cfg.ngram, cfg.min_ngram)
                    if paths
                    else None
                )
            )
        )
        # (task number, (priority, path, start, stop)) → fingerprints, documents, hits, dead letters, file stats
        read = (
            pbegin
            | "list read tasks" >> beam.Create(list(enumerate(tasks)))
            | "spread reads" >> beam.Reshuffle()
            | "read documents"
            >> beam.ParDo(ReadSources(cfg), beam.pvalue.AsSingleton(index)).with_outputs(
                "documents", "hits", "errors", "files", tally.TALLY, main="fingerprints"
            )
        )
        exact = read.fingerprints | "exact copies" >> ExactCopies()
        pairs = exact.bands | "candidate pairs" >> CandidatePairs()
        shingles = pairs | "shingles of paired documents" >> CandidateShingles(cfg, tasks)
        node_pairs = pairs | "pairs of nodes" >> beam.Map(lambda p: (p[0][0], p[1][0])).with_output_types(
            tuple[NodeType, NodeType]
        )
        measured = {"pairs": node_pairs, "shingles": shingles} | "measure candidates" >> MeasurePairs(
            "candidates", cfg.threshold
        )
        similar = measured.measured | "keep similar pairs" >> beam.Filter(lambda m: m[1] >= cfg.threshold)
        components = (
            similar
            | "edges" >> beam.Map(lambda m: m[0]).with_output_types(tuple[NodeType, NodeType])
            | "connected components" >> ConnectedComponents(cfg.cc_rounds)
        )
        twins = {
            "twins": components.removed,
            "measured": measured.measured,
            "shingles": shingles,
        } | "measure twins" >> MeasureTwins(cfg.threshold)
        near = {"twins": twins["measured"], "edges": similar} | "near verdicts" >> NearVerdicts(cfg.threshold)
        verdicts = (exact.verdicts, near) | "all verdicts" >> beam.Flatten()
        clusters = verdicts | "top clusters" >> TopClusters(cfg)
        items = (
            read.documents,
            read.errors,
            verdicts | "verdicts to shards" >> beam.MapTuple(self._to_shard),
        ) | "merge shard items" >> beam.Flatten().with_output_types(tuple[tuple[int, int], ShardItem])
        written = {"items": items, "index": index} | "write shards" >> WriteShards(cfg)
        report = {"begin": pbegin, "hits": read.hits, "index": index} | "contamination report" >> ContaminationReport(
            cfg
        )
        counts = [
            read[tally.TALLY],
            exact[tally.TALLY],
            measured[tally.TALLY],
            components[tally.TALLY],
            twins[tally.TALLY],
            written[tally.TALLY],
        ] | "merge counts" >> beam.Flatten()
        files = (written["files"], report) | "merge file infos" >> beam.Flatten()
        return (
            files
            | "list files" >> beam.combiners.ToList()
            | "publish"
            >> beam.ParDo(
                Publish(cfg),
                beam.pvalue.AsSingleton(counts | "sum counts" >> beam.CombineGlobally(tally.SumCounts())),
                beam.pvalue.AsList(read.files),
                beam.pvalue.AsSingleton(index),
                beam.pvalue.AsSingleton(clusters),
            )
        )


# ---------------------------------------------------------------------------------------------- command line
