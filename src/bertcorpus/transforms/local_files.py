"""Special files among the paths a user names: a FIFO, a socket or a device can never be read to its end (a FIFO
with no writer waits forever, /dev/zero never ends), so every file argument is checked with special_kind before it
is opened. Told from the path's metadata alone, without opening it; remote paths (gs://...) are never special."""

from __future__ import annotations

import os
import stat

SPECIAL_FILES = {
    stat.S_IFIFO: "named pipe (FIFO)",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def special_kind(path: str) -> str | None:
    """The kind of special file a local path is (following links), or None: a regular file, a folder, a path that
    does not exist or cannot be looked at (the read says why), or a remote path."""
    if "://" in str(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return SPECIAL_FILES.get(stat.S_IFMT(mode), "special file")


def special_file_problem(path: str, what: str, written: bool = False) -> str | None:
    """One line for a special file named as `what` (a flag, "the vocab"), or None when it is not one; `written`:
    named as where an output goes."""
    kind = special_kind(path)
    if kind is None:
        return None
    if written:
        return f"{what} {path} is a {kind}, not a regular file or folder: nothing can be written there; choose another"
    return f"{what} {path} is a {kind}, not a regular file: it cannot be read to its end; name a regular file"
