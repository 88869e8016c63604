"""Atomic job outputs on any Beam filesystem: staged files, a final move, and the manifest written last.

Workers write into OUT/.staging/ under deterministic names, so a retried bundle rewrites the same bytes.
One finalising step then moves the staged files to their final names, deletes files an older run left
behind, and writes OUT/manifest.json last. A directory without a manifest is incomplete by contract.

Object stores have no directories: a "directory" is every object whose name starts with its path and a slash, so
the staging area is cleared by listing that prefix, never by asking whether the directory exists. Nothing outside
the output's own prefix is ever deleted. A filesystem that refuses a write or a listing (a --output that is a
file, a read-only directory, a missing bucket) stops the job with one line naming the path and the cause.

One run at a time writes an output, and never into its own inputs (check_apart). Locally the launching process
holds a lock on the output directory from prepare_output_dir until its run ends, so that a second run into it
refuses in one line; the kernel drops the lock of a process that dies, however it dies, so no claim outlives its
run. Object stores offer no lock and no create-if-absent; there publish() checks again, before it moves anything,
that no other run published meanwhile.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Iterator

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems
from google.api_core.exceptions import GoogleAPIError

from bertcorpus import __version__
from bertcorpus.pipeline.errors import UserError

try:
    from google.cloud.storage.exceptions import InvalidResponse
except ImportError:  # google-cloud-storage before 3.0, as Beam 2.71 installs it
    from google.resumable_media import InvalidResponse

MANIFEST = "manifest.json"
STAGING = ".staging"
WRITE_CHECK = ".write-check"  # written and deleted at launch, so that an unwritable output fails early
TOOL_VERSION = __version__
# What filesystems raise when they refuse an operation: OSError locally (and for a broken connection), BeamIOError
# from Beam's own filesystem layer, GoogleAPIError from Cloud Storage's JSON API and InvalidResponse from its
# uploads and downloads.
FILESYSTEM_ERRORS = (OSError, BeamIOError, GoogleAPIError, InvalidResponse)


class OutputExistsError(RuntimeError):
    """The output holds a finished run, or another run is writing it."""


# Output directories this process holds (by real path) → the open directory that carries the lock.
_CLAIMS: dict[str, int] = {}
_CLAIMS_LOCK = threading.Lock()
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL)  # what flock says where it has no locks


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
    """Check that the output can be written, claim it for this run (claim_output), refuse to run over a finished
    output unless asked, and clear leftovers of an interrupted run."""
    _check_writable(output)
    claim_output(output)
    try:
        manifest = join(output, MANIFEST)
        with _output_errors("replace", manifest):
            if exists(manifest):
                if not overwrite:
                    raise OutputExistsError(
                        f"{output} already holds a finished run ({MANIFEST} exists); "
                        "choose another --output or pass --overwrite"
                    )
                # Without its manifest the old output no longer looks complete while the new run works.
                FileSystems.delete([manifest])
        _clear_staging(output)
    except BaseException:
        release_output(output)
        raise


def claim_output(output: str) -> None:
    """Hold a local output directory for this process's run: an exclusive lock on the directory itself, so that
    nothing is left behind to clear, whether the run ends, fails or is killed. Another run that holds it makes
    this one refuse in one line. A process that holds it already (runs one after another in one process) keeps
    it. Remote outputs have no lock (see publish)."""
    if is_remote(output):
        return
    key = os.path.realpath(output)
    with _CLAIMS_LOCK, _output_errors("claim", output):
        if key in _CLAIMS:
            return
        while True:
            held = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(held)
                raise OutputExistsError(
                    f"another run is writing into {output}; wait for it to end or choose another --output"
                ) from None
            except OSError as e:
                os.close(held)
                if e.errno in _NO_LOCKS:  # a filesystem without locks: publish's check is all there is
                    return
                raise
            if os.path.samestat(os.fstat(held), os.stat(key)):
                break
            os.close(held)  # the directory was replaced while it was being locked: lock the one there now
        _CLAIMS[key] = held


def release_output(output: str) -> None:
    """End this process's claim on the output, if it has one."""
    if is_remote(output):
        return
    with _CLAIMS_LOCK:
        held = _CLAIMS.pop(os.path.realpath(output), None)
    if held is not None:
        os.close(held)


def _claimed_by_another_process(output: str) -> bool:
    if is_remote(output):
        return False
    key = os.path.realpath(output)
    with _CLAIMS_LOCK:
        if key in _CLAIMS:
            return False
    try:
        probe = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:  # a filesystem without locks
        return False
    finally:
        os.close(probe)  # which also drops the probe's own lock


