"""The graph of `bertcorpus create`, which command.py runs: documents → NSP pairs → masked-LM instances →
globally shuffled shards.

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
runner; the values crossing its shuffles are typed, and their coders (values.py) do the encoding. The vocab's
bytes reach every step that needs them as one side input (job_vocab.py), not inside each step.

The recipe flags choose what the instances are (transforms/bucket_instances.py): static masks in TFRecords or
unmasked Parquet rows masked at load time, NSP, SOP or packed sentences, with or without length bins.
"""

from __future__ import annotations

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import CreateConfig
from bertcorpus.pipeline.create.job_vocab import JobVocab, carried_vocab
from bertcorpus.pipeline.create.megatron import MegatronParts
from bertcorpus.pipeline.create.publish import (
    Publish,
    RunOutcome,
    keyed_by_kind,
)
from bertcorpus.pipeline.create.shard_writing import WriteShards, carries_words
from bertcorpus.pipeline.create.steps import (
    BuildInstances,
    CountInstances,
    DocumentsOfBucket,
    ReadFiles,
    TokenizeBuckets,
    assign_buckets,
    bucket_and_id,
    plan_negatives,
)
from bertcorpus.pipeline.create.values import BucketMessage, InstancePiece
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues
from bertcorpus.pipeline.inputs.formats import SourceDocument
from bertcorpus.pipeline.inputs.reads import PlanReads
from bertcorpus.pipeline.sinks import documents
from bertcorpus.transforms.language_sampling import rates_by_output


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
        cfg, label = self.config, self.vocab.label
        # the vocab's bytes, once for every step that needs them (job_vocab.py); each step holds only its label
        vocab = carried_vocab(pbegin, self.vocab)
        # input files → (file path, start, stop) per reader → SourceDocument
        tasks = pbegin | "plan reads" >> PlanReads(self.input_files, cfg.input_format)
        read = tasks | "read documents" >> beam.ParDo(
            ReadFiles(cfg.input_format, cfg.language_setting, cfg.max_document_chars)
        ).with_outputs("files", "errors", tally.TALLY, main="docs")
        # dead-letter records → one staged errors file → its file info
        errors = read.errors | "write errors" >> documents.WriteErrors(cfg.output)
        # SourceDocument (or a piece of one longer than --max-document-mb) → (bucket key, SourceDocument)
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
            >> beam.ParDo(TokenizeBuckets(cfg, label), targets=beam.pvalue.AsSingleton(targets), vocab=vocab)
            .with_output_types(tuple[str, BucketMessage])
            .with_outputs(tally.TALLY, main="buckets")
        )
        if cfg.file_format == "megatron":
            # (bucket key, tokenised documents) → a part per bucket → merged files' infos (create/megatron.py)
            files = tokenized.buckets | "write megatron files" >> MegatronParts(cfg, label, vocab)
            return self._published(read, assigned, tokenized, None, None, files, errors, {}, vocab)
        # → (bucket key, [its documents, fragments from other buckets]) → ((config, split, shard), InstancePiece)
        gathered = tokenized.buckets | "gather negatives" >> GroupLargeValues()
        sampling = {}
        if cfg.language_sampling_alpha != 1:
            # Language sampling: each language's instances without sampling, counted per output and split over the
            # whole corpus → {"seq:split:language": rate}, one small dict that every bucket builds at
            counted = gathered | "count instances" >> beam.ParDo(CountInstances(cfg, label), vocab=vocab).with_outputs(
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
            BuildInstances(cfg, label), vocab=vocab, **sampling
        ).with_output_types(tuple[tuple[str, str, int], InstancePiece]).with_outputs(tally.TALLY, main="pieces")
        words = {}
        if cfg.file_format == "mds" and cfg.segmentation is not None:
            # whether any instance carries a segmenter's words, which every MDS shard then stores: one boolean
            carried = built.pieces | "carries words" >> beam.Map(carries_words)
            words = {"chinese_ref": beam.pvalue.AsSingleton(carried | "any carries words" >> beam.CombineGlobally(any))}
        # ((config, split, shard), [pieces]) → one staged file per shard that drew records → its file info
        shard_infos = (
            built.pieces
            | "group into shards" >> GroupLargeValues()
            | "write shards" >> beam.ParDo(WriteShards(cfg, label), vocab=vocab, **words)
        )
        counted = counted if sampling else None
        return self._published(read, assigned, tokenized, built, counted, shard_infos, errors, words, vocab)

    def _published(self, read, assigned, tokenized, built, counted, shard_infos, errors, words, vocab):
        """counts, file stats and shard (or Megatron file) infos → (kind, value) → one {"counts", "files",
        "shards"} → the manifest"""
        counts = [("reading counts", read), ("splitting counts", assigned), ("tokenizing counts", tokenized)]
        counts += [("building counts", built)] if built is not None else []
        parts = [
            values | f"label {what}" >> beam.Map(keyed_by_kind, kind)
            for what, kind, values in (
                *((what, "counts", step[tally.TALLY]) for what, step in counts),
                ("file stats", "files", read.files),
                ("shard infos", "shards", shard_infos),
                ("errors files", "errors", errors["files"]),
            )
        ]
        if counted is not None:
            parts.append(counted[tally.TALLY] | "label sampling counts" >> beam.Map(keyed_by_kind, "counts"))
        return (
            parts
            | "gather the outcome" >> beam.Flatten()
            | "sum the outcome" >> beam.CombineGlobally(RunOutcome())
            | "publish"
            >> beam.ParDo(
                Publish(self.config, self.vocab.label, self.vocab_sha256, self.inputs_skipped), vocab=vocab, **words
            )
        )
