"""dedup's output shards: each source's documents that stay, written as documents Parquet, and a ledger row for every
document or span that leaves.

    ((priority, shard), ShardItem: documents, verdicts, dead letters) ─ GroupLargeValues ─ WriteShard ─┐
                                                                  every shard no item reached ─────────┴─ file infos

A shard's documents are the source's documents whose id hashes to it (the documents sink's rule), sorted by id; the
verdicts on them arrive in the same group, keyed by the same rule. Each document then stays, leaves as a copy of its
twin (exact, near), leaves whole or in part for the benchmark text it holds (benchmark), or leaves because an
earlier document of its source has its id (duplicate_id). The ledger shard removed-NAME-SSSSS-of-NNNNN.jsonl holds
one row per removal, sorted by id and position.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import apache_beam as beam

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.dedup.config import DedupConfig
from bertcorpus.pipeline.dedup.read import METRICS, source_key
from bertcorpus.pipeline.dedup.values import Verdict
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues
from bertcorpus.pipeline.sinks import documents, output
from bertcorpus.transforms.decontamination import NgramIndex, Region, cut_plan
from bertcorpus.transforms.near_duplicates import jaccard_bin

REASONS = ("exact", "near", "benchmark", "duplicate_id")


def documents_file(name: str, shard: int, shards: int) -> str:
    return f"{name}/documents-{shard:05d}-of-{shards:05d}.parquet"


def ledger_file(name: str, shard: int, shards: int) -> str:
    return f"removed-{name}-{shard:05d}-of-{shards:05d}.jsonl"


def errors_file(name: str) -> str:
    return f"{name}/errors-00000-of-00001.jsonl"


def _json_line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"


class WriteShard(beam.DoFn):
    """((priority, shard), [ShardItem]) → the shard's staged documents file and ledger file (and for shard 0 the
    source's dead letters), their file infos, and the counts of what stayed and what left."""

    def __init__(self, config: DedupConfig):
        self.config = config

    def process(self, element, index: NgramIndex | None):
        (priority, shard), items = element
        cfg, name = self.config, self.config.names[priority]
        docs = sorted((i for i in items if i.document is not None), key=lambda i: _order(i.document))
        verdicts = {(i.verdict[0], i.verdict[1]): i.verdict[2] for i in items if i.verdict is not None}
        kept, rows, counts = [], [], {source_key(priority, "characters_kept"): 0}
        previous_id = None
        for item in docs:
            doc = item.document
            verdict = verdicts.get((doc["id"], doc["digest"]))
            if verdict is not None:
                rows.append(self._copy_row(name, doc, verdict, counts, priority))
                continue
            if doc["id"] == previous_id:
                rows.append(
                    self._row(
                        name,
                        doc["id"],
                        "duplicate_id",
                        {"source": name, "id": doc["id"]},
                        len(doc["text"]),
                        language=doc["language"],
                    )
                )
                _add(counts, source_key(priority, "removed:duplicate_id"), 1)
                _add(counts, source_key(priority, "characters_removed"), len(doc["text"]))
                continue
            previous_id = doc["id"]
            pieces = self._decontaminated(name, priority, doc, item.regions, index, rows, counts)
            if pieces:
                _add(counts, source_key(priority, "kept"), 1)
                kept += pieces
        kept.sort(key=lambda d: d["id"])
        counts[source_key(priority, "records")] = len(kept)
        counts[source_key(priority, "characters_kept")] = sum(len(d["text"]) for d in kept)
        for d in kept:  # the documents written, by language, as an extraction's manifest counts them
            _add(counts, source_key(priority, f"language:{d['language']}"), 1)
            _add(counts, source_key(priority, f"language_characters:{d['language']}"), len(d["text"]))
        tally.progress("documents_written", len(kept))  # the run's progress line
        yield from self._write(
            documents_file(name, shard, cfg.num_shards[priority]),
            priority,
            "documents",
            len(kept),
            documents.parquet_chunks([tuple(d[c] for c in documents.COLUMNS) for d in kept]),
        )
        rows.sort(key=lambda r: (r["id"], r.get("span", [0])[0]))
        yield from self._write(
            ledger_file(name, shard, cfg.num_shards[priority]),
            priority,
            "removed",
            len(rows),
            ["".join(_json_line(r) for r in rows).encode("utf-8", "surrogatepass")],
        )
        if shard == 0:
            errors = [i.error for i in items if i.error is not None]
            yield from self._write(errors_file(name), priority, "errors", len(errors), [documents.errors_bytes(errors)])
        yield tally.emit(METRICS, counts)

    def _write(self, relative: str, priority: int, kind: str, records: int, chunks: Iterable[bytes]):
        size, sha = output.write_bytes(output.staging_path(self.config.output, relative), chunks)
        yield {"path": relative, "source": priority, "kind": kind, "records": records, "bytes": size, "sha256": sha}

    @staticmethod
    def _row(name: str, doc_id: str, reason: str, match: dict, chars: int, **more) -> dict:
        return {"source": name, "id": doc_id, "reason": reason, "match": match, "chars": chars, **more}

    def _copy_row(self, name: str, doc: dict, verdict: Verdict, counts: dict, priority: int) -> dict:
        names = self.config.names
        twin = verdict.twin
        match = {"source": names[twin[0]], "id": twin[1]}
        if verdict.reason == "near":
            match["jaccard"] = round(verdict.jaccard, 6)
            _add(counts, f"jaccard:{jaccard_bin(verdict.jaccard)}", 1)
            if verdict.linked_by is not None:
                (p, doc_id, _), j = verdict.linked_by
                match["linked_by"] = {"source": names[p], "id": doc_id, "jaccard": round(j, 6)}
        _add(counts, source_key(priority, f"removed:{verdict.reason}"), 1)
        _add(counts, source_key(priority, "characters_removed"), len(doc["text"]))
        _add(counts, f"pair:{verdict.reason}:{priority}:{twin[0]}", 1)
        return self._row(name, doc["id"], verdict.reason, match, len(doc["text"]), language=doc["language"])

    def _decontaminated(self, name, priority, doc, regions, index, rows, counts) -> list[dict]:
        """The documents left of one with its benchmark text cut or dropped (the policy), its ledger rows added."""
        text = doc["text"]
        record = {k: doc[k] for k in documents.COLUMNS}
        if not regions:
            return [record]
        cfg = self.config
        if cfg.contamination == "drop":
            first = min(regions, key=lambda r: r.match_start)
            matches = sum(r.matches for r in regions)
            pieces, removed = [], [Region(0, len(text), first.match_start, first.match_end, first.texts, matches)]
        else:
            pieces, removed = cut_plan(text, list(regions), cfg.cut_margin, cfg.max_splits, cfg.min_piece_chars)
        for region in removed:
            benchmark = int(index.text_benchmark[region.texts[0]])
            match = {
                "benchmark": index.names[benchmark],
                "example": index.examples[region.texts[0]][0],
                "ngram": text[region.match_start : region.match_end],
            }
            chars = region.end - region.start
            rows.append(
                self._row(
                    name,
                    doc["id"],
                    "benchmark",
                    match,
                    chars,
                    span=[region.start, region.end],
                    matches=region.matches,
                    language=doc["language"],
                )
            )
            _add(counts, source_key(priority, "characters_removed"), chars)
            _add(counts, f"benchmark:{benchmark}:{priority}:{'regions' if pieces else 'documents'}", 1)
            _add(counts, f"benchmark:{benchmark}:{priority}:characters", chars)
        if not pieces:
            _add(counts, source_key(priority, "removed:benchmark"), 1)
            return []
        _add(counts, source_key(priority, "cut"), 1)
        return [{**record, "id": f"{doc['id']}#{k}", "text": text[s:e]} for k, (s, e) in enumerate(pieces, 1)]


