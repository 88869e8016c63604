"""The stages `bertcorpus stats` finds under DIR: every manifest.json of a finished run (DIR, one and two levels down),
checked, with the kind of run it names.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from bertcorpus.pipeline.errors import UserError
from bertcorpus.transforms.manifest_paths import manifest_paths_problem

MANIFEST = "manifest.json"
STATS = "stats.json"  # the card
REPORT_FILES = "report_files"  # the plots' folder, never searched for manifests
SPLITS = ("train", "eval")


@dataclass
class Stage:
    """One finished job output: its directory and its manifest."""

    name: str  # the directory relative to DIR ("." for DIR itself)
    dir: Path
    manifest: dict
    manifest_sha256: str
    manifest_bytes: int

    @property
    def job(self) -> str:
        return str(self.manifest.get("job", "unknown"))

    @property
    def kind(self) -> str:
        if self.job in ("vocab", "vocab-counts"):
            return "vocab"
        outputs = self.manifest.get("outputs")
        if not isinstance(outputs, dict):
            return "other"
        if isinstance(outputs.get("documents"), list):
            return "documents"
        if self.job == "create" or any(isinstance(v, dict) and "max_seq_length" in v for v in outputs.values()):
            return "records"
        return "other"


def _shard_problem(split: str, entry) -> str | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("shards"), list):
        return f"its {split} output has no list of shards"
    if not isinstance(entry.get("instances"), int):
        return f"its {split} output has no instance count"
    for shard in entry["shards"]:
        if not (
            isinstance(shard, dict) and isinstance(shard.get("path"), str) and isinstance(shard.get("records"), int)
        ):
            return f"a {split} shard has no path or record count: {json.dumps(shard)[:80]}"
    return None


def _json_kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def manifest_problem(manifest) -> str | None:
    """Why a parsed manifest.json cannot be read as a stage, or None: the fields stats relies on, checked before
    any of them is used, so that a damaged manifest gets its own message instead of a traceback."""
    if not isinstance(manifest, dict):
        return f"it holds {_json_kind(manifest)}, not a JSON object"
    for key, kind in (("outputs", dict), ("inputs", list), ("vocab", dict), ("documents", dict)):
        if key in manifest and manifest[key] is not None and not isinstance(manifest[key], kind):
            return f'its "{key}" is {_json_kind(manifest[key])}, not {_json_kind(kind())}'
    if problem := manifest_paths_problem(manifest):
        return problem
    outputs = manifest.get("outputs") or {}
    if "documents" in outputs:
        files = outputs["documents"]
        if not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("path"), str) for f in files
        ):
            return 'its "outputs" name documents files without a path'
        return None
    for seq, out in outputs.items():
        if not isinstance(out, dict) or ("max_seq_length" not in out and manifest.get("job") != "create"):
            continue
        if not all(isinstance(out.get(k), int) for k in ("max_seq_length", "max_predictions_per_seq")):
            return f"its output {seq} has no integer max_seq_length and max_predictions_per_seq"
        for split in SPLITS:
            problem = _shard_problem(split, out[split]) if split in out else None
            if problem:
                return f"output {seq}: {problem}"
    return None


def find_stages(root: Path, warnings: list[str]) -> list[Stage]:
    """Every valid manifest in DIR and one or two levels below it (hidden and report folders skipped).

    An invalid one is skipped with a warning that says where and why; when no valid one is left, that is an
    error, since the user must repair or remove the manifest."""
    paths = [root / MANIFEST, *sorted(root.glob(f"*/{MANIFEST}")), *sorted(root.glob(f"*/*/{MANIFEST}"))]
    stages, invalid = [], []
    for path in paths:
        parts = path.relative_to(root).parts[:-1]
        if not path.is_file() or any(p.startswith(".") or p == REPORT_FILES for p in parts):
            continue
        raw = path.read_bytes()
        try:
            manifest = json.loads(raw)
        except ValueError as e:  # UnicodeDecodeError is one too
            invalid.append(f"{path} is not a valid manifest: it is not JSON ({e})")
            continue
        problem = manifest_problem(manifest)
        if problem:
            invalid.append(f"{path} is not a valid bertcorpus manifest: {problem}")
            continue
        stages.append(Stage("/".join(parts) or ".", path.parent, manifest, hashlib.sha256(raw).hexdigest(), len(raw)))
    if invalid and not stages:
        raise UserError("; ".join(invalid) + " (rerun the job that wrote it, or remove it)")
    warnings += [f"{message}; skipped" for message in invalid]
    return stages
