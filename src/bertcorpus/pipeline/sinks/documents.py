"""The documents sink shared by the extraction jobs: sharded Parquet, the errors dead letter, the manifest.

    documents ─ (shard, document) ─ GroupLargeValues ─ write shards, sorted by id ──┐
    errors ──── (shard, error) ──── GroupLargeValues ─ write shards, sorted ─────────┤
    counts ──────────────────────────────────── sum ──────────────────────────┼─ publish: move the staged files
    input descriptions ──────────────────────── list ─────────────────────────┘  into place, manifest.json last

A document's shard is a stable hash of its id, and each shard is written sorted by id, so the files hold the same
bytes whatever the runner, its worker count and the order in which documents arrive. Shard files are written whole
under fixed names in OUT/.staging, so a retried bundle rewrites the same file instead of adding one.

Memory is one shard's worth, whatever the size of the input. The grouping is a GroupByKey on every runner; on this
machine it goes through spill files (pipeline/engines/local_shuffle.py), since Beam's local runner holds every value
it shuffles in its own memory until the stage ends: extract-wiki's memory grew with the dump, 0.4 GB at 50 MB of
XML and 2.3 GB at 780 MB. A document crosses it with its text as UTF-8, half the memory of most texts as Python
strings, and the writer makes its Parquet file a row group at a time.

Counts travel as tally dicts (pipeline/tally.py) with these names: `read` for every input item the job looked at,
`skipped:<reason>` and `errors:<reason>` for those it set aside; the writer adds `kept` (documents written),
`characters` (their text) and `skipped:duplicate_id`. The manifest states read = kept + skipped + errors, and
publishing refuses to write one where that does not hold.
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Iterable, Iterator

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
from bertcorpus.pipeline.engines.local_shuffle import GroupLargeValues
from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.seeding import stable_hash

METRICS = "documents"  # the Beam metrics namespace of every document count
SHARD_TEXT_BYTES = 128 * 2**20  # the default shard size: about this much text per documents file
ROW_GROUP_ROWS = 4096  # rows per Parquet row group, so that readers can stream a shard
DOCUMENTS_GLOB = "documents-*.parquet"
OWNED_GLOBS = [DOCUMENTS_GLOB, "errors-*.jsonl"]

COLUMNS = ("id", "source", "title", "text", "url", "language", "language_confidence")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        pa.field("url", pa.string()),
        pa.field("language", pa.string(), nullable=False),  # BCP 47 (transforms/languages.py); und when unknown
        # The detector's confidence where the language was detected (--language auto); null where it was given.
        pa.field("language_confidence", pa.float32()),
    ]
)
ERROR_FIELDS = ("input", "where", "reason", "detail")


def default_num_shards(text_bytes: int) -> int:
    return max(1, math.ceil(text_bytes / SHARD_TEXT_BYTES))


def parquet_chunks(rows: list[tuple]) -> Iterator[bytes]:
    """Documents Parquet of rows in COLUMNS order (the text as str, or as UTF-8 bytes), a row group at a time: the
    bytes pq.write_table gives, without the table and the file in memory at once beside the rows. Every page carries
    its CRC-32, so that a page damaged after the writing (bytes changed in place, the file's size kept) is an error
    for a reader that checks them (page_checksum_verification) rather than other text."""
    sink = _Taken()
    with pq.ParquetWriter(sink, SCHEMA, compression="zstd", write_page_checksum=True) as writer:
        for start in range(0, max(len(rows), 1), ROW_GROUP_ROWS):  # an empty file has one empty row group
            group = rows[start : start + ROW_GROUP_ROWS]
            columns = [pa.array([row[i] for row in group], type=f.type) for i, f in enumerate(SCHEMA)]
            writer.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))
            del columns
            yield from sink.take()
    yield from sink.take()


class _Taken:
    """A file for pyarrow to write into, whose bytes are taken away as they come."""

    closed = False

    def __init__(self):
        self._parts, self._position = [], 0

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def take(self) -> list[bytes]:
        parts, self._parts = self._parts, []
        return parts


def _document_row(document: dict) -> tuple:
    """A document as it crosses the shuffle to its shard: its fields in COLUMNS order, the text as UTF-8 bytes,
    which a shard's writer holds in half the memory of a Python string of most texts (two bytes a character)."""
    return tuple(document[c].encode() if c == "text" else document[c] for c in COLUMNS)


def _characters(utf8: bytes) -> int:
    """The characters of UTF-8 text: its bytes but the continuation bytes."""
    return len(utf8) - int(np.count_nonzero((np.frombuffer(utf8, np.uint8) & 0xC0) == 0x80))


def _encode_documents(rows: list[tuple]) -> tuple[Iterable[bytes], int, dict]:
    """Document rows sorted by id → (Parquet bytes, records, counts); of documents sharing an id only the first is
    kept."""
    unique = [row for i, row in enumerate(rows) if not i or row[0] != rows[i - 1][0]]
    counts = {"kept": len(unique), "characters": 0, "skipped:duplicate_id": len(rows) - len(unique)}
    language = COLUMNS.index("language")
    for row in unique:
        tag, characters = row[language], _characters(row[3])
        counts["characters"] += characters
        for name, n in ((f"language:{tag}", 1), (f"language_characters:{tag}", characters)):
            counts[name] = counts.get(name, 0) + n
    return parquet_chunks(unique), len(unique), counts


def _encode_errors(rows: list[tuple]) -> tuple[Iterable[bytes], int, dict]:
    """Sorted error rows → (JSON lines, records, no counts: the job counted them where they arose)."""
    lines = "".join(json.dumps(dict(zip(ERROR_FIELDS, row)), ensure_ascii=False) + "\n" for row in rows)
    return [lines.encode()], len(rows), {}


def errors_bytes(errors: list[dict]) -> bytes:
    """Dead-letter records as an errors file holds them: sorted, one JSON object a line (for a job that writes its
    errors files itself)."""
    rows = sorted(map(_error_row, errors), key=lambda row: _sort_key(row, ERROR_FIELDS))
    return b"".join(_encode_errors(rows)[0])


def _sort_key(row: tuple, fields: tuple[str, ...]) -> tuple:
    """A row's fields in order (the first is the id), None before any value: a total order on distinct records. An
    error's `where` goes by the numbers in it ("byte 20" before "byte 100"), then as text."""
    return tuple(
        (value is not None, _natural_key(value or "") if f == "where" else value or "") for f, value in zip(fields, row)
    )


def _natural_key(text: str) -> tuple:
    """text cut into its runs of digits, which compare as numbers, and the text between them; then text itself."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), text


def _keyed(record: dict, to_row, num_shards: int) -> tuple[int, tuple]:
    """record → (shard, its row): the shard from the first field, the id."""
    row = to_row(record)
    return stable_hash(row[0]) % num_shards, row


class _WriteShard(WatchedDoFn):
    """(shard, rows) → one staged file holding the rows sorted; yields its file info, counts to TALLY."""

    def __init__(self, output_dir: str, kind: str, suffix: str, num_shards: int, fields: tuple[str, ...], encode):
        self.output_dir, self.kind, self.suffix = output_dir, kind, suffix
        self.num_shards, self.fields, self.encode = num_shards, fields, encode

    def file_name(self, shard: int) -> str:
        return f"{self.kind}-{shard:05d}-of-{self.num_shards:05d}.{self.suffix}"

    def process(self, element):
        shard, rows = element
        # GroupByKey order is arbitrary: sorting fixes the bytes of the file.
        rows = sorted(rows, key=lambda row: _sort_key(row, self.fields))
        chunks, count, counts = self.encode(rows)
        rel = self.file_name(shard)
        size, sha = output.write_bytes(output.staging_path(self.output_dir, rel), chunks)
        tally.progress(f"{self.kind}_written", count)
        yield {"path": rel, "records": count, "bytes": size, "sha256": sha}
        if counts:
            yield tally.emit(METRICS, counts)


class _WriteShards(beam.PTransform):
    """Records → one staged file per shard, every shard written even when empty; returns {"files": file infos,
    tally.TALLY: counts}."""

    def __init__(
        self, output_dir: str, kind: str, suffix: str, num_shards: int, fields: tuple[str, ...], encode, to_row
    ):
        super().__init__()
        if num_shards < 1:
            raise ValueError(f"the number of {kind} shards must be at least 1, not {num_shards}")
        self.writer = _WriteShard(output_dir, kind, suffix, num_shards, fields, encode)
        self.to_row = to_row

    def expand(self, records):
        writer = self.writer
        # record → (shard, row of its fields) → (shard, [rows]) → a staged file per shard that has records
        keyed = records | "assign shards" >> beam.Map(_keyed, self.to_row, writer.num_shards).with_output_types(
            tuple[int, typing.Any]
        )
        written = (
            keyed
            | "group into shards" >> GroupLargeValues()
            | "write shards" >> beam.ParDo(self.writer).with_outputs(tally.TALLY, main="files")
        )
        # Shards that drew no record get their (empty) file here. Only file infos pass: a Flatten of the records
        # themselves would be one more trip of every record through a local runner.
        empty = (
            written.files
            | "list written shards" >> beam.combiners.ToList()
            | "write empty shards" >> beam.FlatMap(self._write_missing)
        )
        return {"files": (written.files, empty) | "all shards" >> beam.Flatten(), tally.TALLY: written[tally.TALLY]}

    def _write_missing(self, written: list[dict]):
        names = {f["path"] for f in written}
        for shard in range(self.writer.num_shards):
            if self.writer.file_name(shard) not in names:
                yield from (out for out in self.writer.process((shard, [])) if isinstance(out, dict))


class WriteDocuments(_WriteShards):
    """Document dicts (COLUMNS) → OUT/.staging/documents-SSSSS-of-NNNNN.parquet, sorted by id."""

    def __init__(self, output_dir: str, num_shards: int):
        super().__init__(output_dir, "documents", "parquet", num_shards, COLUMNS, _encode_documents, _document_row)


def _error_row(error: dict) -> tuple:
    return tuple(error[f] for f in ERROR_FIELDS)


class WriteErrors(_WriteShards):
    """Error dicts {input, where, reason, detail} → OUT/.staging/errors-SSSSS-of-NNNNN.jsonl, sorted.

    Errors are few (a job fails its exit check long before they are many), so one shard is the default."""

    def __init__(self, output_dir: str, num_shards: int = 1):
        super().__init__(output_dir, "errors", "jsonl", num_shards, ERROR_FIELDS, _encode_errors, _error_row)


def languages_kept(counts: dict) -> dict[str, dict[str, int]]:
    """{language: {documents, characters}} of the documents written, from the writers' language counts."""
    tags = sorted(key.split(":", 1)[1] for key in counts if key.startswith("language:"))
    return {
        tag: {"documents": counts[f"language:{tag}"], "characters": counts[f"language_characters:{tag}"]}
        for tag in tags
    }


class AccountingError(RuntimeError):
    """The counts do not add up: a bug, and no manifest is written that would claim otherwise."""


def build_manifest(
    job: str, config: dict, inputs: list[dict], files: list[dict], counts: dict, inputs_skipped: dict | None = None
) -> dict:
    skipped = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("skipped:")}
    errors = {k.split(":", 1)[1]: v for k, v in counts.items() if k.startswith("errors:") and v}
    docs = {
        "read": counts.get("read", 0),
        "kept": counts.get("kept", 0),
        "skipped": skipped,
        "errors": sum(errors.values()),
        "errors_by_reason": errors,
        "characters": counts.get("characters", 0),
        "languages": languages_kept(counts),
    }
    outputs = {kind: [f for f in files if f["path"].startswith(f"{kind}-")] for kind in ("documents", "errors")}
    problems = [
        f"{what} {a:,} != {b:,}"
        for what, a, b in (
            ("read != kept + skipped + errors:", docs["read"], docs["kept"] + sum(skipped.values()) + docs["errors"]),
            ("documents kept vs written:", docs["kept"], sum(f["records"] for f in outputs["documents"])),
            ("errors counted vs written:", docs["errors"], sum(f["records"] for f in outputs["errors"])),
        )
        if a != b
    ]
    if problems:
        raise AccountingError(f"{job}: the counts do not add up, so no manifest was written: {'; '.join(problems)}")
    manifest = {
        "tool": "bertcorpus",
        "version": output.TOOL_VERSION,
        "job": job,
        "config": config,
        "inputs": sorted(inputs, key=lambda i: i["path"]),
        "documents": docs,
        "outputs": outputs,
    }
    markup = {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("converter_markup:")}
    if markup:  # what Chinese converter markup held: blocks resolved, malformed parts removed
        manifest["converter_markup"] = markup
    if inputs_skipped is not None:  # paths the inputs named but no reader was given (folders, broken links)
        manifest["inputs_skipped"] = dict(sorted(inputs_skipped.items()))
    return manifest


