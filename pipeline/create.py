"""`bertcorpus create`: documents → NSP pairs → masked-LM instances → globally shuffled TFRecord shards.

    input files ─ read documents ─┬─ (bucket, document) ─ GroupByKey ─ tokenize buckets (ring of bucket keys
                                  │   as a side input) ─ (bucket, its tokenised documents) and, to each of the 4
                                  │   next buckets of its split, (that bucket, fragments of its documents)
                                  │   ─ GroupByKey ─ build instances: per seq config × dupe pass: NSP pairs, masking
                                  │   ─ ((config, split, shard), instances with random sort keys)
                                  │   ─ GroupByKey ─ write shards: records made in key order ─┐
                                  └─ counts, file stats ─────────────────────────────────────┴─ publish + manifest

Documents are tokenised once; every dupe pass and every seq config reuses the ids. A bucket (documents grouped
by a stable hash of their id) is the unit of memory and of randomness: it has its own seeded generators, and
its random next segments come from fragments of the documents of other buckets of its split. Instances get
random 63-bit keys and travel to their shard in compact columns (transforms/instance_columns.py); each shard's
records are made and written in key order, which shuffles the output globally without holding it in one place.
The graph is the same on every runner.
"""
from __future__ import annotations

import math
import sys
import typing
from collections import Counter
from dataclasses import asdict, dataclass, field

import apache_beam as beam
import numpy as np
import zstandard

from pipeline import output, runners, tally
from pipeline.local_shuffle import GroupLargeValues
from pipeline.sources import InputError, PlanReads, ReadStats, merge_file_stats, read_documents
from transforms.instance_columns import InstanceColumns
from transforms.instances import Bucket, InstanceBatch, SeqConfig, create_instances_from_document, sample_fragments
from transforms.masking import SpecialIds, assemble, mask_tokens
from transforms.seeding import numpy_rng, python_rng, stable_hash, unit_interval
from transforms.sentences import document_sentences
from transforms.tfrecord import serialize_framed
from wordpiece.tokenizer import WordPieceTokenizer
from wordpiece.vocab import CLS, MASK, SEP, Vocab, VocabError, read_vocab_bytes

RECORD_GLOBS = ["seq*/train-*.tfrecord", "seq*/eval-*.tfrecord"]
# Bytes of text per stored byte of a compressed input, measured on the bundled books and Wikipedia articles
# (docs/dataflow.md): buckets and shards are sized by the text they will hold, not by the bytes that hold it.
TEXT_PER_STORED_BYTE = {".parquet": 2.5, ".zst": 2.7, ".gz": 2.6, ".bz2": 3.5}
NEGATIVE_TARGETS = 4  # other buckets of its split that a bucket sends fragments for random next segments to
NEGATIVE_SHARE = 1.0  # a bucket's tokens, in all, sent to them as fragments: a pool of many distinct segments
SHARD_TARGET_MB = 256  # of records, per train shard when --num-shards is left to the job
RECORD_BYTES_PER_TEXT_BYTE = 2  # per dupe pass, at 128/20 and at 512/80 alike


# The automatic eval split: 1% of the documents, but at least EVAL_TEXT_BYTES of text where the input allows (up to
# 10%), so that a small corpus's eval split holds enough documents for random next segments; none below
# MIN_EVAL_TEXT_BYTES of eval text, where a split of a few documents would measure nothing.
EVAL_TEXT_BYTES = 256 * 1024
MIN_EVAL_TEXT_BYTES = 32 * 1024


def auto_eval_fraction(text_bytes: float) -> float:
    fraction = min(0.1, max(0.01, EVAL_TEXT_BYTES / max(text_bytes, 1)))
    return fraction if fraction * text_bytes >= MIN_EVAL_TEXT_BYTES else 0.0


def estimated_text_bytes(path: str, size: int) -> float:
    """How much text a file of `size` bytes holds, from its name alone: sizes come from the filesystem's
    listing, the same for a local and a remote copy of the file, and no file is opened at launch."""
    name = path.lower()
    return size * next((factor for suffix, factor in TEXT_PER_STORED_BYTE.items() if name.endswith(suffix)), 1.0)


