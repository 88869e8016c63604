"""Which files the input patterns of a command name: files, folders (the files directly in them), patterns, an
extraction's output folder (the documents its manifest lists), locally or on any Beam filesystem; and what was
met but not read (folders inside folders, broken links), named in a note and counted."""

from __future__ import annotations

import bisect
import errno
import fnmatch
import glob
import hashlib
import json
import os
import re
import socket
import stat
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems

from bertcorpus.pipeline.inputs.formats import InputError
from bertcorpus.pipeline.sinks.documents import DOCUMENTS_GLOB
from bertcorpus.pipeline.sinks.output import FILESYSTEM_ERRORS, filesystem_error_cause, glob_folder, has_glob, is_remote
from bertcorpus.transforms.local_files import SPECIAL_FILES
from bertcorpus.transforms.manifest_paths import manifest_paths_problem

# Paths that input discovery meets but does not read, by reason: (one, several, why), for the note and the manifest.
SKIPPED = {
    "folder": ("folder", "folders", "folders are not searched: name one to read the files directly in it"),
    "broken_symlink": ("broken symbolic link", "broken symbolic links", "the file it names does not exist"),
}
_SHOWN = 5  # paths a note names for each reason before it says how many more
REACH_TIMEOUT_S = 10  # how long a first connection to remote storage may take before it is called unreachable


@dataclass
class FoundInputs:
    """Every input file once, with its size from the filesystem's metadata; the names that were dropped because
    they named a file already listed; and the paths met on the way that are not read, with why."""

    files: list[tuple[str, int]] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # a name that was dropped → the path kept for its file
    skipped: dict[str, str] = field(default_factory=dict)  # a path not read → its reason, a key of SKIPPED

    def skipped_counts(self) -> dict[str, int]:
        """The paths left out by reason, every reason named (0 included), as a manifest records them."""
        counts = dict.fromkeys(SKIPPED, 0)
        for reason in self.skipped.values():
            counts[reason] += 1
        return counts

    def note(self) -> str | None:
        """One line for the user when an input file was named more than once or a path was left out, else None."""
        parts = []
        if self.aliases:
            named = ", ".join(f"{alias} (= {kept})" for alias, kept in sorted(self.aliases.items()))
            parts.append(f"{len(self.aliases)} input path(s) name a file already listed and were left out: {named}")
        for reason, (one, several, why) in SKIPPED.items():
            paths = sorted(path for path, r in self.skipped.items() if r == reason)
            if paths:
                more = f", and {len(paths) - _SHOWN:,} more" if len(paths) > _SHOWN else ""
                parts.append(
                    f"left out {len(paths):,} {one if len(paths) == 1 else several} ({why}): "
                    f"{', '.join(paths[:_SHOWN])}{more}"
                )
        return "; ".join(parts) or None

    def print_note(self) -> None:
        """The note, if any, on stderr."""
        if note := self.note():
            print(f"note: {note}", file=sys.stderr)


def find_inputs(patterns: list[str], allow_missing: bool = False) -> FoundInputs:
    """(path, size) of every file the patterns match, local or remote, sorted by path, each file once, and the
    paths met but not read.

    A name that exists is taken as it is, before it is read as a pattern, so that data[1].txt names that file.
    Patterns follow Beam's syntax (`*` and `?` within a name, `**` across folders). Sizes come from the
    filesystem's metadata, for gs://, s3:// and local paths alike, so the same bytes size a job the same way
    wherever they lie. A folder stands for the files directly in it, and so does a remote name that matches no
    object (object stores have no directories); the folders inside it, and broken symbolic links, are left out
    and listed in `skipped`. A local file named by several paths (relative, with '..', through a symlink) is
    listed once, under the first of its absolute paths in sorted order; its name is kept rather than the
    symlink's target, as ids and the input format come from the name.

    Raises InputError, before any output is touched, when a pattern matches no file or cannot be listed, and for
    a path that can never be read to its end: a FIFO, a socket or a device, and a broken symbolic link named
    itself. With allow_missing (a dry run or a graph drawing, which only need the job's shape and must work
    offline) local patterns may match nothing and remote ones are not listed.
    """
    by_identity: dict[object, list[tuple[str, int]]] = {}
    found = FoundInputs()
    if not allow_missing:
        refuse_unreachable([p for p in patterns if is_remote(p)])
    for pattern in patterns:
        if is_remote(pattern) and allow_missing:
            continue
        files, skipped = _match_remote(pattern) if is_remote(pattern) else _match_local(pattern)
        if not files and not allow_missing:
            why = FoundInputs(skipped=skipped).note()
            raise InputError(f"no input files match {pattern!r}" + (f"; {why}" if why else ""))
        for path, size in files:
            by_identity.setdefault(_identity(path), []).append((path, size))
        found.skipped.update(skipped)
    for names in by_identity.values():
        kept = min(names)
        found.files.append(kept)
        found.aliases.update({path: kept[0] for path, _ in names if path != kept[0]})
    found.files.sort()
    # A folder left out by one pattern may be read through another (DIR and DIR/sub/*.txt).
    paths = [path for path, _ in found.files]
    found.skipped = {path: reason for path, reason in found.skipped.items() if not _holds_one_of(path, paths)}
    return found


