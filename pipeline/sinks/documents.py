"""The documents sink shared by the extraction jobs: sharded Parquet, the errors dead letter, the manifest.

    documents ─ (shard, document) ─ GroupByKey ─ write shards, sorted by id ──┐
    errors ──── (shard, error) ──── GroupByKey ─ write shards, sorted ─────────┤
    counts ──────────────────────────────────── sum ──────────────────────────┼─ publish: move the staged files
    input descriptions ──────────────────────── list ─────────────────────────┘  into place, manifest.json last

A document's shard is a stable hash of its id, and each shard is written sorted by id, so the files hold the same
bytes whatever the runner, its worker count and the order in which documents arrive. Shard files are written whole
under fixed names in OUT/.staging, so a retried bundle rewrites the same file instead of adding one.

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

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from bertcorpus.pipeline import tally
from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn
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


def parquet_bytes(documents: list[dict]) -> bytes:
    table = pa.Table.from_pylist(documents, schema=SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return sink.getvalue().to_pybytes()


def _encode_documents(documents: list[dict]) -> tuple[bytes, int, dict]:
    """Sorted documents → (Parquet bytes, records, counts); of documents sharing an id only the first is kept."""
    unique = [d for i, d in enumerate(documents) if not i or d["id"] != documents[i - 1]["id"]]
    counts = {
        "kept": len(unique),
        "characters": sum(len(d["text"]) for d in unique),
        "skipped:duplicate_id": len(documents) - len(unique),
    }
    for d in unique:
        for name, n in ((f"language:{d['language']}", 1), (f"language_characters:{d['language']}", len(d["text"]))):
            counts[name] = counts.get(name, 0) + n
    return parquet_bytes(unique), len(unique), counts


def _encode_errors(errors: list[dict]) -> tuple[bytes, int, dict]:
    """Sorted error records → (JSON lines, records, no counts: the job counted them where they arose)."""
    lines = "".join(json.dumps({k: e[k] for k in ERROR_FIELDS}, ensure_ascii=False) + "\n" for e in errors)
    return lines.encode(), len(errors), {}


def errors_bytes(errors: list[dict]) -> bytes:
    """Dead-letter records as an errors file holds them: sorted, one JSON object a line (for a job that writes its
    errors files itself)."""
    return _encode_errors(sorted(errors, key=lambda e: _sort_key(e, ERROR_FIELDS)))[0]


def _sort_key(record: dict, fields: tuple[str, ...]) -> tuple:
    """The fields in order (the first is the id), None before any string: a total order on distinct records. An
    error's `where` goes by the numbers in it ("byte 20" before "byte 100"), then as text."""
    return tuple(
        (record[f] is not None, _natural_key(record[f] or "") if f == "where" else record[f] or "") for f in fields
    )


def _natural_key(text: str) -> tuple:
    """text cut into its runs of digits, which compare as numbers, and the text between them; then text itself."""
    parts = re.split(r"(\d+)", text)
    return tuple(int(part) if i % 2 else part for i, part in enumerate(parts)), text


def _keyed(record: dict, fields: tuple[str, ...], num_shards: int) -> tuple[int, tuple]:
    """record → (shard, its fields as a tuple): the shard from the first field, the id."""
    row = tuple(record[f] for f in fields)
    return stable_hash(row[0]) % num_shards, row


class _WriteShard(WatchedDoFn):
    """(shard, records) → one staged file holding the records sorted; yields its file info, counts to TALLY."""

    def __init__(self, output_dir: str, kind: str, suffix: str, num_shards: int, fields: tuple[str, ...], encode):
        self.output_dir, self.kind, self.suffix = output_dir, kind, suffix
        self.num_shards, self.fields, self.encode = num_shards, fields, encode

    def file_name(self, shard: int) -> str:
        return f"{self.kind}-{shard:05d}-of-{self.num_shards:05d}.{self.suffix}"

    def process(self, element):
        shard, rows = element
        # GroupByKey order is arbitrary: sorting fixes the bytes of the file.
        records = sorted((dict(zip(self.fields, row)) for row in rows), key=lambda r: _sort_key(r, self.fields))
        data, count, counts = self.encode(records)
        rel = self.file_name(shard)
        size, sha = output.write_bytes(output.staging_path(self.output_dir, rel), [data])
        tally.progress(f"{self.kind}_written", count)
        yield {"path": rel, "records": count, "bytes": size, "sha256": sha}
        if counts:
            yield tally.emit(METRICS, counts)


class _WriteShards(beam.PTransform):
    """Records → one staged file per shard, every shard written even when empty; returns {"files": file infos,
    tally.TALLY: counts}."""

    def __init__(self, output_dir: str, kind: str, suffix: str, num_shards: int, fields: tuple[str, ...], encode):
        super().__init__()
        if num_shards < 1:
            raise ValueError(f"the number of {kind} shards must be at least 1, not {num_shards}")
        self.writer = _WriteShard(output_dir, kind, suffix, num_shards, fields, encode)

    def expand(self, records):
        writer = self.writer
        # record → (shard, row of its fields) → (shard, [rows]) → a staged file per shard that has records
        keyed = records | "assign shards" >> beam.Map(_keyed, writer.fields, writer.num_shards).with_output_types(
            tuple[int, typing.Any]
        )
        written = (
            keyed
            | "group into shards" >> beam.GroupByKey()
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
        super().__init__(output_dir, "documents", "parquet", num_shards, COLUMNS, _encode_documents)


class WriteErrors(_WriteShards):
    """Error dicts {input, where, reason, detail} → OUT/.staging/errors-SSSSS-of-NNNNN.jsonl, sorted.

    Errors are few (a job fails its exit check long before they are many), so one shard is the default."""

    def __init__(self, output_dir: str, num_shards: int = 1):
        super().__init__(output_dir, "errors", "jsonl", num_shards, ERROR_FIELDS, _encode_errors)


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
