"""Atomic job outputs on any Beam filesystem: staged files, a final move, and the manifest written last.

Workers write into OUT/.staging/ under deterministic names, so a retried bundle rewrites the same bytes.
One finalising step then moves the staged files to their final names, deletes files an older run left
behind, and writes OUT/manifest.json last. A directory without a manifest is incomplete by contract.

Object stores have no directories: a "directory" is every object whose name starts with its path and a slash, so
the staging area is cleared by listing that prefix, never by asking whether the directory exists. Nothing outside
the output's own prefix is ever deleted. A filesystem that refuses a write or a listing (a --output that is a
file, a read-only directory, a missing bucket) stops the job with one line naming the path and the cause.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from typing import Iterable, Iterator

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from google.api_core.exceptions import GoogleAPIError

from pipeline.errors import UserError

try:
    from google.cloud.storage.exceptions import InvalidResponse
except ImportError:  # google-cloud-storage before 3.0, as Beam 2.71 installs it
    from google.resumable_media import InvalidResponse

MANIFEST = "manifest.json"
STAGING = ".staging"
WRITE_CHECK = ".write-check"   # written and deleted at launch, so that an unwritable output fails early
TOOL_VERSION = "0.1.0"
# What filesystems raise when they refuse an operation: OSError locally (and for a broken connection), BeamIOError
# from Beam's own filesystem layer, GoogleAPIError from Cloud Storage's JSON API and InvalidResponse from its
# uploads and downloads.
FILESYSTEM_ERRORS = (OSError, BeamIOError, GoogleAPIError, InvalidResponse)


class OutputExistsError(RuntimeError):
    pass


def join(base: str, *parts: str) -> str:
    return FileSystems.join(base, *parts) if parts else base


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def is_remote(path: str) -> bool:
    return "://" in path


def filesystem_error_cause(error: BaseException) -> str:
    """The cause a filesystem error names, in one line: the innermost error a BeamIOError wraps, an OSError's
    reason, an HTTP status and the server's message, else the first line of the message."""
    while isinstance(getattr(error, "exception_details", None), dict) and error.exception_details:
        error = next(iter(error.exception_details.values()))
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    if isinstance(error, InvalidResponse) and getattr(error, "response", None) is not None:
        return _http_cause(error.response)
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _http_cause(response) -> str:
    """'HTTP 404 Not Found', and the message of Cloud Storage's JSON error body where there is one."""
    cause = f"HTTP {response.status_code} {response.reason}"
    try:
        return f"{cause}: {json.loads(response.text)['error']['message']}"
    except (ValueError, KeyError, TypeError):
        return cause


@contextlib.contextmanager
def _output_errors(doing: str, path: str) -> Iterator[None]:
    """Turn a filesystem's error while `doing` something to path into one line for the user."""
    try:
        yield
    except FILESYSTEM_ERRORS as e:
        raise UserError(f"cannot {doing} {path}: {filesystem_error_cause(e)}") from None


def prepare_output_dir(output: str, overwrite: bool) -> None:
    """Check that the output can be written, refuse to run over a finished output unless asked, and clear
    leftovers of an interrupted run."""
    _check_writable(output)
    manifest = join(output, MANIFEST)
    with _output_errors("replace", manifest):
        if exists(manifest):
            if not overwrite:
                raise OutputExistsError(f"{output} already holds a finished run ({MANIFEST} exists); "
                                        "choose another --output or pass --overwrite")
            # Without its manifest the old output no longer looks complete while the new run works.
            FileSystems.delete([manifest])
    discard_staging(output)


def _check_writable(output: str) -> None:
    if not is_remote(output) and os.path.exists(output) and not os.path.isdir(output):
        raise UserError(f"cannot write to {output}: it is a file, not a directory")
    check_writable(output, join(output, WRITE_CHECK))


def check_writable(output: str, probe: str) -> None:
    """Write and delete an empty file at probe, a name the output owns, so that an output that cannot be written
    fails now, in one line naming it, rather than in a worker or after hours of work."""
    with _output_errors("write to", output):
        _make_local_parent(probe)
        with FileSystems.create(probe) as f:
            f.write(b"")
        FileSystems.delete([probe])


def delete_under(directory: str) -> None:
    """Delete everything below directory/: a local directory tree, or every object whose name starts with
    directory + "/" (never a sibling such as directory2/)."""
    with _output_errors("delete", directory):
        if not is_remote(directory):
            if os.path.lexists(directory):
                FileSystems.delete([directory])
            return
        found = [m.path for m in FileSystems.match([join(directory, "**")])[0].metadata_list]
        if found:
            FileSystems.delete(found)


def staging_path(output: str, relative: str) -> str:
    return join(output, STAGING, *relative.split("/"))


def _make_local_parent(path: str) -> None:
    """Object stores have no directories; local filesystems need the parent before a create."""
    if is_remote(path):
        return
    parent = os.path.dirname(path) or "."
    if os.path.exists(parent) and not os.path.isdir(parent):  # makedirs would call this "File exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent)
    os.makedirs(parent, exist_ok=True)


def write_bytes(path: str, chunks: Iterable[bytes]) -> tuple[int, str]:
    """Write chunks (bytes, or any contiguous buffer of bytes) to path, parent directories created; return
    (bytes, sha256)."""
    with _output_errors("write", path):
        _make_local_parent(path)
    digest = hashlib.sha256()
    size = 0
    remote = is_remote(path)
    with _output_errors("write", path), FileSystems.create(path) as f:
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            f.write(bytes(chunk) if remote and not isinstance(chunk, bytes) else chunk)  # object stores want bytes
    return size, digest.hexdigest()


def publish(output: str, relative_paths: list[str], manifest: dict, owned_globs: list[str]) -> None:
    """Move staged files into place, delete stale outputs matching owned_globs, write the manifest last.

    Safe to repeat: a file already moved by an earlier attempt is left as it is.
    """
    with _output_errors("publish into", output):
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
    discard_staging(output)
    write_json_atomically(join(output, MANIFEST), manifest)


def discard_staging(output: str) -> None:
    delete_under(join(output, STAGING))


def write_json_atomically(path: str, payload: dict) -> None:
    tmp = path + ".tmp"
    with _output_errors("write", path):
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
