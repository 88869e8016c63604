"""create's steps as Beam DoFns: each reads its elements, calls the pure functions of transforms/, and emits
typed values (pipeline/create/values.py) and counts."""

from __future__ import annotations

from dataclasses import asdict

import apache_beam as beam
import numpy as np

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.create.config import CreateConfig, bucket_key, split_of
from bertcorpus.pipeline.create.job_vocab import StepWithVocab
from bertcorpus.pipeline.create.values import BucketMessage, InstancePiece
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.inputs.formats import InputError, ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import read_documents
from bertcorpus.transforms.bucket_instances import (
    bucket_instances,
    count_by_language,
    sampled_bucket_instances,
    shard_rows,
)
from bertcorpus.transforms.document_pieces import PART
from bertcorpus.transforms.document_tokens import DocumentTokenizer
from bertcorpus.transforms.instances import Bucket, cut_long_sentences, sample_fragments, sentence_parts
from bertcorpus.transforms.language_id import LanguageSetting
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.masking import special_ids
from bertcorpus.transforms.seeding import python_rng, stable_hash
from bertcorpus.transforms.sentences import unsplit_sentences
from bertcorpus.wordpiece.piece_encoder import unit_local
from bertcorpus.wordpiece.sequence_layout import SequenceLayout
from bertcorpus.wordpiece.tokenizer import has_tokens
from bertcorpus.wordpiece.tokenizer_file import TokenizerFile

NEGATIVE_TARGETS = 4  # other buckets of its split that a bucket sends fragments for random next segments to
NEGATIVE_SHARE = 1.0  # a bucket's tokens, in all, sent to them as fragments: a pool of many distinct segments


class ReadFiles(WatchedDoFn):
    """(file path, start, stop) → SourceDocument; a tagged 'errors' output carries a dead-letter record for each
    record that could not be read, and a tagged 'files' output the file's counts (and, from its whole-file or
    first-span reader, its fingerprint)."""

    def __init__(self, input_format: str, language: LanguageSetting, cap: int):
        self.input_format = input_format
        self.language = language
        self.cap = cap  # --max-document-mb in characters: the reader cuts a longer document into pieces

    def process(self, task: tuple[str, int, int]):
        path, start, stop = task
        stats = ReadStats(path)
        for doc in read_documents(path, self.input_format, stats, start, stop, cap=self.cap):
            if isinstance(doc, SourceDocument):
                found = self.language.resolve(doc.language, doc.plain_text)
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
                "documents_split": stats.split,
                "document_pieces": stats.pieces,
                "replaced_chars": stats.replaced_chars,
                "unknown_language_tags": stats.unknown_language_tags,  # read as none: counted, never silent
                **{f"lines_skipped:{k}": v for k, v in stats.skipped.items()},
                **{f"errors:{k}": v for k, v in stats.errors.items()},
            },
        )


def assign_buckets(doc: SourceDocument, config: CreateConfig):
    """SourceDocument → (its bucket's key, the document). A piece of a document longer than --max-document-mb (the
    reader cuts one as it reads it) goes to a bucket of its own, beside the planned ones, in the split of the
    document it comes from (so that no text of one document is in both): the buckets are planned from the inputs'
    sizes, which say nothing of a compressed file's one huge line, and a bucket is what a worker holds at once."""
    split = split_of(doc.whole_id or doc.id, config)
    if doc.whole_id is None:
        yield bucket_key(doc.id, split, config), doc
    else:
        yield f"{bucket_key(doc.whole_id, split, config)}+{doc.id.rsplit(PART, 1)[1]}", doc


def bucket_and_id(item: tuple[str, SourceDocument]) -> tuple[str, str | None]:
    """(bucket key, document) → (bucket key, the document's id, None where it has no text to tokenise)."""
    key, doc = item
    texts = doc.sentences if doc.sentences is not None else [doc.text or ""]
    return key, doc.id if any(has_tokens(text) for text in texts) else None


class DocumentsOfBucket(beam.CombineFn):
    """A bucket's document ids (None for a document without tokens) → (how many with tokens, the least of their
    ids): enough to refuse a split of one document before anything is tokenised."""

    def create_accumulator(self):
        return 0, None

    def add_input(self, acc, doc_id):
        if doc_id is None:
            return acc
        return acc[0] + 1, doc_id if acc[1] is None else min(acc[1], doc_id)

    def merge_accumulators(self, accs):
        accs = list(accs)
        ids = [doc_id for _, doc_id in accs if doc_id is not None]
        return sum(n for n, _ in accs), min(ids) if ids else None

    def extract_output(self, acc):
        return acc


