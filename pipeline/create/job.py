"""`bertcorpus create`: documents → NSP pairs → masked-LM instances → globally shuffled shards.

    input files ─ read documents ─┬─ (bucket, SourceDocument) ─ GroupByKey ─ tokenize buckets (ring of bucket keys
                                  │   as a side input) ─ (bucket, its tokenised documents) and, to each of the 4
                                  │   next buckets of its split, (that bucket, fragments of its documents)
                                  │   ─ GroupByKey ─ build instances: per seq config × dupe pass: pairs, masking
                                  │   ─ ((config, split, shard), InstancePiece: instances with random sort keys)
                                  │   ─ GroupByKey ─ write shards: records made in key order ─┐
                                  └─ counts, file stats ─────────────────────────────────────┴─ publish + manifest

Documents are tokenised once; every dupe pass and every seq config reuses the ids. A bucket (documents grouped
by a stable hash of their id) is the unit of memory and of randomness: it has its own seeded generators, and
its random next segments come from fragments of the documents of other buckets of its split. Instances get
random 63-bit keys and travel to their shard in compact columns; each shard's records are made and written in
key order, which shuffles the output globally without holding it in one place. The graph is the same on every
runner; the values crossing its shuffles are typed, and their coders (values.py) do the encoding.

The recipe flags choose what the instances are (transforms/bucket_instances.py): static masks in TFRecords or
unmasked Parquet rows masked at load time, NSP, SOP or packed sentences, with or without length bins.
"""

from __future__ import annotations

import sys

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import CreateConfig, config_from_args
from bertcorpus.pipeline.create.config import add_arguments as add_arguments  # the command's flags, for the CLI
from bertcorpus.pipeline.create.job_vocab import JobVocab, read_job_vocab
from bertcorpus.pipeline.create.publish import (
    Publish,
    RunOutcome,
    keyed_by_kind,
    languages_without_instances,
    output_notes,
)
from bertcorpus.pipeline.create.steps import (
    BuildInstances,
    CountInstances,
    DocumentsOfBucket,
    ReadFiles,
    TokenizeBuckets,
    WriteShards,
    assign_buckets,
    bucket_and_id,
    plan_negatives,
)
from bertcorpus.pipeline.create.values import BucketMessage, InstancePiece
from bertcorpus.pipeline.engines import runners
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues
from bertcorpus.pipeline.engines.run_progress import ProgressPlan
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.pipeline.inputs.reads import PlanReads
from bertcorpus.pipeline.inputs.streams import estimated_text_bytes
from bertcorpus.pipeline.sinks import documents
from bertcorpus.pipeline.vocab.files import recorded_unk_share
from bertcorpus.transforms.language_sampling import rates_by_output
from bertcorpus.wordpiece.vocab_checks import casing_mismatch, unk_share_mismatch