def check_apart(outputs: Iterable[str | None], inputs: Iterable[str]) -> None:
    """Refuse (UserError) an output that is an input, contains one or lies inside one: a run would read its own
    output back as input (its documents Parquet as XML, its vocab as text), or its publishing and --overwrite
    would replace an input. Paths are compared resolved (absolute, symbolic links followed) or, remote, without
    trailing slashes. A pattern stands for the folder before its first wildcard, unless it names an existing
    local path; an output inside that folder is refused only where the pattern may match it, a folder above it or
    a file below it (`data/documents-*.parquet` leaves `data/records` alone, `data/*` does not). An output of None
    (an optional one not given) is passed over."""
    given = [(pattern, _compared(pattern)) for pattern in inputs]
    for out in (o for o in outputs if o):
        where = _compared(out, pattern=False)[0]
        for pattern, (folder, is_pattern) in given:
            if is_remote(out) != is_remote(pattern):
                continue
            if where == folder:
                relation = f"is the folder of the input {pattern}" if is_pattern else f"is the input {pattern}"
            elif _inside(where, folder) and (not is_pattern or _matched_on_the_way(where, folder, pattern)):
                relation = (
                    f"lies inside {folder}, the folder of the input {pattern}"
                    if is_pattern
                    else f"lies inside the input {pattern}"
                )
            elif _inside(folder, where):
                relation = f"contains the input {pattern}"
            else:
                continue
            raise UserError(f"the output {out} {relation}; write it apart from the inputs")


def _compared(path: str, pattern: bool = True) -> tuple[str, bool]:
    """(the path as check_apart compares it, whether it stood for a pattern's folder)."""
    is_pattern = pattern and has_glob(path) and (is_remote(path) or not os.path.lexists(path))
    if is_pattern:
        path = glob_folder(path) or "."
    if is_remote(path):
        return path.rstrip("/"), is_pattern
    return os.path.realpath(path), is_pattern


def has_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def glob_folder(pattern: str) -> str:
    """The folder part of a pattern before its first wildcard, with its last '/' ("" where there is none)."""
    cut = min((i for i in (pattern.find(c) for c in "*?[") if i >= 0), default=len(pattern))
    return pattern[: pattern.rfind("/", 0, cut) + 1]


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def _matched_on_the_way(where: str, folder: str, pattern: str) -> bool:
    """Whether the pattern, whose fixed folder holds `where`, may match `where`, a folder above it or a file below
    it: its segments match the path's segments as far as both go (a `**` segment matches anything)."""
    segments = pattern[len(glob_folder(pattern) or ".") :].split("/")
    parts = where[len(folder.rstrip("/")) + 1 :].split("/")
    return "**" in segments or all(fnmatch.fnmatchcase(part, segment) for part, segment in zip(parts, segments))


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

    Safe to repeat: a file already moved by an earlier attempt is left as it is. Refuses (OutputExistsError),
    before it moves anything, when a manifest other than this one appeared since the run began: another run
    published there meanwhile (the launch removed any earlier manifest, or refused to start over it).
    """
    if _published_by_another_run(output, manifest):
        _clear_staging(output)
        raise OutputExistsError(
            f"another run published into {output} while this one ran; this run published "
            "nothing (choose another --output, or rerun with --overwrite to replace it)"
        )
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
        stale = [
            m.path
            for pattern in owned_globs
            for result in FileSystems.match([join(output, pattern)])
            for m in result.metadata_list
            if m.path not in keep
        ]
        if stale:
            FileSystems.delete(stale)
    _clear_staging(output)
    write_json_atomically(join(output, MANIFEST), manifest)


def _published_by_another_run(output: str, manifest: dict) -> bool:
    path = join(output, MANIFEST)
    with _output_errors("read", path):
        if not exists(path):
            return False
        with FileSystems.open(path, compression_type="uncompressed") as f:
            published = f.read()
    try:
        return json.loads(published) != json.loads(json.dumps(manifest))  # an earlier attempt's is the same
    except ValueError:
        return True  # not a manifest this run could have written


def discard_staging(output: str) -> None:
    """What a failed or interrupted run leaves: its staging area goes and its claim ends. The staging of a run
    that another process is running (it holds the output: this run was refused) is left alone."""
    if _claimed_by_another_process(output):
        return
    _clear_staging(output)
    release_output(output)


def _clear_staging(output: str) -> None:
    delete_under(join(output, STAGING))


def temporary_name(path: str) -> str:
    """Where write_atomically writes a file before its rename: a fixed name, so that a write killed before the
    rename leaves nothing that the next one does not replace."""
    return f"{path}.tmp"


def write_atomically(path: str, data: bytes) -> None:
    """Write to a temporary name beside path, then rename: readers never see a partial file, and locally never a
    moment without one (os.replace). A write that fails names path, and its temporary file goes: on a full disk it
    would keep the disk full."""
    tmp, created = temporary_name(path), False
    try:
        with _output_errors("write", path):
            _make_local_parent(path)
            with FileSystems.create(tmp) as f:
                created = True  # from here on the temporary file is this write's own, to remove if it fails
                f.write(data)
            if is_remote(path):
                if exists(path):
                    FileSystems.delete([path])
                FileSystems.rename([tmp], [path])
            else:
                os.replace(tmp, path)
    except BaseException:
        if created:
            with contextlib.suppress(*FILESYSTEM_ERRORS):
                if exists(tmp):
                    FileSystems.delete([tmp])
        raise


def write_json_atomically(path: str, payload: dict) -> None:
    write_atomically(path, (json.dumps(payload, indent=1, sort_keys=True) + "\n").encode())


def read_manifest(output: str) -> dict:
    """The manifest of a finished run. Its launcher reads it once the job is done, which ends its claim."""
    release_output(output)
    with FileSystems.open(join(output, MANIFEST)) as f:
        return json.loads(f.read())