def plan_negatives(buckets: list[tuple[str, tuple[int, str]]], config: CreateConfig) -> dict:
    """(bucket key, (documents, least id)) of every bucket → fragment_targets; a split of one document is refused
    here, with NSP, before any document is tokenised: it can have no random next segments."""
    if config.pair_objective == "nsp":
        documents: dict[str, list] = {}
        for key, (count, doc_id) in buckets:
            documents.setdefault(key.split("/")[0], []).append((count, doc_id))
        for split, found in documents.items():
            if sum(count for count, _ in found) == 1:
                raise single_document_error(split, next(doc_id for count, doc_id in found if count))
    return fragment_targets([key for key, _ in buckets], config.seed)


def single_document_error(split: str, doc_id: str) -> UnbalancedSplitError:
    remedy = (
        "pass --eval-fraction 0 for no eval split, or a larger one"
        if split == "eval"
        else "give create more than one document"
    )
    return UnbalancedSplitError(
        f"the {split} split holds a single document ({doc_id}), so it can have no random next segments and its NSP "
        f"labels could not be balanced; {remedy}"
    )


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


class TokenizeBuckets(StepWithVocab):
    """(bucket key, [SourceDocument]) → (bucket key, its tokenised documents) and, for each bucket it sends
    fragments to, (that key, fragments of its documents); counts to TALLY.

    Each document is tokenised here, once, and its ids serve every seq config and dupe pass of the bucket."""

    def use_vocab(self, vocab):
        self.tokenizer = DocumentTokenizer(vocab, self.config.do_lower_case, self.config.segmentation)
        # A sentence longer than a pair of the shortest seq config can hold is cut into pieces (and counted).
        specials = special_ids(vocab).templates.pair_specials
        self.longest_sentence = min(seq.max_seq_length for seq in self.config.seq_configs) - specials

    def process(self, element, targets: dict, vocab: bytes | None = None):
        self.vocab_ready(vocab)
        key, docs = element
        # GroupByKey order is arbitrary; sorting makes the bucket, and so everything after, reproducible.
        tokenized, counts, languages, spans = self.tokenize(sorted(docs, key=bucket_order))
        yield tally.emit("create", counts)
        if tokenized:
            ring_size, receivers = targets[key]
            bucket = Bucket.from_documents(tokenized, languages, spans)
            yield key, BucketMessage(bucket, ring_size=ring_size)
            # only random next segments come from other buckets, and Megatron's sentences need none
            if self.config.pair_objective == "nsp" and self.config.file_format != "megatron":
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
            yield receiver, BucketMessage(sample_fragments(bucket, count, fragment_tokens, rng), sender=key)

    def tokenize(self, docs: list[SourceDocument]) -> tuple[list, dict[str, int], list[str], list | None]:
        """Documents → (id, ids, tokens per sentence) of those with any tokens, counts, their languages, and with
        provenance their sentences' stretches of text."""
        tokenized = []
        languages = []
        spans = []
        counts = {
            "documents_kept": 0,
            "sentences": 0,
            "tokens": 0,
            "unk_tokens": 0,
            "single_sentence_documents": 0,
            "long_sentences_cut": 0,
            "unsplit_paragraphs": 0,
            "documents_skipped:empty": 0,
        }
        provenance = self.config.provenance
        for doc in docs:
            found = self.tokenizer.tokenize(doc.text, doc.sentences, spans=provenance)
            kept = found.lengths > 0  # a line of no tokens is dropped, as in the reference
            ids, lengths = found.ids, found.lengths[kept]
            if not len(ids):
                counts["documents_skipped:empty"] += 1
                continue
            if provenance:  # a sentence cut into parts gives each part its whole stretch of text
                spans.append(np.repeat(found.spans[kept], sentence_parts(lengths, self.longest_sentence), axis=0))
            lengths, cut = cut_long_sentences(lengths, self.longest_sentence)
            counts["long_sentences_cut"] += cut
            language = doc.language or UNDETERMINED
            languages.append(language)
            counts[f"language_documents:{language}"] = counts.get(f"language_documents:{language}", 0) + 1
            counts[f"language_tokens:{language}"] = counts.get(f"language_tokens:{language}", 0) + len(ids)
            if self.config.segmentation is not None:
                tokenized.append((doc.id, ids, lengths, self._word_continues(found, counts)))
            else:
                tokenized.append((doc.id, ids, lengths))
            counts["documents_kept"] += 1
            counts["sentences"] += len(lengths)
            counts["tokens"] += len(ids)
            counts["unk_tokens"] += (
                0 if self.tokenizer.unk is None else int(np.count_nonzero(ids == self.tokenizer.unk))
            )
            counts["single_sentence_documents"] += int(len(lengths) == 1)
            counts["unsplit_paragraphs"] += unsplit_sentences(found.sentences)
            if found.specials_as_text:
                counts["special_tokens_as_text"] = counts.get("special_tokens_as_text", 0) + found.specials_as_text
        if not counts["documents_skipped:empty"]:
            del counts["documents_skipped:empty"]  # the manifest lists only the reasons that occurred
        return tokenized, counts, languages, spans if provenance else None

    @staticmethod
    def _word_continues(found, counts: dict) -> np.ndarray | None:
        """The segmenter's words of a document's tokens (whole-word masking), counted; None where it has no
        ideograph, or where its text and tokens disagree on them (counted: then every character is a word)."""
        if found.misaligned:
            counts["segmentation_misaligned_documents"] = counts.get("segmentation_misaligned_documents", 0) + 1
        continues = found.word_continues
        if continues is None:
            return None
        counts["segmented_characters"] = counts.get("segmented_characters", 0) + found.ideographs
        counts["segmented_word_continuations"] = counts.get("segmented_word_continuations", 0) + int(continues.sum())
        return continues


