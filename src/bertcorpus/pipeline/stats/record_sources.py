"""The sources of records whose documents are not under DIR (`bertcorpus stats records/`): create's manifest names
the files it read (`inputs`: path, size, documents) and the runs that wrote them (`input_runs`: their manifests, by
path and sha256).

    create's inputs ─ each file at its path, of its size and sha256, a documents file ─ its `source` and
                      `language` columns counted (two columns, a batch of rows at a time)
    input_runs      ─ each manifest at its path, of its sha256 ─ the extraction of a source: its licence and provenance

What cannot be found this way (a file moved, changed, or not a documents file) is counted as documents of unknown
source, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bertcorpus.pipeline.stats.stages import MANIFEST, Stage, manifest_problem
from bertcorpus.transforms.languages import UNDETERMINED

UNLABELLED = "(no source label)"  # a documents file of another tool may leave `source` empty


@dataclass
class RecordSources:
    """The documents create read, by source and by source and language, and the runs that wrote them."""

    by_source: Counter = field(default_factory=Counter)
    languages: dict[str, Counter] = field(default_factory=dict)
    runs: list[Stage] = field(default_factory=list)
    unsourced: int = 0  # documents of the files that could not be read as the manifest describes them
    unsourced_files: list[str] = field(default_factory=list)


def record_sources(records: list[Stage], known: set[str]) -> RecordSources:
    """What the records' manifests say of their documents' sources, read from the files they name; `known`: the
    sha256 of the manifests found under DIR, whose runs are not read again."""
    found = RecordSources()
    for stage in records:
        for entry in stage.manifest.get("inputs") or []:
            if not isinstance(entry, dict) or "path" not in entry:
                continue
            counted = _sources_in(Path(str(entry["path"])), entry.get("size"), entry.get("sha256"))
            if counted is None:
                found.unsourced += int(entry.get("documents") or 0)
                found.unsourced_files.append(str(entry["path"]))
                continue
            for source, tags in counted.items():
                found.by_source[source] += sum(tags.values())
                found.languages.setdefault(source, Counter()).update(tags)
        for upstream in _runs_of(stage, known):
            known.add(upstream.manifest_sha256)
            found.runs.append(upstream)
    return found


def _runs_of(stage: Stage, known: set[str]) -> list[Stage]:
    """The documents runs a records manifest names (input_runs), other than those `known`, whose manifests are
    found with their sha256: at the path it names (as create was given it, relative to where create ran), else
    beside a file create read."""
    runs = [r for r in stage.manifest.get("input_runs") or [] if isinstance(r, dict)]
    named = [Path(str(r["manifest"])) for r in runs if "://" not in str(r.get("manifest", "://"))]
    beside = [
        Path(str(entry["path"])).parent / MANIFEST
        for entry in stage.manifest.get("inputs") or []
        if isinstance(entry, dict) and "path" in entry
    ]
    wanted = {str(r.get("sha256")) for r in runs} - known
    found = []
    for path in dict.fromkeys(named + beside):
        upstream = _documents_run(path, wanted)
        if upstream is not None:
            wanted.discard(upstream.manifest_sha256)
            found.append(upstream)
    return found


def _documents_run(path: Path, wanted: set[str]) -> Stage | None:
    """The documents run whose manifest is at `path`, where its sha256 is one of those `wanted`; else None."""
    try:
        raw = path.read_bytes()
        manifest = json.loads(raw)
    except (OSError, ValueError):
        return None
    sha256 = hashlib.sha256(raw).hexdigest()
    if sha256 not in wanted or manifest_problem(manifest) is not None:
        return None
    stage = Stage(path.parent.name, path.parent, manifest, sha256, len(raw))
    return stage if stage.kind == "documents" else None


def _sources_in(path: Path, size, sha256) -> dict[str, Counter] | None:
    """{source: {language: documents}} of the documents file at `path`, where it has the size and sha256 the
    manifest gives it (a manifest names its inputs by absolute path: only the file it describes is read); None
    where there is no such file (moved, changed, or not a documents file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.stat().st_size != size or _sha256_of(path) != sha256:
            return None
        parquet = pq.ParquetFile(path, page_checksum_verification=True)  # a damaged page is an error
        names = parquet.schema_arrow.names
        if "source" not in names:
            return None
        counted: dict[str, Counter] = {}
        columns = ["source"] + ["language"] * ("language" in names)
        for batch in parquet.iter_batches(columns=columns, batch_size=65536):
            sources, *language = (c.to_pylist() for c in batch.columns)
            for source, tag in zip(sources, language[0] if language else [None] * len(sources)):
                counted.setdefault(source or UNLABELLED, Counter())[tag or UNDETERMINED] += 1
        return counted
    except (OSError, pa.ArrowException):
        return None


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