@dataclass
class CreateConfig:
    inputs: list[str]
    output: str
    vocab: str
    input_format: str = "auto"
    seq_configs: list[SeqConfig] = field(default_factory=lambda: [SeqConfig(128, 20)])
    dupe_factor: int = 10
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    seed: int = 12345
    do_lower_case: bool = True
    whole_word_mask: bool = False
    num_shards: int = 0          # train shards per seq config; 0 = sized from the input
    eval_fraction: float | None = None  # None = sized from the input (auto_eval_fraction)
    num_buckets: int = 0         # 0 = sized from the input (bucket_mb of text per bucket)
    bucket_mb: float = 1.0

    def resolved(self, text_bytes: float) -> "CreateConfig":
        """A copy with the automatic sizes decided from the inputs' estimated text, so the manifest records what
        actually ran."""
        mb = max(text_bytes, 1) / 2**20
        buckets = self.num_buckets or max(1, math.ceil(mb / self.bucket_mb))
        # Aim at SHARD_TARGET_MB shards, and at least 4 files so that the reference trainer's 4-way interleave
        # has something to interleave. A multiple of 4 shares the writing evenly between 2 or 4 workers.
        records_mb = RECORD_BYTES_PER_TEXT_BYTE * mb * self.dupe_factor
        shards = self.num_shards or 4 * math.ceil(max(4, records_mb / SHARD_TARGET_MB) / 4)
        eval_fraction = auto_eval_fraction(text_bytes) if self.eval_fraction is None else self.eval_fraction
        return CreateConfig(**{**asdict(self), "seq_configs": list(self.seq_configs), "num_buckets": buckets,
                               "num_shards": shards, "eval_fraction": eval_fraction})

    @property
    def eval_buckets(self) -> int:
        return max(1, round(self.num_buckets * self.eval_fraction))

    @property
    def eval_shards(self) -> int:
        return max(1, math.ceil(self.num_shards * self.eval_fraction)) if self.eval_fraction > 0 else 0

    def shards(self, split: str) -> int:
        return self.num_shards if split == "train" else self.eval_shards

    def describe(self) -> dict:
        d = asdict(self)
        d["seq_configs"] = [f"{c.max_seq_length}:{c.max_predictions_per_seq}" for c in self.seq_configs]
        del d["output"]  # where the records went is not part of what they are
        return d


@dataclass(frozen=True)
class JobVocab:
    """The vocab as read at launch. Its bytes travel inside the job, so that every worker, on this machine or
    elsewhere, tokenises with exactly the file that was checked; they are None only in a dry run that could not
    read a remote vocab, where the workers would read the path and check it against the digest."""
    path: str
    sha256: str | None = None
    data: bytes | None = None

    def load(self) -> Vocab:
        vocab = Vocab.from_bytes(self.data, self.path) if self.data is not None else Vocab.load(self.path)
        if self.sha256 and vocab.sha256 != self.sha256:
            raise VocabError(f"vocab file {self.path} as a worker read it differs from the file read at launch "
                             f"(sha256 {vocab.sha256}, {self.sha256} at launch): was it changed while the job ran?")
        return vocab


def split_of(doc_id: str, config: CreateConfig) -> str:
    return "eval" if unit_interval(config.seed, "eval-split", doc_id) < config.eval_fraction else "train"


def bucket_key(doc_id: str, split: str, config: CreateConfig) -> str:
    count = config.num_buckets if split == "train" else config.eval_buckets
    return f"{split}/{stable_hash(config.seed, 'bucket', doc_id) % count:06d}"


def shard_name(seq: SeqConfig, split: str, shard: int, count: int) -> str:
    return f"{seq.name}/{split}-{shard:05d}-of-{count:05d}.tfrecord"


class ReadFiles(beam.DoFn):
    """(file path, start, stop) → SourceDocument; a tagged 'files' output carries the file's counts (and, from its
    whole-file or first-span reader, its fingerprint)."""

    def __init__(self, input_format: str):
        self.input_format = input_format

    def process(self, task: tuple[str, int, int]):
        path, start, stop = task
        stats = ReadStats(path)
        for doc in read_documents(path, self.input_format, stats, start, stop):
            yield doc
        yield beam.pvalue.TaggedOutput("files", asdict(stats))
        yield tally.emit("create", {"documents_read": stats.documents, "replaced_chars": stats.replaced_chars,
                                    **{f"lines_skipped:{k}": v for k, v in stats.skipped.items()}})


def assign_bucket(doc, config: CreateConfig) -> tuple[str, tuple[tuple[str, bool], bytes]]:
    """SourceDocument → (bucket key, ((id, one sentence per line?), its text in UTF-8)): the text crosses the
    shuffle as bytes, which a local run keeps in spill files (local_shuffle.GroupLargeValues)."""
    lines = doc.sentences is not None
    text = "\n".join(doc.sentences) if lines else doc.text or ""
    return bucket_key(doc.id, split_of(doc.id, config), config), ((doc.id, lines), text.encode("utf-8"))


def document_of(tag: tuple[str, bool], data: bytes) -> tuple[str, str | None, list[str] | None]:
    """What assign_bucket made of a SourceDocument, back as (id, text, sentences)."""
    (doc_id, lines), text = tag, data.decode("utf-8")
    return (doc_id, None, text.split("\n")) if lines else (doc_id, text, None)


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


