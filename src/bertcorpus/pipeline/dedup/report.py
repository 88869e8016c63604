"""What dedup reports beside the cleaned documents: the benchmark examples found in the corpus, and the largest
clusters of copies.

    (benchmark text number, (priority, id)) ─ group by text ─ (benchmark, found text) ─ group by benchmark ─
        OUT/contaminated-NAME.jsonl (every benchmark, empty where nothing was found) and a summary per benchmark
    verdicts ─ (kept twin, removed document) ─ size per cluster ─ the TOP_CLUSTERS largest, with their ledger files
"""

from __future__ import annotations

import json

import apache_beam as beam

from bertcorpus.pipeline.dedup.benchmark_files import report_file
from bertcorpus.pipeline.dedup.config import DedupConfig
from bertcorpus.pipeline.dedup.read import shard_of
from bertcorpus.pipeline.dedup.write import ledger_file
from bertcorpus.pipeline.sinks import output

TOP_CLUSTERS = 20
FOUND_IN_SHOWN = 10  # documents named per contaminated example


def _found_text(element, index):
    """(text number, [(priority, id)]) → (benchmark, (text number, documents, the first of them))."""
    text, found = element
    docs = sorted(set(found))
    yield int(index.text_benchmark[text]), (text, len(docs), docs[:FOUND_IN_SHOWN])


class _WriteContaminated(beam.DoFn):
    """(benchmark, [found texts, or None]) → OUT/.staging/contaminated-NAME.jsonl, one line per example holding a
    found text, in the benchmark's order; its file info and summary."""

    def __init__(self, config: DedupConfig):
        self.config = config

    def process(self, element, index):
        benchmark, found = element
        names = self.config.names
        examples: dict[str, dict] = {}
        texts = sorted(f for f in found if f is not None)
        for text, count, docs in texts:
            for example in index.examples[text]:
                entry = examples.setdefault(example, {"example": example, "texts": 0, "documents": 0, "found_in": []})
                entry["texts"] += 1
                entry["documents"] += count
                shown = {(d["source"], d["id"]) for d in entry["found_in"]}
                for p, doc_id in docs:
                    if len(shown) < FOUND_IN_SHOWN and (names[p], doc_id) not in shown:
                        shown.add((names[p], doc_id))
                        entry["found_in"].append({"source": names[p], "id": doc_id})
        data = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in examples.values())
        relative = report_file(self.config.benchmark_names[benchmark])
        size, sha = output.write_bytes(output.staging_path(self.config.output, relative), [data.encode()])
        yield {
            "path": relative,
            "kind": "contaminated",
            "benchmark": benchmark,
            "records": len(examples),
            "bytes": size,
            "sha256": sha,
            "texts_found": len(texts),
        }


class ContaminationReport(beam.PTransform):
    """{"begin": the pipeline's start, "hits": (text number, (priority, id)), "index": the NgramIndex} → one file
    info per benchmark, with its counts."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self.config = config

    def expand(self, parts):
        hits, index = parts["hits"], beam.pvalue.AsSingleton(parts["index"])
        every = parts["begin"] | "list benchmarks" >> beam.Create(
            [(b, None) for b in range(len(self.config.benchmarks))]
        )
        found = (
            hits | "group by benchmark text" >> beam.GroupByKey() | "found texts" >> beam.FlatMap(_found_text, index)
        )
        files = (
            (found, every)
            | "every benchmark" >> beam.Flatten()
            | "group by benchmark" >> beam.GroupByKey()
            | "write contaminated examples" >> beam.ParDo(_WriteContaminated(self.config), index)
        )
        return files


class _Clusters(beam.CombineFn):
    """(kept node, (reason, ledger file)) per removed document → per cluster: removed by reason, ledger files."""

    def create_accumulator(self):
        return {"exact": 0, "near": 0, "ledger": set()}

    def add_input(self, acc, value):
        reason, ledger = value
        acc[reason] += 1
        acc["ledger"].add(ledger)
        return acc

    def merge_accumulators(self, accs):
        merged = self.create_accumulator()
        for acc in accs:
            merged["exact"] += acc["exact"]
            merged["near"] += acc["near"]
            merged["ledger"] |= acc["ledger"]
        return merged

    def extract_output(self, acc):
        return {"exact": acc["exact"], "near": acc["near"], "ledger": sorted(acc["ledger"])}


class _Largest(beam.CombineFn):
    """The TOP_CLUSTERS clusters that removed the most documents; the smallest kept node first among equals."""

    @staticmethod
    def _order(item):
        node, summary = item
        return -(summary["exact"] + summary["near"]), node

    def create_accumulator(self):
        return []

    def add_input(self, acc, item):
        return sorted([*acc, item], key=self._order)[:TOP_CLUSTERS]

    def merge_accumulators(self, accs):
        return sorted((item for acc in accs for item in acc), key=self._order)[:TOP_CLUSTERS]

    def extract_output(self, acc):
        return acc


class TopClusters(beam.PTransform):
    """(removed node, Verdict) → one list of the largest clusters: the kept document, the copies it has by reason,
    and the ledger files that hold their rows."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self.config = config

    def _member(self, node, verdict):
        priority, doc_id, _ = node
        shards = self.config.num_shards[priority]
        ledger = ledger_file(self.config.names[priority], shard_of(doc_id, shards), shards)
        return verdict.twin, (verdict.reason, ledger)

    def expand(self, verdicts):
        return (
            verdicts
            | "members" >> beam.MapTuple(self._member)
            | "size clusters" >> beam.CombinePerKey(_Clusters())
            | "largest clusters" >> beam.CombineGlobally(_Largest())
        )