class UnbalancedSplitError(InputError):
    """A split whose documents cannot give random next segments: no other document to draw from."""


def bucket_pool(key: str, own: BucketMessage, messages: list[BucketMessage], pair_objective: str):
    """A bucket's own documents followed by the fragments other buckets sent it, in the order of their senders (the
    same on every runner), and the range of those fragments: its pool of random next segments, or None."""
    fragments = [m.bucket for m in sorted((m for m in messages if m.sender is not None), key=lambda m: m.sender)]
    pool_size = sum(len(f) for f in fragments)
    split = key.split("/")[0]
    if not pool_size and len(own.bucket) < 2 and own.ring_size == 1 and pair_objective == "nsp":
        # plan_negatives saw more, but the others had no tokens after all (only accents, which lower-casing strips)
        raise single_document_error(split, own.bucket.doc_ids[0])
    if not pool_size:
        return own.bucket, None
    return Bucket.concatenate([own.bucket, *fragments]), range(len(own.bucket), len(own.bucket) + pool_size)


def language_parts(bucket: Bucket, documents: int, pool: range | None):
    """For language sampling: (language, its bucket, its documents, its pool) for each language of the first
    `documents` documents of `bucket`, its documents first. Random next segments come from the pool the bucket
    has, or, in a split of one bucket, from the bucket's other documents (those of the language where there are
    any: random_next_sources)."""
    languages = bucket.languages or [UNDETERMINED] * len(bucket)
    for language in sorted(set(languages[:documents])):
        mine = [d for d in range(documents) if languages[d] == language]
        rest = list(pool) if pool is not None else [d for d in range(documents) if languages[d] != language]
        part = bucket.select(mine + rest)
        yield language, part, len(mine), range(len(mine), len(part)) if pool is not None else None


def unsampled_counts(
    cfg: CreateConfig, layout: SequenceLayout, key: str, bucket: Bucket, documents: int, pool
) -> dict[str, dict]:
    """{seq config: {language: instances a run without language sampling makes of the bucket's documents}}: the
    same draws, counted (deterministic, so CountInstances and BuildInstances find the same)."""
    return {
        seq.name: count_by_language(bucket, documents, pool, cfg.recipe(seq, layout), cfg.seed, key)
        for seq in cfg.seq_configs
    }


