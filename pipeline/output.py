"""Atomic job outputs on any Beam filesystem: staged files, a final move, and the manifest written last.

Workers write into OUT/.staging/ under deterministic names, so a retried bundle rewrites the same bytes.
One finalising step then moves the staged files to their final names, deletes files an older run left
behind, and writes OUT/manifest.json last. A directory without a manifest is incomplete by contract.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Iterable

from apache_beam.io.filesystems import FileSystems

from pipeline import direct_io

MANIFEST = "manifest.json"
STAGING = ".staging"
TOOL_VERSION = "0.1.0"


class OutputExistsError(RuntimeError):
    pass


def join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts) if parts else base


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def is_remote(path: str) -> bool:
    return "://" in path


def prepare_output_dir(output: str, overwrite: bool) -> None:
    """Refuse to run over a finished output unless asked, and clear leftovers of an interrupted run."""
    manifest = join(output, MANIFEST)
    if exists(manifest):
        if not overwrite:
            raise OutputExistsError(f"{output} already holds a finished run ({MANIFEST} exists); "
                                    "choose another --output or pass --overwrite")
        # Without its manifest the old output no longer looks complete while the new run works.
        FileSystems.delete([manifest])
    staging = join(output, STAGING)
    if exists(staging):
        FileSystems.delete([staging])


def staging_path(output: str, relative: str) -> str:
    return join(output, STAGING, *relative.split("/"))


def _make_local_parent(path: str) -> None:
    """Object stores have no directories; local filesystems need the parent before a create."""
    if not is_remote(path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)


def write_bytes(path: str, chunks: Iterable[bytes], read_back: bool = True) -> tuple[int, str]:
    """Write chunks (bytes, or any contiguous buffer of bytes) to path, parent directories created; return
    (bytes, sha256).

    read_back=False is for the files a job publishes and does not read again: a local one is then written past
    the page cache where the filesystem allows it (direct_io.py)."""
    _make_local_parent(path)
    digest = hashlib.sha256()
    size = 0

    def counted(chunks: Iterable[bytes]) -> Iterable[bytes]:
        nonlocal size
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            yield chunk

    remote = is_remote(path)
    if not read_back and not remote and direct_io.write_file(path, counted(chunks)):
        return size, digest.hexdigest()
    with FileSystems.create(path) as f:
        for chunk in counted(chunks):
            f.write(bytes(chunk) if remote and not isinstance(chunk, bytes) else chunk)  # object stores want bytes
    return size, digest.hexdigest()


def publish(output: str, relative_paths: list[str], manifest: dict, owned_globs: list[str]) -> None:
    """Move staged files into place, delete stale outputs matching owned_globs, write the manifest last.

    Safe to repeat: a file already moved by an earlier attempt is left as it is.
    """
    sources, targets = [], []
    for rel in relative_paths:
        src, dst = staging_path(output, rel), join(output, *rel.split("/"))
        if exists(src):
            if exists(dst):
                FileSystems.delete([dst])
            sources.append(src)
            targets.append(dst)
    for dst in targets:
        _make_local_parent(dst)
    if sources:
        FileSystems.rename(sources, targets)
    keep = {join(output, *rel.split("/")) for rel in relative_paths}
    stale = [m.path for pattern in owned_globs
             for result in FileSystems.match([join(output, pattern)])
             for m in result.metadata_list if m.path not in keep]
    if stale:
        FileSystems.delete(stale)
    staging = join(output, STAGING)
    if exists(staging):
        FileSystems.delete([staging])
    write_json_atomically(join(output, MANIFEST), manifest)


def discard_staging(output: str) -> None:
    staging = join(output, STAGING)
    if exists(staging):
        FileSystems.delete([staging])


def write_json_atomically(path: str, payload: dict) -> None:
    tmp = path + ".tmp"
    _make_local_parent(tmp)
    with FileSystems.create(tmp) as f:
        f.write((json.dumps(payload, indent=1, sort_keys=True) + "\n").encode())
    if not is_remote(path):
        os.replace(tmp, path)  # atomic: there is never a moment without a manifest
        return
    if exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])


def read_manifest(output: str) -> dict:
    with FileSystems.open(join(output, MANIFEST)) as f:
        return json.loads(f.read())