class TokenizeBuckets(beam.DoFn):
    """(bucket key, documents) → (bucket key, (("bucket", buckets in the split), the tokenised Bucket's bytes))
    and, for each bucket it sends fragments to, (that key, (("fragments", this key), their Bucket's bytes));
    counts to TALLY. Bytes cross the shuffle as one value each, where Beam would pickle every array of a list.

    Each document is tokenised here, once, and its ids serve every seq config and dupe pass of the bucket."""

    def __init__(self, config: CreateConfig, vocab: JobVocab):
        self.config = config
        self.vocab = vocab

    def setup(self):
        self.tokenizer = WordPieceTokenizer(self.vocab.load(), self.config.do_lower_case)

    def process(self, element, targets: dict):
        key, docs = element
        # GroupByKey order is arbitrary; sorting makes the bucket, and so everything after, reproducible.
        docs = [document_of(tag, data) for tag, data in sorted(docs)]
        tokenized, counts = self._tokenize(docs)
        yield tally.emit("create", counts)
        if tokenized:
            ring_size, receivers = targets[key]
            bucket = Bucket.from_documents(tokenized)
            yield key, (("bucket", ring_size), bucket.to_bytes())
            yield from self._fragments(bucket, key, receivers)

    def _fragments(self, bucket: Bucket, key: str, receivers: list[str]):
        """(receiver, (("fragments", key), fragments as a Bucket's bytes)) for every bucket this one sends to."""
        fragment_tokens = max(seq.max_seq_length for seq in self.config.seq_configs)
        count = max(1, round(NEGATIVE_SHARE * len(bucket.tokens) / (NEGATIVE_TARGETS * fragment_tokens)))
        for receiver in receivers:
            rng = python_rng(self.config.seed, "negative fragments", key, receiver)
            fragments = Bucket.from_documents(sample_fragments(bucket, count, fragment_tokens, rng))
            yield receiver, (("fragments", key), fragments.to_bytes())

    def _tokenize(self, docs) -> tuple[list, dict[str, int]]:
        """(id, text, sentences) documents → (id, ids, tokens per sentence) of those with any tokens, and counts."""
        tokenized = []
        counts = {"documents_kept": 0, "sentences": 0, "tokens": 0, "single_sentence_documents": 0,
                  "documents_skipped:empty": 0}
        for doc_id, text, sentences in docs:
            ids, lengths = self.tokenizer.encode_sentences(sentences if sentences is not None
                                                           else document_sentences(text or ""))
            lengths = lengths[lengths > 0]  # a line that tokenises to nothing is dropped, as in the reference
            if not len(ids):
                counts["documents_skipped:empty"] += 1
                continue
            tokenized.append((doc_id, ids, lengths))
            counts["documents_kept"] += 1
            counts["sentences"] += len(lengths)
            counts["tokens"] += len(ids)
            counts["single_sentence_documents"] += int(len(lengths) == 1)
        if not counts["documents_skipped:empty"]:
            del counts["documents_skipped:empty"]  # the manifest lists only the reasons that occurred
        return tokenized, counts


class UnbalancedSplitError(InputError):
    """A split whose documents cannot give random next segments: no other document to draw from."""


