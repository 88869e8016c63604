"""Whether a finished output is what a run would write again, so that `run` and `demo` (and a job given --reuse) can
keep it instead of running: its manifest, written last, must record this bertcorpus version, the same config, and
the same input files with the same sizes and digests, and the files it lists must still be there with the sizes and
sha256 it records.

Every input is hashed as the job fingerprints it: its sha256, or for a multistream dump read by byte ranges the
sha256 of its first and last MiB. What another job's manifest says of a file is not taken for it: a file damaged in
place at the same size and time would pass. The output's own files are read and hashed the same way. The cheap
checks come first, so a changed config or size is found without reading any file.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from dataclasses import dataclass, field
from typing import BinaryIO

from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.sinks import output
from bertcorpus.transforms.compression import MIB
from bertcorpus.transforms.manifest_paths import manifest_paths_problem


@dataclass(frozen=True)
class Reuse:
    """What a finished output must match to be kept (--reuse): the config as its manifest records it, the input
    files as it names them, (path, size), and other entries ({"vocab.sha256": ...}); see `staleness`."""

    config: dict
    inputs: list[tuple[str, int]]
    same: dict = field(default_factory=dict)

    def outcome(self, job: str, output_dir: str, manifest_path: str) -> str:
        """What becomes of the output: "keep" a finished run of `job` that is up to date, "replace" one that is out
        of date, each said in one line; else "run" (nothing there, or another job's output, which only
        --overwrite replaces)."""
        stale = staleness(manifest_path, job, self.config, self.inputs, self.same)
        if stale is None:
            print(f"{job}: {output_dir} is up to date (same inputs, config and bertcorpus version); kept", flush=True)
            return "keep"
        if (_read_json(manifest_path) or {}).get("job") != job:
            return "run"
        print(f"{job}: {output_dir} is out of date ({stale}); running again", flush=True)
        return "replace"


def staleness(
    manifest_path: str, job: str, config: dict, inputs: list[tuple[str, int]], same: dict | None = None
) -> str | None:
    """Why the finished run whose manifest is at `manifest_path` is not what `job` would write now from `inputs`
    ((path, size) of every file it reads) with `config` (as its manifest records it), in a few words; None when it
    is. `same` names other manifest entries that must hold given values ({"vocab.sha256": ...})."""
    manifest = _read_json(manifest_path)
    if manifest is None:
        return "it holds no finished run"
    if manifest.get("job") != job or manifest.get("version") != output.TOOL_VERSION:
        return f"it was written by {manifest.get('job')} of bertcorpus {manifest.get('version')}"
    if problem := manifest_paths_problem(manifest):
        return f"its manifest is not one bertcorpus reads ({problem})"
    wanted, had = json.loads(json.dumps(config)), manifest.get("config")
    if had != wanted:
        had = had if isinstance(had, dict) else {}
        return f"its config differs in {', '.join(sorted(k for k in {*wanted, *had} if wanted.get(k) != had.get(k)))}"
    for key, value in (same or {}).items():
        if _entry(manifest, key) != value:
            return f"its {key} differs"
    recorded = _recorded_inputs(manifest)
    if set(recorded) != {path for path, _ in inputs}:
        return "the input files differ"
    for path, size in inputs:
        if recorded[path].get("size") != size:
            return f"{path} changed size"
    folder = _split(manifest_path)[0]
    written = list(dict.fromkeys((output.join(folder, rel), size, sha) for rel, size, sha in _output_files(manifest)))
    for path, size, _ in written:
        if not output.exists(path) or _size(path) != size:
            return f"{path} is missing or changed"
    for path, size in inputs:
        entry = recorded[path]
        if "sha256" in entry and digest(path) != entry["sha256"]:
            return f"{path} changed"
        if "sha256_first_and_last_mib" in entry:
            with FileSystems.open(path, compression_type="uncompressed") as f:
                if head_tail_sha256(f, size) != entry["sha256_first_and_last_mib"]:
                    return f"{path} changed"
    for path, _, sha in written:
        if sha is not None and digest(path) != sha:
            return f"{path} changed since the run wrote it"
    return None


def digest(path: str) -> str:
    """The sha256 of a file, read."""
    sha = hashlib.sha256()
    with FileSystems.open(path, compression_type="uncompressed") as f:
        while chunk := f.read(MIB):
            sha.update(chunk)
    return sha.hexdigest()


def head_tail_sha256(f: BinaryIO, size: int) -> str:
    """The sha256 of a file's first and last MiB: the fingerprint of a file too big to hash whole at launch (a
    multistream dump, which no single worker reads all of)."""
    f.seek(0)
    head = f.read(MIB)
    f.seek(size - MIB)
    return hashlib.sha256(head + f.read(MIB)).hexdigest()


def _recorded_inputs(manifest: dict) -> dict[str, dict]:
    """path → its entry, for every input file the manifest records, multistream indexes included."""
    recorded = {}
    for entry in manifest.get("inputs") or []:
        recorded[entry["path"]] = entry
        if isinstance(entry.get("index"), dict):
            recorded[entry["index"]["path"]] = entry["index"]
    return recorded


def _listed_files(outputs) -> list[dict]:
    """The file entries ({path, bytes, ...}) anywhere in a manifest's outputs."""
    if isinstance(outputs, list):
        return [e for item in outputs for e in _listed_files(item)]
    if not isinstance(outputs, dict):
        return []
    if "path" in outputs and "bytes" in outputs:
        return [outputs]
    return [e for value in outputs.values() for e in _listed_files(value)]


def _output_files(manifest: dict) -> list[tuple[str, int, str | None]]:
    """(path relative to the output, bytes, sha256 where recorded) of every file the manifest lists as written:
    shards, errors files, and files keyed by their name (a vocab's)."""
    listed = [(e["path"], e) for e in _listed_files([manifest.get("outputs"), manifest.get("errors_files")])]
    outputs = manifest.get("outputs")
    if isinstance(outputs, dict):
        listed += [(name, e) for name, e in outputs.items() if isinstance(e, dict) and set(e) >= {"bytes"}]
    return [
        (path, e["bytes"], e.get("sha256") if isinstance(e.get("sha256"), str) else None)
        for path, e in listed
        if isinstance(e["bytes"], int)
    ]


def _entry(manifest: dict, dotted: str):
    value = manifest
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _read_json(path: str) -> dict | None:
    try:
        if not output.exists(path):
            return None
        with FileSystems.open(path, compression_type="uncompressed") as f:
            data = json.loads(f.read())
    except (ValueError, *output.FILESYSTEM_ERRORS):
        return None
    return data if isinstance(data, dict) else None


def _size(path: str) -> int | None:
    matched = FileSystems.match([path])[0].metadata_list
    return matched[0].size_in_bytes if matched else None


def _split(path: str) -> tuple[str, str]:
    """(folder, name) of a local or remote path."""
    folder, name = (posixpath if output.is_remote(path) else os.path).split(path)
    return folder or ".", name
