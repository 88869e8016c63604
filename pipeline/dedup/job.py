"""`bertcorpus dedup`: several documents sources in priority order → one cleaned documents output per source, without
exact and near copies (across and within sources) and without the benchmark text the user names; every removal a
row of the ledger.

    read tasks ─ read documents (once: word hashes → exact key, MinHash bands, benchmark matches) ─┬─ fingerprints
      fingerprints ─ ExactCopies ─ bands ─ CandidatePairs ─ CandidateShingles ─ MeasurePairs ─ similar pairs
      similar pairs ─ ConnectedComponents ─ (kept, removed) ─ MeasureTwins ─ NearVerdicts ─┐
      exact verdicts ────────────────────────────────────────────────────────────────────┴─ verdicts ─ TopClusters
    documents (with their matches) + verdicts + dead letters ─ WriteShards: OUT/NAME/documents-*, removed-NAME-*
    benchmark hits ─ ContaminationReport: contaminated-*.jsonl
    counts, file infos, input stats, reports ─ Publish: OUT/NAME/manifest.json, then OUT/manifest.json

Texts cross one shuffle, the one into output shards; every other shuffle carries ids and hashes (shingle sets of
the documents LSH paired, read again for them). All decisions are made on sorted values, so the output is the same
whatever the runner and its workers. pipeline/dedup/near.py has the duplicate steps, read.py the reading, write.py
the shards, report.py the reports, publish.py the manifests; the pure functions are transforms/near_duplicates.py,
minhash.py, decontamination.py and benchmark_texts.py. docs/dedup.md says what is removed and why.
"""

from __future__ import annotations

import sys

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.benchmark_files import load_index
from bertcorpus.pipeline.dedup.config import DedupConfig, config_from_args
from bertcorpus.pipeline.dedup.config import add_arguments as add_arguments  # the command's flags, for the CLI
from bertcorpus.pipeline.dedup.near import (
    CandidatePairs,
    CandidateShingles,
    ConnectedComponents,
    ExactCopies,
    MeasurePairs,
    MeasureTwins,
    NearVerdicts,
)
from bertcorpus.pipeline.dedup.publish import JOB, Publish
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


def summary_rows(manifest: dict) -> list[tuple[str, str]]:
    """The closing summary, every number from the manifest."""
    rows = []
    for s in manifest["sources"]:
        removed = ", ".join(f"{reason} {n:,}" for reason, n in s["removed"].items() if n) or "none"
        chars = s["characters"]
        more = s["split"]["pieces"] - s["split"]["documents"]  # a document cut into pieces is kept or removed as them
        rows.append(
            (
                s["name"],
                f"read {s['read']:,}{f' + {more:,} more pieces' if more else ''} = kept {s['kept']:,} + removed "
                f"{sum(s['removed'].values()):,} "
                f"({removed}) + skipped {sum(s['skipped'].values()):,} + errors {s['errors']:,}",
            )
        )
        rows.append(
            (
                f"{s['name']} characters",
                f"read {chars['read']:,} = kept {chars['kept']:,} + removed "
                f"{chars['removed']:,}; too short to compare {s['too_short_to_compare']:,}",
            )
        )
        if s["split"]["documents"]:
            rows.append(
                (
                    f"{s['name']} documents cut",
                    f"{s['split']['documents']:,} longer than --max-document-mb, into {s['split']['pieces']:,} pieces",
                )
            )
        if s["replaced_chars"]:
            rows.append((f"{s['name']} invalid UTF-8", f"{s['replaced_chars']:,} characters replaced by U+FFFD"))
    dup = manifest["duplicates"]
    rows.append(("pairs", f"{dup['pairs_measured']:,} measured, {dup['pairs_similar']:,} at or above the threshold"))
    for b in manifest["benchmarks"]:
        where = ", ".join(f"{n} {c:,}" for n, c in b["documents"].items() if c) or "nowhere"
        rows.append(
            (
                f"benchmark {b['name']}",
                f"{b['contaminated_examples']:,} of {b['examples']:,} examples found (documents: {where})",
            )
        )
    rows.append(("output", manifest["config"]["output"]))
    return rows


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline import tally
    from bertcorpus.pipeline.cli.job_skeleton import finish, run_job
    from bertcorpus.pipeline.engines import runners
    from bertcorpus.pipeline.engines.run_progress import ProgressPlan
    from bertcorpus.pipeline.sinks.documents import error_check

    options = runners.pipeline_options(beam_args)
    config = config_from_args(args, runners.is_dry_run(options))
    inputs = [s.path for s in config.sources] + config.benchmarks
    # The progress line: the bytes of the sources' files read (benchmark files are small), documents written.
    plan = ProgressPlan(
        sum(size for s in config.sources for _, size in s.files),
        None,
        (f"{tally.PROGRESS}/documents_written", "documents"),
    )
    run = run_job(JOB, options, "dedup" >> Dedup(config), config.output, inputs, args.overwrite, plan)
    if run is None:
        return 0
    manifest = run.manifest
    if manifest["duplicates"]["unsettled"]:
        print(
            f"bertcorpus dedup: warning: {manifest['duplicates']['unsettled']:,} documents in clusters that "
            f"--cc-rounds {config.cc_rounds} did not settle were kept; rerun with more rounds to remove them",
            file=sys.stderr,
        )
    read = sum(s["read"] for s in manifest["sources"])
    errors = sum(s["errors"] for s in manifest["sources"])
    problem = error_check({"documents": {"read": read, "errors": errors}}, config.strict, config.max_error_rate)
    return finish(
        JOB,
        run,
        summary_rows(manifest),
        [problem and f"{problem}; the output is complete, and each NAME/errors-*.jsonl says what could not be read"],
    )