class BuildInstances(beam.DoFn):
    """(bucket key, [its tokenised documents, fragments from other buckets]) → ((seq config, split, shard),
    (bucket tie-break, piece)), where a piece is the packed sort keys, row numbers and zstd-compressed instance
    columns (`pack_piece`)."""

    def __init__(self, config: CreateConfig, vocab: JobVocab):
        self.config = config
        self.vocab = vocab

    def setup(self):
        vocab = self.vocab.load()
        ids = vocab.ids
        self.special = SpecialIds(cls=ids[CLS], sep=ids[SEP], mask=ids[MASK], regular=vocab.regular_token_ids(),
                                  is_continuation=np.array([t.startswith("##") for t in vocab.tokens]))
        self.compressor = zstandard.ZstdCompressor(level=1)

    def process(self, element):
        key, values = element
        # A bucket whose documents had no tokens sends no "bucket" value; the fragments sent to it go unused.
        for (_, ring_size), packed in (v for v in values if v[0][0] == "bucket"):
            yield from self._bucket_instances(key, Bucket.from_bytes(packed), ring_size, values)

    def _bucket_instances(self, key: str, own: Bucket, ring_size: int, values: list):
        split = key.split("/")[0]
        # The fragments in the order of the buckets that sent them: the pool is the same on every runner.
        sent = sorted((sender, packed) for (kind, sender), packed in values if kind == "fragments")
        fragments = [Bucket.from_bytes(packed) for _, packed in sent]
        pool_size = sum(len(f) for f in fragments)
        if not pool_size and len(own) < 2 and ring_size == 1:
            remedy = ("pass --eval-fraction 0 for no eval split, or a larger one" if split == "eval" else
                      "give create more than one document")
            raise UnbalancedSplitError(f"the {split} split holds a single document ({own.doc_ids[0]}), so it can "
                                       f"have no random next segments and its NSP labels could not be balanced; "
                                       f"{remedy}")
        bucket = Bucket.concatenate([own, *fragments]) if pool_size else own
        pool = range(len(own), len(own) + pool_size) if pool_size else None
        tiebreak = stable_hash(key) >> 1  # 63 bits: an int64 column, and a varint the shuffle can encode
        for seq in self.config.seq_configs:
            yield from self._instances_for(bucket, len(own), pool, key, split, seq, tiebreak)

    def _instances_for(self, bucket: Bucket, documents: int, pool: range | None, key: str, split: str,
                       seq: SeqConfig, tiebreak: int):
        cfg = self.config
        num_shards = cfg.shards(split)
        passes: list[InstanceColumns] = []
        sort_keys: list[np.ndarray] = []
        counts = {"instances": 0, "random_next": 0, "real_tokens": 0, "predictions": 0}
        skipped: dict[str, int] = {}
        owed = 0  # the label balance, carried from pass to pass: a pass's end drops no label it owes
        for dupe in range(cfg.dupe_factor):
            batch = InstanceBatch(balance=owed)
            rng = python_rng(cfg.seed, "instances", key, seq.name, dupe)
            last_pass = dupe == cfg.dupe_factor - 1
            for doc in range(documents):
                batch.may_owe = not (last_pass and doc == documents - 1)
                create_instances_from_document(bucket, doc, seq.max_seq_length - 3, cfg.short_seq_prob, rng, batch,
                                               pool)
            owed = batch.balance
            if last_pass:  # what the labels still owe would lean a bucket of few instances
                batch.drop_surplus(counts["random_next"], counts["instances"] - counts["random_next"])
            for reason, n in batch.skipped.items():
                skipped[reason] = skipped.get(reason, 0) + n
            if not len(batch):
                continue
            nrng = numpy_rng(cfg.seed, "masking", key, seq.name, dupe)
            columns = batch.columns()
            rows = assemble(bucket.tokens, columns, seq.max_seq_length, self.special, nrng)
            masked = mask_tokens(rows, cfg.masked_lm_prob, seq.max_predictions_per_seq, self.special, nrng,
                                 whole_word=cfg.whole_word_mask)
            labels = columns[4]
            passes.append(InstanceColumns(masked.input_ids, rows.length, rows.len_a, masked.positions,
                                          masked.label_ids, masked.count, labels))
            sort_keys.append(nrng.integers(0, 2**63, len(labels), dtype=np.int64))
            counts["instances"] += len(labels)
            counts["random_next"] += int(labels.sum())
            counts["real_tokens"] += int(rows.length.sum())
            counts["predictions"] += int(masked.count.sum())
        prefix = f"{seq.name}:{split}"
        yield tally.emit("create", {**{f"{prefix}:{k}": v for k, v in counts.items()},
                                    **{f"{prefix}:nsp_skipped:{k}": v for k, v in skipped.items()}})
        if not passes:
            return
        # Every pass's instances (in pass order, numbered by `rows`), regrouped by shard; records are made from
        # them when the shard is written.
        instances = InstanceColumns.concatenate(passes)
        keys = np.concatenate(sort_keys)
        shard_of = keys % num_shards
        order = np.argsort(shard_of, kind="stable")
        bounds = np.searchsorted(shard_of[order], np.arange(num_shards + 1))
        for shard in range(num_shards):
            lo, hi = bounds[shard], bounds[shard + 1]
            if hi > lo:
                rows_in = order[lo:hi]
                # One compressed blob per piece: the shuffle moves a few large values.
                blob = self.compressor.compress(instances.take(rows_in).to_bytes())
                yield (seq.name, split, shard), (tiebreak, pack_piece(keys[rows_in], rows_in, blob))


def pack_piece(keys: np.ndarray, rows: np.ndarray, instances: bytes) -> bytes:
    """One bucket's instances for one shard: count, sort keys, row numbers, zstd-compressed InstanceColumns."""
    return b"".join([np.int64(len(keys)).tobytes(), keys.astype(np.int64).tobytes(),
                     rows.astype(np.int64).tobytes(), instances])


def unpack_piece(data: bytes) -> tuple[np.ndarray, np.ndarray, memoryview]:
    n = int(np.frombuffer(data, np.int64, 1)[0])
    keys, rows = np.frombuffer(data, np.int64, 2 * n, 8).reshape(2, n)
    return keys, rows, memoryview(data)[8 * (1 + 2 * n):]


