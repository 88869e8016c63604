"""The files a manifest lists as its own, named relative to the folder it lies in. Every reader of a manifest (create,
dedup, vocab and plan through input discovery, stats, inspect and the loader) checks them here before it opens
anything: a path that could name a file outside the folder (an absolute path, a drive, a URL, a `..` part) makes
the manifest one that is not read, so that a manifest someone else wrote cannot make a reader open, and quote,
files it does not describe.

The paths are a manifest's outputs (documents, errors, shards, the sources of a dedup run) and the copies of a vocab
or tokenizer it holds; what it records of its inputs (the files a job read, the vocab it was given) names files
elsewhere on purpose, and is checked against their sha256 where it is used. The check is of the path's words, the
same for a local folder and a remote prefix; a symbolic link inside a local folder is the folder's own content and
is followed as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A drive (C:), a root or UNC path, or a URL scheme: the start of a path that is relative to no folder.
_NOT_RELATIVE = re.compile(r"^(?:[A-Za-z]:|[/\\]|[A-Za-z][A-Za-z0-9+.-]*://)")
_PATH_KEYS = ("path", "manifest")  # the keys under which an output names a file
_COPIES = ("vocab", "tokenizer")  # the entries whose "copy" is a file of the output


def listed_path_problem(path) -> str | None:
    """Why a path a manifest lists cannot name a file inside the manifest's folder, or None where it can."""
    if not isinstance(path, str) or not path:
        return "is not a path"
    if "\x00" in path:
        return "holds a NUL character"
    if _NOT_RELATIVE.match(path):
        return "is not relative to its folder"
    if ".." in re.split(r"[/\\]", path):
        return "leads out of its folder"
    return None


def listed_paths(manifest: dict) -> Iterator:
    """Every path a manifest lists as a file of its own folder, as it is written there."""
    for key in _COPIES:
        entry = manifest.get(key)
        if isinstance(entry, dict) and "copy" in entry:
            yield entry["copy"]
    yield from _paths_in(manifest.get("outputs"))


def _paths_in(value) -> Iterator:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _PATH_KEYS and not isinstance(item, (dict, list)):
                yield item
            else:
                yield from _paths_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _paths_in(item)


def manifest_paths_problem(manifest) -> str | None:
    """Why a manifest is not to be read for the files it lists (the first of them that could lie outside its
    folder), or None where every one lies inside."""
    if not isinstance(manifest, dict):
        return None
    for path in listed_paths(manifest):
        if problem := listed_path_problem(path):
            shown = path if isinstance(path, str) and path else repr(path)
            return f"it lists {shown}, which {problem}"
    return None