class _Publish(WatchedDoFn):
    def __init__(self, output_dir: str, job: str, config: dict, inputs_skipped: dict | None):
        self.output_dir, self.job, self.config, self.inputs_skipped = output_dir, job, config, inputs_skipped

    def process(self, files, counts, inputs):
        files = sorted(files, key=lambda f: f["path"])
        manifest = build_manifest(self.job, self.config, inputs, files, counts, self.inputs_skipped)
        output.publish(
            self.output_dir,
            [f["path"] for f in manifest["outputs"]["documents"]] + [f["path"] for f in manifest["outputs"]["errors"]],
            manifest,
            OWNED_GLOBS,
        )
        yield manifest


class PublishDocuments(beam.PTransform):
    """The single last step. Takes a dict of PCollections: 'documents' and 'errors' (file infos from the writers),
    'counts' (tally dicts) and 'inputs' (one description per input file); moves the staged files into place and
    writes manifest.json last. Returns the PCollection holding the manifest."""

    def __init__(self, output_dir: str, job: str, config: dict, inputs_skipped: dict | None = None):
        super().__init__()
        self.publisher = _Publish(output_dir, job, config, inputs_skipped)

    def expand(self, parts):
        files = (
            (parts["documents"], parts["errors"])
            | "merge file lists" >> beam.Flatten()
            | "list files" >> beam.combiners.ToList()
        )
        counts = parts["counts"] | "sum counts" >> beam.CombineGlobally(tally.SumCounts())
        inputs = parts["inputs"] | "list inputs" >> beam.combiners.ToList()
        return files | "write manifest" >> beam.ParDo(
            self.publisher, beam.pvalue.AsSingleton(counts), beam.pvalue.AsSingleton(inputs)
        )


