"""create's steps as Beam DoFns: each reads its elements, calls the pure functions of transforms/, and emits
typed values (pipeline/create/values.py) and counts."""

from __future__ import annotations

import io
from dataclasses import asdict

import apache_beam as beam
import numpy as np

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import CreateConfig, bucket_key, shard_name, split_of
from bertcorpus.pipeline.create.job_vocab import JobVocab
from bertcorpus.pipeline.create.values import BucketMessage, InstancePiece
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.inputs.formats import InputError, ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import read_documents
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.bucket_instances import bucket_instances, shard_rows
from bertcorpus.transforms.instance_columns import InstanceColumns
from bertcorpus.transforms.instance_mds import mds_shard
from bertcorpus.transforms.instance_parquet import instances_table, write_instances
from bertcorpus.transforms.instances import Bucket, cut_long_sentences, sample_fragments
from bertcorpus.transforms.language_id import LanguageSetting
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.seeding import python_rng, stable_hash
from bertcorpus.transforms.sentences import document_sentences
from bertcorpus.transforms.tfrecord import serialize_framed
from bertcorpus.transforms.word_segmentation import word_continues
from bertcorpus.wordpiece.tokenizer import WordPieceTokenizer
from bertcorpus.wordpiece.vocab import UNK

NEGATIVE_TARGETS = 4  # other buckets of its split that a bucket sends fragments for random next segments to
NEGATIVE_SHARE = 1.0  # a bucket's tokens, in all, sent to them as fragments: a pool of many distinct segments


class ReadFiles(WatchedDoFn):
    """(file path, start, stop) → SourceDocument; a tagged 'errors' output carries a dead-letter record for each
    record that could not be read, and a tagged 'files' output the file's counts (and, from its whole-file or
    first-span reader, its fingerprint)."""

    def __init__(self, input_format: str, language: LanguageSetting | None = None):
        self.input_format = input_format
        self.language = language or LanguageSetting()

    def process(self, task: tuple[str, int, int]):
        path, start, stop = task
        stats = ReadStats(path)
        for doc in read_documents(path, self.input_format, stats, start, stop):
            if isinstance(doc, SourceDocument):
                found = self.language.resolve(doc.language, doc.text or " ".join(doc.sentences or ()))
                if found is not None:
                    doc.language = found.language
                yield doc
            else:
                yield beam.pvalue.TaggedOutput("errors", doc.record())
        yield beam.pvalue.TaggedOutput("files", asdict(stats))
        yield tally.emit(
            "create",
            {
                "documents_read": stats.documents,
                "replaced_chars": stats.replaced_chars,
                **{f"lines_skipped:{k}": v for k, v in stats.skipped.items()},
                **{f"errors:{k}": v for k, v in stats.errors.items()},
            },
        )


def assign_bucket(doc: SourceDocument, config: CreateConfig) -> tuple[str, SourceDocument]:
    """SourceDocument → (its bucket's key, the document)."""
    return bucket_key(doc.id, split_of(doc.id, config), config), doc


def bucket_order(doc: SourceDocument) -> tuple:
    """A bucket's order of documents: by id, then by everything else, so that equal ids stay reproducible."""
    return doc.id, doc.sentences is not None, doc.sentences or [], doc.text or ""


def fragment_targets(keys: list[str], seed: int) -> dict[str, tuple[int, list[str]]]:
    """Bucket key → (buckets in its split, the buckets it sends fragments to). A split's buckets that hold
    documents stand in a ring, in an order seeded by the run's seed; each sends fragments of its documents to the
    NEGATIVE_TARGETS buckets after it. So every bucket draws its random next segments from as many other buckets,
    whatever its own size, and eval buckets only from eval buckets. A split of one bucket sends nothing."""
    splits: dict[str, list[str]] = {}
    for key in sorted(keys):
        splits.setdefault(key.split("/")[0], []).append(key)
    targets = {}
    for ring in splits.values():
        ring.sort(key=lambda k: stable_hash(seed, "negatives ring", k))
        after = min(NEGATIVE_TARGETS, len(ring) - 1)
        for i, key in enumerate(ring):
            targets[key] = (len(ring), [ring[(i + j) % len(ring)] for j in range(1, after + 1)])
    return targets


