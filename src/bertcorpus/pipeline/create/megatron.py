"""create --record-format megatron: Megatron-LM's indexed datasets (transforms/megatron_index.py) from the tokenised
buckets, which Megatron's own datasets pair and mask at load time.

    (bucket key, its tokenised documents) ─ write parts: one part per bucket (and language, when languages are
        mixed by shares), a .bin and an .idx of its own in the staging area
    ─ ((split, file), part) ─ GroupByKey ─ merge files: each file's parts in bucket order, their ids copied one
        after another and their indexes merged with offsets rebased ─ the file's info ─ publish

A split's documents go to `--num-shards` files (1 by default) by a hash of their bucket, so that files merge in
parallel; with --language-sampling-alpha each language has a file of its own, and the manifest gives the blend of
--data-path weights (the smoothed shares) that mixes them. With --provenance, each file has a Parquet beside it, a
row per document in its order: the document's id, and the characters of its text each of its sequences came from.
"""

from __future__ import annotations

import hashlib
import io

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.create.config import CreateConfig
from bertcorpus.pipeline.create.job_vocab import JobVocab, StepWithVocab
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.language_sampling import smoothed_shares
from bertcorpus.transforms.languages import UNDETERMINED
from bertcorpus.transforms.megatron_index import (
    bucket_index,
    document_index,
    index_bytes,
    merged_sections,
    preamble,
    read_index,
    token_dtype,
)
from bertcorpus.transforms.seeding import stable_hash

FOLDER = "megatron"
PARTS = "megatron-parts"  # in the staging area only
SEQUENCES = ("sentences", "documents")
COPY_CHUNK = 8 << 20


def file_prefix(split: str, language: str | None, number: int, files: int) -> str:
    """The prefix (the path without .bin/.idx) of one output file, relative to the output."""
    tag = f"-{language}" if language else ""
    return f"{FOLDER}/{split}{tag}-{number:05d}-of-{files:05d}"


class MegatronDoFn(StepWithVocab):
    """A step of the Megatron form: the run's config, and the dtype of its ids from the vocab's size."""

    def use_vocab(self, vocab):
        self.dtype = token_dtype(len(vocab))


class WriteMegatronParts(MegatronDoFn):
    """(bucket key, BucketMessage of its own documents) → ((split, language, file number), part info), the part's
    .bin and .idx staged; a bucket's documents in each language apart where languages are mixed by shares."""

    def process(self, element, vocab: bytes | None = None):
        self.vocab_ready(vocab)
        key, message = element
        if message.sender is not None:
            return
        cfg, split = self.config, key.split("/")[0]
        bucket = message.bucket
        languages = bucket.languages or [UNDETERMINED] * len(bucket)
        by_language = cfg.language_sampling_alpha != 1
        groups = sorted(set(languages)) if by_language else [None]
        for language in groups:
            docs = [d for d in range(len(bucket)) if language is None or languages[d] == language]
            part = bucket.select(docs) if language is not None else bucket
            files = 1 if by_language else cfg.shards(split)
            number = stable_hash(cfg.seed, "megatron file", key) % files
            yield (split, language or "", number), self.write(part, key, language)

    def write(self, bucket, key: str, language: str | None) -> dict:
        lengths = np.diff(bucket.sentence_starts)
        make = document_index if self.config.megatron_sequences == "documents" else bucket_index
        index = make(lengths, bucket.doc_first_sentence, self.dtype)
        rel = f"{PARTS}/{key}" + (f"/{language}" if language else "")
        staged_bin = output.staging_path(self.config.output, f"{rel}.bin")
        output.write_bytes(staged_bin, [bucket.tokens.astype(self.dtype.newbyteorder("<")).tobytes()])
        output.write_bytes(output.staging_path(self.config.output, f"{rel}.idx"), [index_bytes(index)])
        if self.config.provenance:
            output.write_bytes(
                output.staging_path(self.config.output, f"{rel}.parquet"), [document_spans(bucket, make)]
            )
        return {"part": rel, "sequences": index.sequences, "documents": index.documents, "tokens": len(bucket.tokens)}