# ---------------------------------------------------------------------------------------------- command line


def skipped_rows(inputs_skipped: dict[str, int]) -> list[tuple[str, str]]:
    """The summary rows of a manifest's inputs_skipped: one per reason that left any path out."""
    return [(f"inputs left out ({k.replace('_', ' ')})", f"{v:,}") for k, v in inputs_skipped.items() if v]


def summary_rows(manifest: dict) -> list[tuple[str, str]]:
    """The closing summary of an extraction job, every number from the manifest."""
    docs, outputs = manifest["documents"], manifest["outputs"]
    skipped = sum(docs["skipped"].values())
    rows = [
        (
            "documents",
            f"read {docs['read']:,} = kept {docs['kept']:,} + skipped {skipped:,} + errors {docs['errors']:,}",
        )
    ]
    rows += [(f"skipped ({reason})", f"{n:,}") for reason, n in docs["skipped"].items() if n]
    rows += [(f"errors ({reason})", f"{n:,}") for reason, n in docs["errors_by_reason"].items()]
    rows += skipped_rows(manifest.get("inputs_skipped", {}))
    if markup := manifest.get("converter_markup"):
        rows.append(("converter markup", ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in markup.items())))
    rows.append(("text kept", f"{docs['characters']:,} characters"))
    if docs.get("languages"):
        rows.append(("languages", language_summary(docs["languages"])))
    for kind in ("documents", "errors"):
        rows.append((f"{kind} files", f"{len(outputs[kind])} in {manifest['config']['output']}"))
    return rows