class WriteShards(beam.DoFn):
    """((seq config, split, shard), pieces) → one staged TFRecord file, records sorted by their random keys."""

    def __init__(self, config: CreateConfig):
        self.config = config

    def process(self, element):
        (seq_name, split, shard), pieces = element
        yield self.write(seq_name, split, shard, list(pieces))

    def write(self, seq_name: str, split: str, shard: int, pieces: list) -> dict:
        # piece: (bucket tie-break, packed piece)
        decompressor = zstandard.ZstdDecompressor()
        # Per instance: its sort key, its bucket's tie-break, its row in the bucket, its piece, its row in the piece.
        parts, columns = [], {"key": [], "tie": [], "row": [], "part": [], "at": []}
        for tiebreak, piece in pieces:
            keys, rows, packed = unpack_piece(piece)
            parts.append(InstanceColumns.from_bytes(decompressor.decompress(packed)))
            for name, values in (("key", keys), ("tie", tiebreak), ("row", rows), ("part", len(parts) - 1),
                                 ("at", np.arange(len(keys)))):
                columns[name].append(np.broadcast_to(np.int64(values), len(keys)))
        key, tie, row, part, at = (np.concatenate([np.zeros(0, np.int64), *c]) for c in columns.values())
        # Sorted by the random keys; equal keys (rare) by bucket, then by their place in the bucket.
        order = np.lexsort((row, tie, key))
        seq = next(s for s in self.config.seq_configs if s.name == seq_name)
        rel = shard_name(seq, split, shard, self.config.shards(split))
        size, sha = output.write_bytes(output.staging_path(self.config.output, rel), _records_in_order(
            parts, part[order], at[order]))
        return {"path": rel, "records": len(order), "bytes": size, "sha256": sha}


def _records_in_order(parts: list[InstanceColumns], part: np.ndarray, row: np.ndarray, chunk: int = 4096):
    """Framed records of instance row[i] of parts[part[i]] for every i, made a few thousand at a time."""
    for start in range(0, len(part), chunk):
        step = slice(start, start + chunk)
        yield serialize_framed(InstanceColumns.gather(parts, part[step], row[step]).features()).data


def _labelled(value, kind: str) -> tuple[str, typing.Any]:
    return kind, value


class RunOutcome(beam.CombineFn):
    """(kind, value) → {"counts": summed counts, "files": file stats, "shards": shard infos}."""

    def create_accumulator(self) -> dict:
        return {"counts": Counter(), "files": [], "shards": []}

    def add_input(self, outcome: dict, labelled: tuple[str, typing.Any]) -> dict:
        kind, value = labelled
        if kind == "counts":
            outcome["counts"].update(value)
        else:
            outcome[kind].append(value)
        return outcome

    def merge_accumulators(self, outcomes) -> dict:
        merged = self.create_accumulator()
        for outcome in outcomes:
            merged["counts"].update(outcome["counts"])
            merged["files"] += outcome["files"]
            merged["shards"] += outcome["shards"]
        return merged

    def extract_output(self, outcome: dict) -> dict:
        return {**outcome, "counts": dict(sorted(outcome["counts"].items()))}


class Publish(beam.DoFn):
    """The single last step: check, move shards into place, write the manifest."""

    def __init__(self, config: CreateConfig, vocab_sha256: str):
        self.config = config
        self.vocab_sha256 = vocab_sha256

    def process(self, outcome: dict):
        """outcome: RunOutcome's {"counts", "files", "shards"}."""
        cfg = self.config
        counts, files, shard_infos = outcome["counts"], outcome["files"], outcome["shards"]
        if counts.get("documents_kept", 0) == 0:
            output.discard_staging(cfg.output)
            why = ", ".join(f"{k.split(':', 1)[1]}: {v}" for k, v in counts.items() if ":" in k and v and
                            k.startswith(("documents_skipped:", "lines_skipped:")))
            raise NoDocumentsError(f"no documents with any tokens were read from {', '.join(cfg.inputs)} "
                                   f"({counts.get('documents_read', 0)} read{'; ' + why if why else ''}); "
                                   "nothing was written")
        # A shard that drew no records (a tiny input) still gets its file, empty.
        written = {s["path"] for s in shard_infos}
        writer = WriteShards(cfg)
        shard_infos = list(shard_infos) + [
            writer.write(seq.name, split, i, []) for seq in cfg.seq_configs for split in ("train", "eval")
            for i in range(cfg.shards(split)) if shard_name(seq, split, i, cfg.shards(split)) not in written]
        shard_infos = sorted(shard_infos, key=lambda s: s["path"])
        manifest = build_manifest(cfg, self.vocab_sha256, shard_infos, counts, files)
        problem = unbalanced_outputs(manifest)
        if problem:
            output.discard_staging(cfg.output)
            raise UnbalancedSplitError(f"{problem}; nothing was published")
        output.publish(cfg.output, [s["path"] for s in shard_infos], manifest, RECORD_GLOBS)
        yield manifest


class NoDocumentsError(RuntimeError):
    pass


