"""Files of the trainer and the loader, local or remote: plain files locally, Beam's FileSystems for gs:// and the
other remote schemes. Only remote paths pay for importing Beam."""

from __future__ import annotations

import contextlib
import os

from bertcorpus.transforms.local_files import special_kind


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts]) if is_remote(base) else os.path.join(base, *parts)


def _filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def open_binary(path: str):
    """A binary file object for reading, the bytes as stored (no decompression by the file's suffix); a local FIFO,
    socket or device, which would never be read to its end, is an OSError instead."""
    if not is_remote(path):
        if kind := special_kind(path):
            raise OSError(f"{path} is a {kind}, not a regular file")
        return open(path, "rb")
    return _filesystems().open(path, compression_type="uncompressed")


def read_bytes(path: str) -> bytes:
    with open_binary(path) as f:
        return f.read()


def read_text(path: str) -> str:
    return read_bytes(path).decode("utf-8")


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file; locally its folders are made first (a remote store has none to make)."""
    if is_remote(path):
        with _filesystems().create(path, compression_type="uncompressed") as f:
            f.write(data)
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def open_output(path: str):
    """A binary file to write, in place only once it is whole: locally a temporary name beside it, renamed at the end
    (removed if the writing fails); remotely the object store's own upload, which publishes on close."""
    if is_remote(path):
        with _filesystems().create(path, compression_type="uncompressed") as f:
            yield f
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    partial = f"{path}.partial-{os.getpid()}"
    try:
        with open(partial, "wb") as f:
            yield f
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def write_text(path: str, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def exists(path: str) -> bool:
    return _filesystems().exists(path) if is_remote(path) else os.path.exists(path)


def match(pattern: str) -> list[str]:
    """The remote paths that a pattern matches."""
    return [m.path for m in _filesystems().match([pattern])[0].metadata_list]


def delete(paths: list[str]) -> None:
    """Remove remote objects."""
    if paths:
        _filesystems().delete(paths)


def file_sizes(directory: str) -> dict[str, int]:
    """{name: bytes} of the files directly in a directory (for a remote path: the objects under its prefix), in
    name order, from one listing."""
    if not is_remote(directory):
        if not os.path.isdir(directory):
            return {}
        with os.scandir(directory) as entries:
            return {e.name: e.stat().st_size for e in sorted(entries, key=lambda e: e.name) if e.is_file()}
    prefix = directory.rstrip("/") + "/"
    found = _filesystems().match([prefix + "*"])[0].metadata_list
    return {
        m.path[len(prefix) :]: m.size_in_bytes
        for m in sorted(found, key=lambda m: m.path)
        if "/" not in m.path[len(prefix) :]
    }