def language_summary(languages: dict[str, dict[str, int]]) -> str:
    """`en 180, und 3` for the summary: each language's documents, most first."""
    ranked = sorted(languages.items(), key=lambda kv: (-kv[1]["documents"], kv[0]))
    return ", ".join(f"{tag} {v['documents']:,}" for tag, v in ranked)


def error_check(manifest: dict, strict: bool, max_error_rate: float) -> str | None:
    """Why the run must exit non-zero (--strict, --max-error-rate), or None when its errors are tolerable."""
    errors, read = manifest["documents"]["errors"], manifest["documents"]["read"]
    if strict and errors:
        return f"{errors:,} errors with --strict"
    if read and errors / read > max_error_rate:
        return f"{errors:,} errors in {read:,} read ({errors / read:.2%}) is over --max-error-rate {max_error_rate:g}"
    return None


def exit_problems(manifest: dict, unit: str, strict: bool, max_error_rate: float, *checks: str | None):
    """Why an extraction whose output is complete exits 1, first reason first: nothing kept from inputs of some
    bytes, any `checks` of the job's own, then its errors (--strict, --max-error-rate)."""
    yield nothing_kept(manifest, unit)
    for problem in (*checks, error_check(manifest, strict, max_error_rate)):
        if problem:
            yield (
                f"{problem}; the output is complete, and {manifest['config']['output']}/errors-*.jsonl says what "
                "was rejected"
            )


def nothing_kept(manifest: dict, unit: str) -> str | None:
    """Why a run that read inputs of some bytes and kept no document must exit non-zero, or None. `unit` names what
    the job reads (pages, books)."""
    docs = manifest["documents"]
    size = sum(entry.get("size") or 0 for entry in manifest["inputs"])
    if docs["kept"] or not size:
        return None
    if not docs["read"]:
        return f"no {unit} found in {size:,} bytes of input"
    why = "; ".join(
        f"{kind} " + ", ".join(f"{reason} {n:,}" for reason, n in counts.items() if n)
        for kind, counts in (("skipped", docs["skipped"]), ("errors", docs["errors_by_reason"]))
        if any(counts.values())
    )
    return f"no documents kept from {size:,} bytes of input ({docs['read']:,} read: {why})"
