"""dedup's reading steps: every document read once, into what each later step needs; and the documents that LSH
pairs with another read again, for the shingle sets their pairs are measured on.

A document's words are hashed once (transforms/minhash.py); its MinHash signature, its LSH band keys and its
benchmark matches all come from those hashes, in the same pass. Its text goes on only towards its output shard.
"""

from __future__ import annotations

from dataclasses import asdict

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.config import DedupConfig
from bertcorpus.pipeline.dedup.values import Probe, ShardItem
from bertcorpus.pipeline.inputs.formats import InputError, ReadStats, SourceDocument
from bertcorpus.pipeline.inputs.reads import read_documents
from bertcorpus.transforms.decontamination import find_matches, matched_regions
from bertcorpus.transforms.minhash import (
    band_hashes,
    casefolded,
    fold_text,
    oph_signature,
    shingle_hashes,
    shingle_set,
    word_hashes,
)
from bertcorpus.transforms.near_duplicates import digest_of, exact_key
from bertcorpus.transforms.seeding import stable_hash

METRICS = "dedup"
FIELDS = ("source", "title", "url")  # read with each document, beside its id and text, and written out again


def shard_of(doc_id: str, num_shards: int) -> int:
    """The output shard of a document id: the documents sink's rule (pipeline/sinks/documents.py)."""
    return stable_hash(doc_id) % num_shards


def source_key(priority: int, name: str) -> str:
    """The name of a count about one source."""
    return f"source:{priority}:{name}"


class ReadSources(beam.DoFn):
    """(task number, (priority, path, start, stop)) → per document:
        main            (exact key, (node, task number, band keys)) for a document of at least --shingle-words
                        words; a shorter one is kept as it is and counted as too short to compare
        'documents'     ((priority, shard), ShardItem: the document and the benchmark text it holds)
        'hits'          (benchmark text number, (priority, id)) for each benchmark text found in it
    and per task: 'errors' ((priority, 0), ShardItem: a dead letter), 'files' ((priority, file stats)), counts."""

    def __init__(self, config: DedupConfig):
        self.config = config

    def process(self, element, index):
        number, (priority, path, start, stop) = element
        stats = ReadStats(path)
        counts = {source_key(priority, "characters_read"): 0}
        # A document longer than --max-document-mb comes as its pieces, each compared and kept as a document.
        for doc in read_documents(path, "auto", stats, start, stop, FIELDS, cap=self.config.max_document_chars):
            if isinstance(doc, SourceDocument):
                yield from self._document(number, priority, doc, index, counts)
            else:
                yield beam.pvalue.TaggedOutput("errors", ((priority, 0), ShardItem(error=doc.record())))
        if stats.split:
            counts[source_key(priority, "split")] = stats.split
            counts[source_key(priority, "pieces")] = stats.pieces
        yield beam.pvalue.TaggedOutput("files", (priority, asdict(stats)))
        counts[source_key(priority, "read")] = (
            stats.documents + sum(stats.skipped.values()) + sum(stats.errors.values())
        )
        counts[source_key(priority, "replaced_chars")] = stats.replaced_chars
        counts[source_key(priority, "unknown_language_tags")] = stats.unknown_language_tags
        counts.update({source_key(priority, f"skipped:{k}"): v for k, v in stats.skipped.items()})
        counts.update({source_key(priority, f"errors:{k}"): v for k, v in stats.errors.items()})
        yield tally.emit(METRICS, counts)

    def _document(self, number: int, priority: int, doc: SourceDocument, index, counts: dict):
        cfg = self.config
        text, fields = doc.text, doc.fields or {}
        folded = casefolded(text)
        words = word_hashes(fold_text(folded, is_casefolded=True))
        digest = digest_of(key := exact_key(folded, is_casefolded=True))
        node = (priority, doc.id, digest)
        counts[source_key(priority, "characters_read")] += len(text)
        if words.size < cfg.shingle_words:
            _add(counts, source_key(priority, "too_short_to_compare"), 1)
        else:
            signature = oph_signature([shingle_hashes(words, cfg.shingle_words)], cfg.num_hashes)
            bands = band_hashes(signature, cfg.bands, cfg.rows)
            yield key, (node, number, bands.astype("<u8").tobytes())
        regions = ()
        if index is not None and (matches := find_matches(words, index)):
            regions = tuple(matched_regions(text, matches))
            texts = sorted({t for m in matches for t in m.texts})
            for text_number in texts:
                yield beam.pvalue.TaggedOutput("hits", (text_number, (priority, doc.id)))
            for benchmark in sorted({int(index.text_benchmark[t]) for t in texts}):
                _add(counts, f"benchmark:{benchmark}:{priority}:matched", 1)
        detected = cfg.language.resolve(doc.language, lambda: text)
        document = {
            "id": doc.id,
            "source": fields.get("source") or cfg.names[priority],
            "title": fields.get("title"),
            "text": text,
            "url": fields.get("url"),
            "language": detected.language if detected else doc.language,
            "language_confidence": doc.language_confidence if detected is None else detected.confidence,
            "digest": digest,
        }
        shard = shard_of(doc.id, cfg.num_shards[priority])
        yield beam.pvalue.TaggedOutput("documents", ((priority, shard), ShardItem(document, regions)))


def _add(counts: dict, key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


class ReadCandidateShingles(beam.DoFn):
    """(task number, [nodes LSH paired]) → (node, Probe: its shingle set), the task's documents read again.

    Only documents in a candidate pair get here, so shingle sets are made and shuffled for those alone."""

    def __init__(self, config: DedupConfig, tasks: list[tuple[int, str, int, int]]):
        self.config, self.tasks = config, tasks

    def process(self, element):
        number, nodes = element
        priority, path, start, stop = self.tasks[number]
        wanted: dict[str, set[int]] = {}
        for _, doc_id, digest in nodes:
            wanted.setdefault(doc_id, set()).add(digest)
        found = {}
        cap = self.config.max_document_chars  # cut as ReadSources had it cut
        for doc in read_documents(path, "auto", ReadStats(path), start, stop, again=True, cap=cap):
            if isinstance(doc, SourceDocument) and doc.id in wanted:
                found.setdefault(doc.id, []).append(doc.text)
        for doc_id, digests in sorted(wanted.items()):
            texts = found.get(doc_id, [])
            if len(texts) == 1 and len(digests) == 1:  # the id says which document it is
                matched = {next(iter(digests)): texts[0]}
            else:  # documents sharing an id: their exact keys tell them apart
                matched = {digest_of(exact_key(t)): t for t in texts}
            for digest in sorted(digests):
                if digest not in matched:
                    raise InputError(
                        f"{path} no longer holds the document {doc_id} it held when the job read it first: an "
                        "input changed while the job ran"
                    )
                shingles = shingle_hashes(word_hashes(fold_text(matched[digest])), self.config.shingle_words)
                yield (priority, doc_id, digest), Probe(None, shingle_set(shingles))