def random_next_bound(instances: int) -> float:
    """How far an output's random-next share may stray from 0.5: 0.01 from 10,000 instances on, and for fewer, four
    standard errors of a fair coin (a balanced output passes this but once in ~16,000)."""
    return max(0.01, 4 * 0.5 / math.sqrt(instances)) if instances < 10_000 else 0.01


def unbalanced_outputs(manifest: dict) -> str | None:
    """Which outputs' random-next shares stray outside random_next_bound, in one line; None if none does."""
    entries = [(f"{name}/{split}", out[split]) for name, out in manifest["outputs"].items()
               for split in ("train", "eval") if split in out and out[split]["instances"]]
    strays = [f"{where} {entry['random_next_share']:.4f} over {entry['instances']:,} instances"
              for where, entry in entries
              if abs(entry["random_next_share"] - 0.5) > random_next_bound(entry["instances"])]
    if not strays:
        return None
    return "NSP labels outside 0.5 ± their bound (0.01 from 10,000 instances, 4 standard errors below): " + \
        "; ".join(strays)


def build_manifest(cfg: CreateConfig, vocab_sha256: str, shards: list[dict], counts: dict, files: list) -> dict:
    outputs: dict = {}
    for seq in cfg.seq_configs:
        per_split = {}
        for split in ("train", "eval"):
            if not cfg.shards(split):
                continue
            prefix = f"{seq.name}:{split}"
            n = counts.get(f"{prefix}:instances", 0)
            per_split[split] = {
                "instances": n,
                "shards": [s for s in shards if s["path"].startswith(f"{seq.name}/{split}-")],
                "random_next_share": round(counts.get(f"{prefix}:random_next", 0) / n, 6) if n else None,
                "mean_real_tokens": round(counts.get(f"{prefix}:real_tokens", 0) / n, 3) if n else None,
                "mean_predictions": round(counts.get(f"{prefix}:predictions", 0) / n, 3) if n else None,
                "nsp_draws_skipped": {k.rsplit(":", 1)[1]: v for k, v in counts.items()
                                      if k.startswith(f"{prefix}:nsp_skipped:")},
            }
        outputs[seq.name] = {"max_seq_length": seq.max_seq_length,
                             "max_predictions_per_seq": seq.max_predictions_per_seq, **per_split}
    # Lines and rows that never became documents (bad JSON, a null text) count as read and skipped, by reason,
    # beside documents without tokens, so that read = kept + skipped.
    skipped = {k.split(":", 1)[1]: v for k, v in counts.items()
               if k.startswith(("documents_skipped:", "lines_skipped:"))}
    return {
        "tool": "bertcorpus", "version": output.TOOL_VERSION, "job": "create",
        "config": cfg.describe(),
        "vocab": {"path": cfg.vocab, "sha256": vocab_sha256},
        "inputs": [{k: f[k] for k in ("path", "size", "sha256", "documents")} for f in merge_file_stats(files)],
        "documents": {"read": counts.get("documents_read", 0) + sum(v for k, v in counts.items()
                                                                    if k.startswith("lines_skipped:")),
                      "kept": counts.get("documents_kept", 0), "skipped": dict(sorted(skipped.items())),
                      "errors": 0},
        "counts": {k: counts.get(k, 0) for k in ("sentences", "tokens", "replaced_chars",
                                                  "single_sentence_documents")},
        "outputs": outputs,
    }