def _order(document: dict) -> tuple:
    """A shard's order of documents: by id, then by the rest, so that documents sharing an id stay reproducible."""
    return tuple(
        (document[k] is not None, document[k] or "")
        for k in ("id", "digest", "text", "source", "title", "url", "language")
    )


def _add(counts: dict, key: str, n: int) -> None:
    counts[key] = counts.get(key, 0) + n


class WriteShards(beam.PTransform):
    """((priority, shard), ShardItem) → file infos of every shard of every source, a shard no item reached written
    empty; counts to tally.TALLY."""

    def __init__(self, config: DedupConfig):
        super().__init__()
        self.config = config

    def expand(self, parts):
        items, index = parts["items"], parts["index"]
        writer = WriteShard(self.config)
        written = (
            items
            | "group into shards" >> GroupLargeValues()
            | "write shards"
            >> beam.ParDo(writer, beam.pvalue.AsSingleton(index)).with_outputs(tally.TALLY, main="files")
        )
        # The shards no item reached get their (empty) files here: only file infos travel.
        empty = (
            written.files
            | "list written files" >> beam.combiners.ToList()
            | "write empty shards" >> beam.FlatMap(self._write_missing, writer, beam.pvalue.AsSingleton(index))
        )
        return {"files": (written.files, empty) | "all files" >> beam.Flatten(), tally.TALLY: written[tally.TALLY]}

    def _write_missing(self, written: list[dict], writer: WriteShard, index):
        paths = {f["path"] for f in written}
        for priority, shards in enumerate(self.config.num_shards):
            for shard in range(shards):
                if documents_file(self.config.names[priority], shard, shards) not in paths:
                    for out in writer.process(((priority, shard), []), index):
                        if isinstance(out, dict):
                            yield out