class CountInstances(StepWithVocab):
    """(bucket key, [its own BucketMessage, fragments]) → ("seq:split:language", instances a run without language
    sampling makes of the bucket's documents of that language: the same draws, counted), for the rates of language
    sampling; the same counts to TALLY, for the manifest's targets."""

    def use_vocab(self, vocab):
        self.layout = special_ids(vocab).templates

    def process(self, element, vocab: bytes | None = None):
        self.vocab_ready(vocab)
        key, messages = element
        cfg, split = self.config, key.split("/")[0]
        counts = {}
        for own in (m for m in messages if m.sender is None):
            bucket, pool = bucket_pool(key, own, messages, cfg.pair_objective)
            for seq_name, found in unsampled_counts(cfg, self.layout, key, bucket, len(own.bucket), pool).items():
                for language, n in found.items():
                    counts[f"{seq_name}:{split}:{language}"] = counts.get(f"{seq_name}:{split}:{language}", 0) + n
        yield from sorted(counts.items())
        yield tally.emit("create", {f"language_unsampled:{k}": v for k, v in counts.items()})


class BuildInstances(StepWithVocab):
    """(bucket key, [its own BucketMessage, fragments from other buckets]) → ((seq config, split, shard),
    InstancePiece) for every shard its instances go to; counts to TALLY. With language sampling, each language of
    the bucket is built on its own, at its rate (the `rates` side input: {"seq:split:language": rate})."""

    def use_vocab(self, vocab):
        self.special = special_ids(vocab)
        # a tokenizer that does not encode a text as its units one after another: provenance by sentence
        self.by_sentence = isinstance(vocab, TokenizerFile) and not unit_local(vocab)

    def process(self, element, rates: dict | None = None, vocab: bytes | None = None):
        self.vocab_ready(vocab)
        key, messages = element
        # A bucket whose documents had no tokens sends no message of its own; the fragments sent to it go unused.
        for own in (m for m in messages if m.sender is None):
            bucket, pool = bucket_pool(key, own, messages, self.config.pair_objective)
            if rates is None:
                yield from self._instances(key, key, bucket, len(own.bucket), pool)
                continue
            # The instances a run without sampling makes of each language here, times the language's rate
            unsampled = unsampled_counts(self.config, self.special.templates, key, bucket, len(own.bucket), pool)
            for language, part, documents, part_pool in language_parts(bucket, len(own.bucket), pool):
                sampling = (rates, language, {name: found.get(language, 0) for name, found in unsampled.items()})
                yield from self._instances(key, f"{key}/{language}", part, documents, part_pool, sampling)

    def _instances(
        self,
        key: str,
        seed_key: str,
        bucket: Bucket,
        documents: int,
        pool: range | None,
        sampling: tuple | None = None,
    ):
        """The instances of the first `documents` documents of `bucket`, to their shards; with `sampling` (the
        rates, the documents' language, and {seq: its instances in a run without sampling}), at the language's
        rate."""
        cfg, split = self.config, key.split("/")[0]
        tiebreak = stable_hash(seed_key) >> 1  # 63 bits: an int64 column, and a varint the shuffle can encode
        for seq in cfg.seq_configs:
            recipe = cfg.recipe(seq, self.special.templates, self.by_sentence)
            if sampling is None:
                built = bucket_instances(bucket, documents, pool, recipe, self.special, cfg.seed, seed_key)
            else:
                rates, language, unsampled = sampling
                rate = rates.get(f"{seq.name}:{split}:{language}", 0.0)
                built = sampled_bucket_instances(
                    bucket, documents, pool, recipe, self.special, cfg.seed, seed_key, rate * unsampled[seq.name], rate
                )
            prefix = f"{seq.name}:{split}"
            yield tally.emit(
                "create",
                {
                    **{f"{prefix}:{k}": v for k, v in built.counts.items()},
                    **{f"{prefix}:skipped:{k}": v for k, v in built.skipped.items()},
                },
            )
            # Parquet rows and MDS samples name their language: TFRecords' instances cross the shuffle without it.
            keep_languages = built.languages is not None and cfg.file_format != "tfrecord"
            tags = tuple(built.language_tags) if keep_languages else ()
            for shard, rows in shard_rows(built.sort_keys, cfg.shards(split)):
                languages = built.languages[rows] if keep_languages else None
                provenance = built.provenance.take(rows) if built.provenance is not None else None
                piece = InstancePiece(
                    tiebreak, built.sort_keys[rows], rows, built.instances.take(rows), tags, languages, provenance
                )
                yield (seq.name, split, shard), piece