class CreatePretrainingData(beam.PTransform):
    """The whole job on a pipeline; returns the PCollection holding the manifest."""

    def __init__(self, config: CreateConfig, vocab: JobVocab, vocab_sha256: str, input_files: list[str]):
        super().__init__()
        self.config = config
        self.vocab = vocab
        self.vocab_sha256 = vocab_sha256
        self.input_files = input_files

    def expand(self, pbegin):
        cfg = self.config
        # input files → (file path, start, stop) per reader → SourceDocument
        tasks = pbegin | "plan reads" >> PlanReads(self.input_files, cfg.input_format)
        read = tasks | "read documents" >> beam.ParDo(ReadFiles(cfg.input_format)).with_outputs(
            "files", tally.TALLY, main="docs")
        # SourceDocument → (bucket key, ((id, one sentence per line?), UTF-8 text))
        keyed = read.docs | "assign buckets" >> beam.Map(assign_bucket, cfg).with_output_types(
            tuple[str, tuple[tuple[str, bool], bytes]])
        # bucket keys → {bucket key: (buckets in its split, buckets it sends fragments to)}, one small dict
        targets = (keyed
                   | "list buckets" >> beam.Keys()
                   | "distinct buckets" >> beam.Distinct()
                   | "gather buckets" >> beam.combiners.ToList()
                   | "plan negatives" >> beam.Map(fragment_targets, cfg.seed))
        # The three shuffles below carry the job's bytes: GroupLargeValues is a GroupByKey, whose local expansion
        # keeps those bytes in spill files (pipeline/local_shuffle.py).
        # → (bucket key, [documents]) → (bucket key, tokenised documents) + (other bucket key, fragments)
        tokenized = (keyed
                     | "group into buckets" >> GroupLargeValues()
                     | "tokenize buckets" >> beam.ParDo(TokenizeBuckets(cfg, self.vocab),
                                                        targets=beam.pvalue.AsSingleton(targets))
                     .with_outputs(tally.TALLY, main="buckets"))
        # → (bucket key, [its documents, fragments from other buckets]) → ((config, split, shard), (tie, piece))
        built = (tokenized.buckets
                 | "gather negatives" >> GroupLargeValues()
                 | "build instances" >> beam.ParDo(BuildInstances(cfg, self.vocab))
                 .with_output_types(tuple[tuple[str, str, int], tuple[int, bytes]])
                 .with_outputs(tally.TALLY, main="pieces"))
        # ((config, split, shard), [pieces]) → one staged file per shard that drew records → its file info
        shard_infos = (built.pieces
                       | "group into shards" >> GroupLargeValues()
                       | "write shards" >> beam.ParDo(WriteShards(cfg)))
        # counts, file stats and shard infos → (kind, value) → one {"counts", "files", "shards"} → the manifest
        labelled = [values | f"label {what}" >> beam.Map(_labelled, kind) for what, kind, values in (
            ("reading counts", "counts", read[tally.TALLY]), ("tokenizing counts", "counts", tokenized[tally.TALLY]),
            ("building counts", "counts", built[tally.TALLY]),
            ("file stats", "files", read.files), ("shard infos", "shards", shard_infos))]
        return (labelled
                | "gather the outcome" >> beam.Flatten()
                | "sum the outcome" >> beam.CombineGlobally(RunOutcome())
                | "publish" >> beam.ParDo(Publish(cfg, self.vocab_sha256)))


# ---------------------------------------------------------------------------------------------- command line

def parse_seq_configs(text: str) -> list[SeqConfig]:
    """'128:20,512:80' → [SeqConfig(128, 20), SeqConfig(512, 80)]."""
    configs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            length, predictions = (int(x) for x in part.split(":"))
        except ValueError:
            raise ValueError(f"--seq-configs wants LENGTH:PREDICTIONS pairs such as 128:20,512:80, got {part!r}")
        if length < 8 or predictions < 1 or predictions > length:
            raise ValueError(f"--seq-configs {part!r}: need LENGTH >= 8 and 1 <= PREDICTIONS <= LENGTH")
        configs.append(SeqConfig(length, predictions))
    if not configs:
        raise ValueError("--seq-configs is empty")
    if len({c.max_seq_length for c in configs}) != len(configs):
        raise ValueError("--seq-configs names the same sequence length twice")
    return configs


def add_arguments(parser) -> None:
    from pipeline.cli_util import BooleanFlag

    io = parser.add_argument_group("input and output")
    io.add_argument("--input", nargs="+", required=True, metavar="GLOB",
                    help="input files, globs or directories (local or any Beam filesystem, e.g. gs://); an "
                         "extraction's output directory stands for the documents its manifest lists")
    io.add_argument("--input-format", choices=["auto", "documents", "text", "jsonl"], default="auto",
                    help="documents = Parquet from extract-wiki/extract-books; text = one sentence per line, "
                         "blank line between documents; jsonl = {\"id\",\"text\"} per line (.jsonl, .jsonl.zst); "
                         "auto = by file name (default)")
    io.add_argument("--vocab", required=True, help="vocab.txt (one token per line)")
    io.add_argument("--output", required=True, help="output directory; seq{L}/train-*.tfrecord, seq{L}/eval-*, "
                                                    "manifest.json")
    io.add_argument("--overwrite", action="store_true", help="replace a finished run in --output")
    shape = parser.add_argument_group("instances")
    shape.add_argument("--max-seq-length", type=int, default=128)
    shape.add_argument("--max-predictions-per-seq", type=int, default=20)
    shape.add_argument("--seq-configs", metavar="L:P,...",
                       help="several configs from one tokenisation pass, e.g. 128:20,512:80 "
                            "(overrides --max-seq-length/--max-predictions-per-seq)")
    shape.add_argument("--dupe-factor", type=int, default=10, help="passes over the data, each masked anew")
    shape.add_argument("--masked-lm-prob", type=float, default=0.15)
    shape.add_argument("--short-seq-prob", type=float, default=0.1)
    shape.add_argument("--seed", type=int, default=12345)
    shape.add_argument("--do-lower-case", action=BooleanFlag, default=True,
                       help="lower-case and strip accents (uncased vocab); --no-do-lower-case for cased")
    shape.add_argument("--whole-word-mask", action=BooleanFlag, default=False)
    layout = parser.add_argument_group("layout and scale")
    layout.add_argument("--num-shards", type=int, default=0,
                        help="train shards per seq config (default: ~256 MB each, at least 4)")
    layout.add_argument("--eval-fraction", type=float, default=None,
                        help="share of documents held out for eval shards (0 disables the eval split; default: "
                             "1%%, raised up to 10%% so that it holds at least 256 KB of text, and none for an "
                             "input under ~320 KB)")
    layout.add_argument("--num-buckets", type=int, default=0,
                        help="document buckets; each is one worker's unit of memory "
                             "(default: one per --bucket-mb of input)")
    layout.add_argument("--bucket-mb", type=float, default=1.0,
                        help="MB of text per bucket for the default (1): a bucket is what a worker holds at once")