class CreatePretrainingData(beam.PTransform):
    """The whole job on a pipeline; returns the PCollection holding the manifest."""

    def __init__(
        self,
        config: CreateConfig,
        vocab: JobVocab,
        vocab_sha256: str,
        input_files: list[str],
        inputs_skipped: dict[str, int] | None = None,
    ):
        super().__init__()
        self.config = config
        self.vocab = vocab
        self.vocab_sha256 = vocab_sha256
        self.input_files = input_files
        self.inputs_skipped = inputs_skipped or {}

    def expand(self, pbegin):
        cfg = self.config
        # input files → (file path, start, stop) per reader → SourceDocument
        tasks = pbegin | "plan reads" >> PlanReads(self.input_files, cfg.input_format)
        read = tasks | "read documents" >> beam.ParDo(ReadFiles(cfg.input_format, cfg.language_setting)).with_outputs(
            "files", "errors", tally.TALLY, main="docs"
        )
        # dead-letter records → one staged errors file → its file info
        errors = read.errors | "write errors" >> documents.WriteErrors(cfg.output)
        # SourceDocument → (bucket key, SourceDocument), or its pieces where it is longer than --max-document-mb
        assigned = read.docs | "assign buckets" >> beam.FlatMap(assign_buckets, cfg).with_output_types(
            tuple[str, SourceDocument]
        ).with_outputs(tally.TALLY, main="docs")
        keyed = assigned.docs
        # bucket keys → {bucket key: (buckets in its split, buckets it sends fragments to)}, one small dict; a split
        # of one document is refused here, before anything is tokenised
        targets = (
            keyed
            | "list buckets" >> beam.Map(bucket_and_id)
            | "count documents" >> beam.CombinePerKey(DocumentsOfBucket())
            | "gather buckets" >> beam.combiners.ToList()
            | "plan negatives" >> beam.Map(plan_negatives, cfg)
        )
        # The three shuffles below carry the job's bytes: GroupLargeValues is a GroupByKey, whose local expansion
        # keeps those bytes in spill files (pipeline/engines/local_shuffle.py).
        # → (bucket key, [documents]) → (bucket key, tokenised documents) + (other bucket key, fragments)
        tokenized = (
            keyed
            | "group into buckets" >> GroupLargeValues()
            | "tokenize buckets"
            >> beam.ParDo(TokenizeBuckets(cfg, self.vocab), targets=beam.pvalue.AsSingleton(targets))
            .with_output_types(tuple[str, BucketMessage])
            .with_outputs(tally.TALLY, main="buckets")
        )
        # → (bucket key, [its documents, fragments from other buckets]) → ((config, split, shard), InstancePiece)
        gathered = tokenized.buckets | "gather negatives" >> GroupLargeValues()
        sampling = {}
        if cfg.language_sampling_alpha != 1:
            # Language sampling: each language's instances without sampling, counted per output and split over the
            # whole corpus → {"seq:split:language": rate}, one small dict that every bucket builds at
            counted = gathered | "count instances" >> beam.ParDo(CountInstances(cfg)).with_outputs(
                tally.TALLY, main="counts"
            )
            rates = (
                counted.counts
                | "sum the counts" >> beam.CombinePerKey(sum)
                | "gather the counts" >> beam.combiners.ToDict()
                | "language rates" >> beam.Map(rates_by_output, cfg.language_sampling_alpha)
            )
            sampling = {"rates": beam.pvalue.AsSingleton(rates)}
        built = gathered | "build instances" >> beam.ParDo(
            BuildInstances(cfg, self.vocab), **sampling
        ).with_output_types(tuple[tuple[str, str, int], InstancePiece]).with_outputs(tally.TALLY, main="pieces")
        # ((config, split, shard), [pieces]) → one staged file per shard that drew records → its file info
        shard_infos = (
            built.pieces
            | "group into shards" >> GroupLargeValues()
            | "write shards" >> beam.ParDo(WriteShards(cfg, self.vocab))
        )
        # counts, file stats and shard infos → (kind, value) → one {"counts", "files", "shards"} → the manifest
        parts = [
            values | f"label {what}" >> beam.Map(keyed_by_kind, kind)
            for what, kind, values in (
                ("reading counts", "counts", read[tally.TALLY]),
                ("splitting counts", "counts", assigned[tally.TALLY]),
                ("tokenizing counts", "counts", tokenized[tally.TALLY]),
                ("building counts", "counts", built[tally.TALLY]),
                ("file stats", "files", read.files),
                ("shard infos", "shards", shard_infos),
                ("errors files", "errors", errors["files"]),
            )
        ]
        if sampling:
            parts.append(counted[tally.TALLY] | "label sampling counts" >> beam.Map(keyed_by_kind, "counts"))
        return (
            parts
            | "gather the outcome" >> beam.Flatten()
            | "sum the outcome" >> beam.CombineGlobally(RunOutcome())
            | "publish" >> beam.ParDo(Publish(cfg, self.vocab, self.vocab_sha256, self.inputs_skipped))
        )