class TokenizeBuckets(WatchedDoFn):
    """(bucket key, [SourceDocument]) → (bucket key, its tokenised documents) and, for each bucket it sends
    fragments to, (that key, fragments of its documents); counts to TALLY.

    Each document is tokenised here, once, and its ids serve every seq config and dupe pass of the bucket."""

    def __init__(self, config: CreateConfig, vocab: JobVocab):
        self.config = config
        self.vocab = vocab

    def setup(self):
        super().setup()
        vocab = self.vocab.load()
        self.tokenizer = WordPieceTokenizer(vocab, self.config.do_lower_case)
        self.unk = vocab.ids[UNK]
        self.segmentation = self.config.segmentation
        # A sentence longer than a pair of the shortest seq config can hold is cut into pieces (and counted).
        self.longest_sentence = min(seq.max_seq_length for seq in self.config.seq_configs) - 3

    def process(self, element, targets: dict):
        key, docs = element
        # GroupByKey order is arbitrary; sorting makes the bucket, and so everything after, reproducible.
        tokenized, counts = self.tokenize(sorted(docs, key=bucket_order))
        yield tally.emit("create", counts)
        if tokenized:
            ring_size, receivers = targets[key]
            bucket = Bucket.from_documents(tokenized)
            yield key, BucketMessage(bucket, ring_size=ring_size)
            if self.config.pair_objective == "nsp":  # only random next segments come from other buckets
                yield from self._fragments(bucket, key, receivers)

    def _fragments(self, bucket: Bucket, key: str, receivers: list[str]):
        """(receiver, fragments of this bucket's documents) for every bucket this one sends to. Its tokens, in
        all, are shared among its receivers: a bucket gets as many from as many senders as there are (one in a split
        of two buckets, four from five up), so its pool holds about its own tokens' worth of distinct segments."""
        if not receivers:  # a split of one bucket draws from its own documents
            return
        fragment_tokens = max(seq.max_seq_length for seq in self.config.seq_configs)
        count = max(1, round(NEGATIVE_SHARE * len(bucket.tokens) / (len(receivers) * fragment_tokens)))
        for receiver in receivers:
            rng = python_rng(self.config.seed, "negative fragments", key, receiver)
            fragments = Bucket.from_documents(sample_fragments(bucket, count, fragment_tokens, rng))
            yield receiver, BucketMessage(fragments, sender=key)

    def tokenize(self, docs: list[SourceDocument]) -> tuple[list, dict[str, int]]:
        """Documents → (id, ids, tokens per sentence) of those with any tokens, and counts."""
        tokenized = []
        counts = {
            "documents_kept": 0,
            "sentences": 0,
            "tokens": 0,
            "unk_tokens": 0,
            "single_sentence_documents": 0,
            "long_sentences_cut": 0,
            "documents_skipped:empty": 0,
        }
        for doc in docs:
            sentences = doc.sentences if doc.sentences is not None else document_sentences(doc.text or "")
            ids, lengths = self.tokenizer.encode_sentences(sentences)
            lengths = lengths[lengths > 0]  # a line that tokenises to nothing is dropped, as in the reference
            if not len(ids):
                counts["documents_skipped:empty"] += 1
                continue
            lengths, cut = cut_long_sentences(lengths, self.longest_sentence)
            counts["long_sentences_cut"] += cut
            language = doc.language or UNDETERMINED
            counts[f"language_documents:{language}"] = counts.get(f"language_documents:{language}", 0) + 1
            counts[f"language_tokens:{language}"] = counts.get(f"language_tokens:{language}", 0) + len(ids)
            if self.segmentation is not None:
                tokenized.append((doc.id, ids, lengths, self._word_continues(sentences, counts)))
            else:
                tokenized.append((doc.id, ids, lengths))
            counts["documents_kept"] += 1
            counts["sentences"] += len(lengths)
            counts["tokens"] += len(ids)
            counts["unk_tokens"] += int(np.count_nonzero(ids == self.unk))
            counts["single_sentence_documents"] += int(len(lengths) == 1)
        if not counts["documents_skipped:empty"]:
            del counts["documents_skipped:empty"]  # the manifest lists only the reasons that occurred
        return tokenized, counts

    def _word_continues(self, sentences: list[str], counts: dict) -> np.ndarray | None:
        """The segmenter's words of a document's tokens (whole-word masking), counted; None where it has no
        ideograph, or where its text and tokens disagree on them (counted: then every character is a word)."""
        ideographs = self.tokenizer.ideograph_tokens(sentences)
        if not ideographs.any():
            return None
        continues = word_continues(sentences, ideographs, self.segmentation)
        if continues is None:
            counts["segmentation_misaligned_documents"] = counts.get("segmentation_misaligned_documents", 0) + 1
            return None
        counts["segmented_characters"] = counts.get("segmented_characters", 0) + int(ideographs.sum())
        counts["segmented_word_continuations"] = counts.get("segmented_word_continuations", 0) + int(continues.sum())
        return continues


class UnbalancedSplitError(InputError):
    """A split whose documents cannot give random next segments: no other document to draw from."""