class MergeMegatronFiles(MegatronDoFn):
    """((split, language, file number), [part info]) → the file's info; its .bin and .idx staged from its parts in
    bucket order (the same on every runner), which are then deleted."""

    def process(self, element, vocab: bytes | None = None):
        self.vocab_ready(vocab)
        (split, language, number), parts = element
        parts = sorted(parts, key=lambda p: p["part"])
        files = 1 if language else self.config.shards(split)
        yield self.merge(file_prefix(split, language or None, number, files), parts, split, language)

    def merge(self, prefix: str, parts: list[dict], split: str, language: str) -> dict:
        cfg = self.config
        staged = [output.staging_path(cfg.output, p["part"]) for p in parts]
        sequences = sum(p["sequences"] for p in parts)
        documents = sum(p["documents"] for p in parts)

        def indexes():
            for path in staged:
                yield read_index(_read(f"{path}.idx"), f"{path}.idx")

        bin_size, bin_sha = output.write_bytes(
            output.staging_path(cfg.output, f"{prefix}.bin"), (c for path in staged for c in _chunks(f"{path}.bin"))
        )
        idx_size, idx_sha = output.write_bytes(
            output.staging_path(cfg.output, f"{prefix}.idx"),
            [preamble(self.dtype, sequences, documents), *merged_sections(indexes)],
        )
        files = [
            {"path": f"{prefix}.bin", "bytes": bin_size, "sha256": bin_sha},
            {"path": f"{prefix}.idx", "bytes": idx_size, "sha256": idx_sha},
        ]
        kinds = ["bin", "idx"]
        if cfg.provenance:  # each document's id and its sequences' characters, in the file's document order
            tables = [pq.read_table(io.BytesIO(_read(f"{path}.parquet"))) for path in staged]
            sink = io.BytesIO()
            pq.write_table(pa.concat_tables(tables) if tables else empty_spans(), sink, compression="zstd")
            size, sha = output.write_bytes(
                output.staging_path(cfg.output, f"{prefix}.provenance.parquet"), [sink.getvalue()]
            )
            files.append({"path": f"{prefix}.provenance.parquet", "bytes": size, "sha256": sha})
            kinds.append("parquet")
        FileSystems.delete([f"{path}.{ext}" for path in staged for ext in kinds])
        return {
            "prefix": prefix,
            "split": split,
            "language": language or None,
            "sequences": sequences,
            "documents": documents,
            "tokens": sum(p["tokens"] for p in parts),
            "files": files,
        }