def run(args, beam_args: list[str]) -> int:
    from bertcorpus.pipeline.cli.job_skeleton import finish, run_job
    from bertcorpus.pipeline.errors import UserError
    from bertcorpus.pipeline.inputs.discovery import find_inputs
    from bertcorpus.pipeline.sinks.up_to_date import Reuse

    options = runners.pipeline_options(beam_args)
    dry_run = runners.is_dry_run(options)
    config = config_from_args(args)
    found = find_inputs(config.inputs, allow_missing=dry_run)
    found.print_note()
    files = found.files
    if not files and not dry_run:
        raise UserError("no input files given")
    if files and not any(size for _, size in files):
        raise UserError(f"the input files ({len(files)}) are all empty; nothing to do")
    vocab, vocab_sha = read_job_vocab(config.vocab, dry_run, runners.is_rendering(options))
    if vocab.data is not None and (problem := casing_mismatch(vocab.load().tokens, config.do_lower_case, config.vocab)):
        print(f"warning: {problem}", file=sys.stderr)
    config = config.resolved(sum(estimated_text_bytes(path, size) for path, size in files))
    job = "create pretraining data" >> CreatePretrainingData(
        config, vocab, vocab_sha, [p for p, _ in files] or list(config.inputs), found.skipped_counts()
    )
    plan = ProgressPlan(
        sum(size for _, size in files),
        ("create/documents_read", "documents"),
        ("progress/instances_written", "instances"),
    )
    # Apart from the vocab too: a dynamic run publishes a copy of it under the output's own name.
    reuse = Reuse(config.describe(), files, {"vocab.sha256": vocab_sha}) if args.reuse else None
    run = run_job("create", options, job, config.output, [*config.inputs, config.vocab], args.overwrite, plan, reuse)
    if run is None:
        return 0
    manifest = run.manifest
    counts = manifest["counts"]
    for note in output_notes(manifest):
        print(f"warning: {note}", file=sys.stderr)
    if problem := unk_share_mismatch(
        counts["unk_tokens"], counts["tokens"], recorded_unk_share(config.vocab, vocab_sha), config.vocab
    ):
        print(f"warning: {problem}", file=sys.stderr)
    problem = documents.error_check(manifest, config.strict, config.max_error_rate)
    return finish(
        "create",
        run,
        _summary_rows(manifest),
        [
            problem
            and (f"{problem}; the output is complete, and {config.output}/errors-*.jsonl says what could not be read")
        ],
    )


def _summary_rows(manifest: dict) -> list[tuple[str, str]]:
    docs, form = manifest["documents"], manifest["form"]
    rows = [("documents read", f"{docs['read']:,}"), ("documents kept", f"{docs['kept']:,}")]
    if split := docs["split"]["documents"]:
        rows.append(
            ("documents cut", f"{split:,} longer than --max-document-mb, into {docs['split']['pieces']:,} pieces")
        )
    rows += [(f"documents skipped ({k})", f"{v:,}") for k, v in docs["skipped"].items()]
    rows += [(f"errors ({k})", f"{v:,} in errors-*.jsonl") for k, v in docs["errors_by_reason"].items()]
    rows += documents.skipped_rows(manifest["inputs_skipped"])
    rows += [(k.replace("_", " "), f"{v:,}") for k, v in manifest["counts"].items()]
    rows.append(
        (
            "form",
            f"{form['masking']} masking ({form['file_format']}), pair objective "
            f"{form['pair_objective']}" + (f", bins of {form['bin_size']}" if form["bin_size"] else ""),
        )
    )
    label = {"random_next": "random-next", "swapped": "swapped"}.get(form["label"])
    for name, out in manifest["outputs"].items():
        for split in ("train", "eval"):
            if split in out:
                o = out[split]
                shards = len(o["shards"])
                share = f", {label} {o['label_share']:.4f}" if label and o["instances"] else ""
                rows.append(
                    (
                        f"{name} {split} instances",
                        f"{o['instances']:,} in {shards} shard{'s' if shards != 1 else ''}{share}",
                    )
                )
                if form.get("language_sampling_alpha", 1) != 1 and o.get("languages"):
                    rows.append((f"{name} {split} languages", _language_shares(o["languages"])))
    if missing := languages_without_instances(manifest):
        named = ", ".join(f"{k} ({v:,} document{'s' * (v != 1)})" for k, v in missing.items())
        rows.append(("languages without instances", named))
    return rows


def _language_shares(report: dict) -> str:
    """`ja 0.4120 (target 0.4118), vi ...`: each language's achieved and target share, largest first."""
    ranked = sorted(report.items(), key=lambda kv: (-kv[1]["target_share"], kv[0]))
    return ", ".join(f"{lang} {e['achieved_share']:.4f} (target {e['target_share']:.4f})" for lang, e in ranked)