def storage_endpoint(url: str) -> tuple[str, int] | None:
    """(host, port) that a listing of a gs:// URL first connects to: the proxy that https requests go through where
    one is set, else the Cloud Storage endpoint (STORAGE_EMULATOR_HOST where it names one); None for the other
    schemes, whose clients find their endpoints in their own ways."""
    if not url.startswith("gs://"):
        return None
    endpoint = urllib.parse.urlsplit(os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com")
    if not endpoint.hostname:  # an emulator given as host:port
        endpoint = urllib.parse.urlsplit(f"http://{endpoint.geturl()}")
    proxy = urllib.request.getproxies().get(endpoint.scheme or "https")
    if proxy and not urllib.request.proxy_bypass(endpoint.hostname):
        endpoint = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    return endpoint.hostname, endpoint.port or (443 if endpoint.scheme == "https" else 80)


def refuse_unreachable(urls: list[str]) -> None:
    """InputError, in one line, for remote inputs whose storage cannot be reached: a client that cannot resolve or
    connect retries for two minutes (google-cloud-storage's deadline) before it gives up, so one connection with a
    short timeout is tried first."""
    for host, port in dict.fromkeys(filter(None, map(storage_endpoint, urls))):
        try:
            socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
        except OSError as e:
            url = next(u for u in urls if storage_endpoint(u) == (host, port))
            why = e.strerror or str(e) or type(e).__name__
            raise InputError(f"cannot list {url}: {host}:{port} cannot be reached ({why})") from None


def _holds_one_of(folder: str, sorted_paths: list[str]) -> bool:
    at = bisect.bisect_left(sorted_paths, folder + "/")
    return at < len(sorted_paths) and sorted_paths[at].startswith(folder + "/")


def match_inputs(
    patterns: list[str], allow_missing: bool = False, skipped: dict[str, int] | None = None
) -> list[tuple[str, int]]:
    """find_inputs' files, for a job that matches them again on its workers with Beam's matching (extract-wiki):
    (a pattern that matches exactly that file, size), the file's path with any glob character bracketed
    (data[1].xml → data[[]1].xml). What find_inputs left out is said in a note on stderr, and added to `skipped`
    (by reason, as a manifest's inputs_skipped counts it) where one is given."""
    found = find_inputs(patterns, allow_missing)
    found.print_note()
    if skipped is not None:
        for reason, n in found.skipped_counts().items():
            skipped[reason] = skipped.get(reason, 0) + n
    return [(glob.escape(path), size) for path, size in found.files]


def local_kind(path: str) -> str:
    """What a local path is: "file" (a regular file, or a link to one), "folder" (or a link to one),
    "broken_symlink", or the kind of special file it is (a FIFO, a socket, a device)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if os.path.islink(path) and e.errno != errno.EACCES:  # its target is missing, or a loop of links
            return "broken_symlink"
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return SPECIAL_FILES.get(stat.S_IFMT(mode), "special file")


def refuse_unreadable(path: str, kind: str) -> None:
    """Raise InputError for a path of this kind (local_kind) that cannot be read as a file: reading a FIFO or a
    device would wait for bytes forever, and a broken symbolic link has nothing to read."""
    if kind == "broken_symlink":
        raise InputError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist")
    if kind not in ("file", "folder"):
        raise InputError(f"{path} is a {kind}, not a regular file; inputs are read from regular files only")


def local_glob(pattern: str) -> list[tuple[str, str]]:
    """(path, local_kind) of every local path an absolute pattern matches, sorted: files and other entries, and
    folders where the pattern has no `**` (with `**` folders are searched, except links to folders, which are
    matched like files). `*`, `?` and `[...]` stay within a name, as in a shell; `**` spans folders, as in Beam."""
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    return _walk(glob_folder(pattern)[:-1] or "/", matches, "**" in pattern, pattern.count("/"))


def local_tree(folder: str) -> list[tuple[str, str]]:
    """(path, local_kind) of everything below a local folder, at every depth, sorted; links to folders are
    listed, not searched."""
    return _walk(folder, None, True, 0)


def _walk(base: str, matches, deep: bool, depth: int) -> list[tuple[str, str]]:
    """What local_glob and local_tree list: the entries below base that `matches` (all, for None); with `deep`
    at every depth, else down to `depth` slashes."""

    def refuse(error: OSError):
        if not (isinstance(error, FileNotFoundError) and error.filename == base):  # no base: nothing matches
            raise InputError(f"cannot list {error.filename}: {error.strerror}")

    found = []
    for folder, folders, names in os.walk(base, onerror=refuse):
        for name in folders + names:
            path = os.path.join(folder, name)
            if matches is None or matches(path):
                kind = local_kind(path)
                if kind != "folder" or not deep or os.path.islink(path):
                    found.append((path, kind))
        if not deep:  # only folders above the pattern's depth can hold what it matches
            folders[:] = [name for name in folders if os.path.join(folder, name).count("/") < depth]
    return sorted(found)


def _match_local(pattern: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(files, paths left out → why) of a local name or pattern."""
    path = os.path.abspath(pattern)
    if os.path.lexists(path):
        kind = local_kind(path)
        if kind == "folder":
            return _local_folder(path)
        refuse_unreadable(path, kind)
        return [(path, os.path.getsize(path))], {}
    if not has_glob(path):
        return [], {}
    return _classified(local_glob(path))


def _local_folder(folder: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    try:
        with os.scandir(folder) as entries:
            paths = sorted(entry.path for entry in entries)
    except OSError as e:
        raise InputError(f"cannot list {folder}: {e.strerror}") from None
    return _folder_files(folder, *_classified((path, local_kind(path)) for path in paths))


def _classified(entries) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(path, local_kind) → (files with sizes, the folders and broken links to leave out); a special file is
    refused."""
    files, skipped = [], {}
    for path, kind in entries:
        if kind == "file":
            files.append((path, os.path.getsize(path)))
        elif kind in SKIPPED:
            skipped[path] = kind
        else:
            refuse_unreadable(path, kind)
    return files, skipped


def _match_remote(pattern: str) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """(files, paths left out → why) of a remote name or pattern; an object's name is taken as it is first."""
    if has_glob(pattern):
        return remote_matches(pattern), {}
    files = [] if pattern.endswith("/") else _listed(pattern)
    if files:
        return files, {}
    folder = pattern.rstrip("/")
    direct, below = [], {}
    for path, size in _listed(glob.escape(folder) + "/**"):
        inside = path[len(folder) + 1 :]
        if "/" in inside:
            below[f"{folder}/{inside.split('/')[0]}"] = "folder"
        else:
            direct.append((path, size))
    return _folder_files(folder, direct, below)


def remote_file(path: str) -> tuple[str, int] | None:
    """(path, size) of the object named exactly path, glob characters and all, or None when there is none."""
    try:
        if not FileSystems.exists(path):
            return None
        return path, FileSystems.get_filesystem(path).metadata(path).size_in_bytes
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot list {path}: {filesystem_error_cause(e)}") from None


def remote_matches(pattern: str, lister=None) -> list[tuple[str, int]]:
    """(path, size) of what a remote name or pattern stands for: the object of exactly that name where its name has
    glob characters and there is one, else the pattern's matches (`lister`, by default _listed)."""
    literal = remote_file(pattern) if has_glob(pattern) else None
    return [literal] if literal else (lister or _listed)(pattern)


def _folder_files(
    folder: str, files: list[tuple[str, int]], skipped: dict[str, str]
) -> tuple[list[tuple[str, int]], dict[str, str]]:
    """What a folder named as input stands for, given the files directly in it and what was left out there: where
    it is an extraction's output, the documents its manifest lists (not the errors, the manifest, or anything else
    there); else every file, and what was left out."""
    sizes = dict(files)
    manifest = FileSystems.join(folder, "manifest.json")
    documents = _documents_listed_in(manifest) if manifest in sizes else None
    if documents is None:
        if manifest not in sizes and any(
            fnmatch.fnmatchcase(FileSystems.split(path)[1], DOCUMENTS_GLOB) for path in sizes
        ):
            raise InputError(
                f"{folder} holds documents files but no manifest.json, so the extraction that wrote "
                f"them did not finish: rerun it, or name the files to read them as they are"
            )
        return files, skipped
    listed = []
    for entry in documents:
        path = FileSystems.join(folder, entry["path"])
        if path not in sizes:
            raise InputError(f"{manifest} lists {entry['path']}, which is not in {folder}")
        if sizes[path] != entry["bytes"]:
            raise InputError(
                f"{path} has {sizes[path]:,} bytes, not the {entry['bytes']:,} that {manifest} "
                f"lists: it changed after the extraction wrote it"
            )
        listed.append((path, sizes[path]))
    return listed, {}


def _documents_listed_in(manifest: str) -> list[dict] | None:
    """The documents files (path relative to the folder, bytes) in an extraction's manifest; None for a file
    named manifest.json that is not one."""
    try:
        with FileSystems.open(manifest, compression_type="uncompressed") as f:
            content = json.load(f)
        documents = content["outputs"]["documents"] if content.get("tool") == "bertcorpus" else None
        if not isinstance(documents, list):
            return None
        listed = [{"path": d["path"], "bytes": int(d["bytes"])} for d in documents]
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot read {manifest}: {filesystem_error_cause(e)}") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if problem := manifest_paths_problem(content):
        raise InputError(f"{manifest} is not a manifest bertcorpus reads: {problem}")
    return listed


def input_runs(patterns: list[str]) -> list[dict]:
    """The runs that wrote the documents folders among the input patterns (a folder, or the folder of a pattern or
    file, that holds a documents manifest): {"input", "job", "manifest": its path, "sha256"}, and for a dedup output
    the run it belongs to and the source it is ({"dedup": {"run", "source", "priority"}}). What a job records of
    its inputs' own lineage; a folder that cannot be read is passed over."""
    runs = []
    for pattern in patterns:
        folder = _folder_of(pattern)
        manifest = FileSystems.join(folder or ".", "manifest.json")
        try:
            with FileSystems.open(manifest, compression_type="uncompressed") as f:
                raw = f.read()
            content = json.loads(raw)
        except (*FILESYSTEM_ERRORS, ValueError):
            continue
        outputs = content.get("outputs") if isinstance(content, dict) else None
        if not isinstance(outputs, dict) or "documents" not in outputs or content.get("tool") != "bertcorpus":
            continue
        run = {
            "input": pattern,
            "job": content.get("job"),
            "manifest": manifest,
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
        dedup = content.get("dedup")
        if content.get("job") == "dedup" and isinstance(dedup, dict):
            source = content.get("config", {}).get("source", {})
            run["dedup"] = {
                "run": FileSystems.join(os.path.dirname(folder), str(dedup.get("run")).removeprefix("../")),
                "source": source.get("name"),
                "priority": dedup.get("priority"),
            }
        runs.append(run)
    return runs


def _folder_of(pattern: str) -> str:
    """The folder an input pattern names, or lies in."""
    if has_glob(pattern):
        return glob_folder(pattern).rstrip("/")
    is_folder = not os.path.splitext(pattern.rstrip("/"))[1] if is_remote(pattern) else os.path.isdir(pattern)
    return pattern.rstrip("/") if is_folder else os.path.dirname(pattern)


def _listed(pattern: str) -> list[tuple[str, int]]:
    try:
        metadata = FileSystems.match([pattern])[0].metadata_list
    except FILESYSTEM_ERRORS as e:
        raise InputError(f"cannot list {pattern}: {filesystem_error_cause(e)}") from None
    return [(m.path, m.size_in_bytes) for m in metadata if not m.path.endswith("/")]


def _identity(path: str) -> object:
    """What tells files apart: a local file's device and inode (one file under several names), else the path."""
    if is_remote(path):
        return path
    status = os.stat(path)
    return status.st_dev, status.st_ino