def document_spans(bucket, index_of) -> bytes:
    """A part's provenance: a row per document, its id and the characters [start, end) of its text that each of
    its sequences was made from (a sentence's, or the whole document's)."""
    first = bucket.doc_first_sentence
    if index_of is document_index:
        starts, ends = bucket.spans[first[:-1], 0], bucket.spans[first[1:] - 1, 1]
        counts = np.ones(len(bucket), np.int64)
    else:
        starts, ends, counts = bucket.spans[:, 0], bucket.spans[:, 1], np.diff(first)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    spans = pa.StructArray.from_arrays([pa.array(starts, pa.int64()), pa.array(ends, pa.int64())], ["start", "end"])
    table = pa.table(
        {
            "document": pa.array(bucket.doc_ids, pa.string()),
            "sequences": pa.ListArray.from_arrays(pa.array(offsets), spans),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def empty_spans():
    sequence = pa.struct([("start", pa.int64()), ("end", pa.int64())])
    return pa.table({"document": pa.array([], pa.string()), "sequences": pa.array([], pa.list_(sequence))})


def empty_file(config: CreateConfig, vocab_size: int, prefix: str, split: str, language: str | None) -> dict:
    """A file that drew no part (a split smaller than its files): an empty dataset, so that every prefix the
    manifest names is there."""
    dtype = token_dtype(vocab_size)
    idx = preamble(dtype, 0, 0) + np.zeros(1, "<i8").tobytes()
    output.write_bytes(output.staging_path(config.output, f"{prefix}.bin"), [b""])
    output.write_bytes(output.staging_path(config.output, f"{prefix}.idx"), [idx])
    files = [
        {"path": f"{prefix}.bin", "bytes": 0, "sha256": hashlib.sha256(b"").hexdigest()},
        {"path": f"{prefix}.idx", "bytes": len(idx), "sha256": hashlib.sha256(idx).hexdigest()},
    ]
    if config.provenance:
        sink = io.BytesIO()
        pq.write_table(empty_spans(), sink, compression="zstd")
        size, sha = output.write_bytes(
            output.staging_path(config.output, f"{prefix}.provenance.parquet"), [sink.getvalue()]
        )
        files.append({"path": f"{prefix}.provenance.parquet", "bytes": size, "sha256": sha})
    return {
        "prefix": prefix,
        "split": split,
        "language": language,
        "sequences": 0,
        "documents": 0,
        "tokens": 0,
        "files": files,
    }


def _read(path: str) -> bytes:
    with FileSystems.open(path, compression_type="uncompressed") as f:
        return f.read()


def _chunks(path: str):
    with FileSystems.open(path, compression_type="uncompressed") as f:
        while chunk := f.read(COPY_CHUNK):
            yield chunk


class MegatronParts(beam.PTransform):
    """(bucket key, BucketMessage) → the info of every merged file, as the manifest lists them."""

    def __init__(self, config: CreateConfig, vocab: JobVocab, carried: beam.pvalue.AsSingleton):
        """carried: the side input of the vocab's bytes (job_vocab.carried_vocab)"""
        super().__init__()
        self.config = config
        self.vocab = vocab
        self.carried = carried

    def expand(self, buckets):
        return (
            buckets
            | "write parts" >> beam.ParDo(WriteMegatronParts(self.config, self.vocab), vocab=self.carried)
            | "group parts into files" >> beam.GroupByKey()
            | "merge files" >> beam.ParDo(MergeMegatronFiles(self.config, self.vocab), vocab=self.carried)
        )


def expected_files(config: CreateConfig) -> list[tuple[str, int, int]]:
    """(split, number, files) of every file a run without language files writes, drawn parts or not."""
    return [(split, n, config.shards(split)) for split in ("train", "eval") for n in range(config.shards(split))]


def megatron_outputs(config: CreateConfig, infos: list[dict]) -> dict:
    """The manifest's outputs of a Megatron run: per split its files (prefixes, counts, files) and totals, and the
    --data-path blend that weighs its languages by their smoothed shares where it has a file per language."""
    outputs = {}
    for split in ("train", "eval"):
        files = sorted((i for i in infos if i["split"] == split), key=lambda i: i["prefix"])
        if not files and not config.shards(split):
            continue
        entry = {k: sum(f[k] for f in files) for k in ("sequences", "documents", "tokens")}
        entry["files"] = files
        weights = None
        if config.language_sampling_alpha != 1 and files:
            shares = smoothed_shares({f["language"]: f["tokens"] for f in files}, config.language_sampling_alpha)
            weights = [round(shares.get(f["language"], 0.0), 6) for f in files]
        entry["data_path"] = data_path(config.output, files, weights)
        outputs[split] = entry
    return outputs


def data_path(output_dir: str, files: list[dict], weights: list[float] | None) -> list[str]:
    """Megatron's data path words: each file's prefix, after its weight where files are weighed."""
    prefixes = [output.join(output_dir, f["prefix"]) for f in files]
    if weights is None:
        return prefixes
    return [word for weight, prefix in zip(weights, prefixes) for word in (f"{weight:g}", prefix)]


def megatron_flags(config: CreateConfig, outputs: dict, tokenizer: dict | None, vocab_copy: str | None) -> dict:
    """What Megatron-LM's pretrain_bert.py (or another of its scripts) needs to read the output: the dataset that
    reads its form, the data paths and the tokenizer's flags."""
    if tokenizer is not None:
        tokens = [
            "--tokenizer-type",
            "HuggingFaceTokenizer",
            "--tokenizer-model",
            output.join(config.output, tokenizer["copy"]),
        ]
    else:
        kind = "BertWordPieceLowerCase" if config.do_lower_case else "BertWordPieceCase"
        tokens = ["--tokenizer-type", kind, "--vocab-file", output.join(config.output, vocab_copy)]
    flags = ["--train-data-path", *outputs["train"]["data_path"]]
    if "eval" in outputs:
        flags += ["--valid-data-path", *outputs["eval"]["data_path"]]
    flags += ["--seq-length", str(config.seq_configs[0].max_seq_length), "--mask-prob", f"{config.masked_lm_prob:g}"]
    sentences = config.megatron_sequences == "sentences"
    if sentences and config.pair_objective == "none":
        flags.append("--bert-no-binary-head")
    return {
        "sequences": config.megatron_sequences,
        "dataset": "BERTMaskedWordPieceDataset" if sentences else "GPTDataset",
        "script": "pretrain_bert.py" if sentences else "pretrain_gpt.py",
        "flags": flags + tokens,
    }