class BuildInstances(WatchedDoFn):
    """(bucket key, [its own BucketMessage, fragments from other buckets]) → ((seq config, split, shard),
    InstancePiece) for every shard its instances go to; counts to TALLY."""

    def __init__(self, config: CreateConfig, vocab: JobVocab):
        self.config = config
        self.vocab = vocab

    def setup(self):
        super().setup()
        self.special = special_ids(self.vocab.load())

    def process(self, element):
        key, messages = element
        # A bucket whose documents had no tokens sends no message of its own; the fragments sent to it go unused.
        for own in (m for m in messages if m.sender is None):
            yield from self._bucket_instances(key, own, messages)

    def _bucket_instances(self, key: str, own: BucketMessage, messages: list[BucketMessage]):
        cfg, split = self.config, key.split("/")[0]
        # The fragments in the order of the buckets that sent them: the pool is the same on every runner.
        fragments = [m.bucket for m in sorted((m for m in messages if m.sender is not None), key=lambda m: m.sender)]
        pool_size = sum(len(f) for f in fragments)
        if not pool_size and len(own.bucket) < 2 and own.ring_size == 1 and cfg.pair_objective == "nsp":
            remedy = (
                "pass --eval-fraction 0 for no eval split, or a larger one"
                if split == "eval"
                else "give create more than one document"
            )
            raise UnbalancedSplitError(
                f"the {split} split holds a single document ({own.bucket.doc_ids[0]}), so "
                f"it can have no random next segments and its NSP labels could not be "
                f"balanced; {remedy}"
            )
        bucket = Bucket.concatenate([own.bucket, *fragments]) if pool_size else own.bucket
        pool = range(len(own.bucket), len(own.bucket) + pool_size) if pool_size else None
        tiebreak = stable_hash(key) >> 1  # 63 bits: an int64 column, and a varint the shuffle can encode
        for seq in cfg.seq_configs:
            built = bucket_instances(bucket, len(own.bucket), pool, cfg.recipe(seq), self.special, cfg.seed, key)
            prefix = f"{seq.name}:{split}"
            yield tally.emit(
                "create",
                {
                    **{f"{prefix}:{k}": v for k, v in built.counts.items()},
                    **{f"{prefix}:skipped:{k}": v for k, v in built.skipped.items()},
                },
            )
            for shard, rows in shard_rows(built.sort_keys, cfg.shards(split)):
                yield (
                    (seq.name, split, shard),
                    InstancePiece(tiebreak, built.sort_keys[rows], rows, built.instances.take(rows)),
                )


class WriteShards(WatchedDoFn):
    """((seq config, split, shard), [InstancePiece]) → one staged shard file, its instances in the order of their
    random keys: TFRecords (static masking), or Parquet or MDS (dynamic)."""

    def __init__(self, config: CreateConfig, vocab: JobVocab):
        self.config = config
        self.vocab = vocab

    def setup(self):
        super().setup()
        self.vocab_size = len(self.vocab.load().tokens) if self.config.masking == "dynamic" else 0

    def process(self, element):
        (seq_name, split, shard), pieces = element
        written = self.write(seq_name, split, shard, list(pieces))
        tally.progress("instances_written", written["records"])
        yield written

    def write(self, seq_name: str, split: str, shard: int, pieces: list[InstancePiece]) -> dict:
        seq = next(s for s in self.config.seq_configs if s.name == seq_name)
        rel = shard_name(self.config, seq, split, shard)
        parts, part, row = shard_order(pieces)
        if self.config.masking == "static":
            chunks = _records_in_order(parts, part, row)
        else:
            instances = (
                InstanceColumns.gather(parts, part, row) if len(part) else InstanceColumns.empty(seq.max_seq_length)
            )
            if self.config.file_format == "mds":
                chunks = [mds_shard(instances, self.config.mds_columns(self.vocab_size))]
            else:
                chunks = [_parquet_bytes(instances, self.vocab_size)]
        size, sha = output.write_bytes(output.staging_path(self.config.output, rel), chunks)
        return {"path": rel, "records": len(part), "bytes": size, "sha256": sha}


def shard_order(pieces: list[InstancePiece]) -> tuple[list[InstanceColumns], np.ndarray, np.ndarray]:
    """A shard's pieces, and (piece, row in the piece) of its instances sorted by their random keys; equal keys
    (rare) by bucket, then by their place in the bucket."""
    columns = [[np.zeros(0, np.int64)] for _ in range(5)]  # key, tie, row in the bucket, piece, row in the piece
    for number, piece in enumerate(pieces):
        n = len(piece.sort_keys)
        for values, column in zip((piece.sort_keys, piece.tiebreak, piece.rows, number, np.arange(n)), columns):
            column.append(np.broadcast_to(np.int64(values), n))
    key, tie, row, part, at = (np.concatenate(c) for c in columns)
    order = np.lexsort((row, tie, key))
    return [p.instances for p in pieces], part[order], at[order]


def _records_in_order(parts: list[InstanceColumns], part: np.ndarray, row: np.ndarray, chunk: int = 4096):
    """Framed records of instance row[i] of parts[part[i]] for every i, made a few thousand at a time."""
    for start in range(0, len(part), chunk):
        step = slice(start, start + chunk)
        yield serialize_framed(InstanceColumns.gather(parts, part[step], row[step]).features()).data


def _parquet_bytes(instances: InstanceColumns, vocab_size: int) -> bytes:
    sink = io.BytesIO()
    write_instances(instances_table(instances, vocab_size), sink)
    return sink.getvalue()