def config_from_args(args) -> CreateConfig:
    seq_configs = (parse_seq_configs(args.seq_configs) if args.seq_configs else
                   parse_seq_configs(f"{args.max_seq_length}:{args.max_predictions_per_seq}"))
    checks = [(args.dupe_factor >= 1, "--dupe-factor must be at least 1"),
              (0 < args.masked_lm_prob < 1, "--masked-lm-prob must be between 0 and 1"),
              (0 <= args.short_seq_prob <= 1, "--short-seq-prob must be between 0 and 1"),
              (args.eval_fraction is None or 0 <= args.eval_fraction < 1, "--eval-fraction must be in [0, 1)"),
              (args.num_shards >= 0 and args.num_buckets >= 0, "--num-shards/--num-buckets must be >= 0"),
              (args.bucket_mb > 0, "--bucket-mb must be positive")]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    return CreateConfig(inputs=list(args.input), output=args.output, vocab=args.vocab,
                        input_format=args.input_format, seq_configs=seq_configs, dupe_factor=args.dupe_factor,
                        masked_lm_prob=args.masked_lm_prob, short_seq_prob=args.short_seq_prob, seed=args.seed,
                        do_lower_case=args.do_lower_case, whole_word_mask=args.whole_word_mask,
                        num_shards=args.num_shards, eval_fraction=args.eval_fraction,
                        num_buckets=args.num_buckets, bucket_mb=args.bucket_mb)


def read_job_vocab(path: str, dry_run: bool, rendering: bool) -> tuple[JobVocab, str]:
    """The vocab for the job and the sha256 the manifest records. It is read and checked before anything is
    written; only a graph drawing, or a dry run that cannot reach a remote vocab, goes without it."""
    if rendering:
        return JobVocab(path), "not read (drawing the graph)"
    try:
        raw = read_vocab_bytes(path)
    except VocabError:
        if dry_run and output.is_remote(path):
            return JobVocab(path), "unverified (remote vocab, not read at launch)"
        raise
    sha256 = Vocab.from_bytes(raw, path).sha256  # validates it
    return JobVocab(path, sha256, raw), sha256


def run(args, beam_args: list[str]) -> int:
    from pipeline.cli_util import print_summary, run_pipeline
    from pipeline.errors import UserError
    from pipeline.sources import find_inputs

    options = runners.pipeline_options(beam_args)
    dry_run = runners.is_dry_run(options)
    config = config_from_args(args)
    found = find_inputs(config.inputs, allow_missing=dry_run)
    if found.note():
        print(f"note: {found.note()}", file=sys.stderr)
    files = found.files
    if not files and not dry_run:
        raise UserError("no input files given")
    if files and not any(size for _, size in files):
        raise UserError(f"the input files ({len(files)}) are all empty; nothing to do")
    vocab, vocab_sha = read_job_vocab(config.vocab, dry_run, runners.is_rendering(options))
    config = config.resolved(sum(estimated_text_bytes(path, size) for path, size in files))
    if not dry_run:
        output.prepare_output_dir(config.output, args.overwrite)
    pipeline = runners.make_pipeline(options)
    _ = pipeline | "create pretraining data" >> CreatePretrainingData(
        config, vocab, vocab_sha, [p for p, _ in files] or list(config.inputs))
    state = run_pipeline(pipeline, options, what="create")
    if state is None:
        return 0
    manifest = output.read_manifest(config.output)
    print_summary("create", manifest, _summary_rows(manifest))
    return 0


def _summary_rows(manifest: dict) -> list[tuple[str, str]]:
    docs = manifest["documents"]
    rows = [("documents read", f"{docs['read']:,}"), ("documents kept", f"{docs['kept']:,}")]
    rows += [(f"documents skipped ({k})", f"{v:,}") for k, v in docs["skipped"].items()]
    rows += [(k.replace("_", " "), f"{v:,}") for k, v in manifest["counts"].items()]
    for name, out in manifest["outputs"].items():
        for split in ("train", "eval"):
            if split in out:
                o = out[split]
                rows.append((f"{name} {split} instances", f"{o['instances']:,} in {len(o['shards'])} shards"
                             + (f", random-next {o['random_next_share']:.4f}" if o["instances"] else "")))
    return rows
