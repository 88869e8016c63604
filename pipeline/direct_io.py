"""Writing a local file past the page cache (Linux O_DIRECT), for output files a job does not read again.

A buffered write copies every byte into page-cache pages that the kernel has to find first. On the virtual
machines this project runs on, a page the guest has not used lately costs a fault in the host as well, so
writing 450 MB of shards took 0.7 CPU-s buffered against 0.1 CPU-s direct, and two worker processes writing at
once slowed each other further. Direct I/O sends the bytes from a reused, page-aligned buffer to the disk.

Direct I/O wants the buffer, the file offset and the length aligned to the device's block. The buffer comes from
mmap (page-aligned) and is written in whole ALIGNMENT blocks; the last partial block goes through the page cache.
Where the filesystem refuses direct I/O (tmpfs, some network filesystems), the file is written the usual way.
"""
from __future__ import annotations

import errno
import fcntl
import mmap
import os
from typing import Iterable

ALIGNMENT = 4096        # a multiple of every common logical block size (512 B and 4 KiB)
BUFFER_BYTES = 8 << 20  # bytes gathered per direct write


def write_file(path: str, chunks: Iterable[bytes]) -> bool:
    """Write the chunks to path (created or truncated) past the page cache. Returns False, having consumed no
    chunk, where the file cannot be opened for direct I/O; the caller then writes it the usual way."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flag, 0o666)
    except OSError as e:
        if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise
    buffer = _spare_buffer() or mmap.mmap(-1, BUFFER_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = memoryview(buffer)
    try:
        writer = _Writer(fd)
        filled = 0
        for chunk in chunks:
            data = memoryview(chunk).cast("B")
            while len(data):
                take = min(len(data), BUFFER_BYTES - filled)
                view[filled:filled + take] = data[:take]
                filled += take
                data = data[take:]
                if filled == BUFFER_BYTES:
                    writer.write(view)
                    filled = 0
        whole = filled - filled % ALIGNMENT
        writer.write(view[:whole])
        writer.buffered()
        writer.write(view[whole:filled])
    finally:
        view.release()
        _SPARE_BUFFERS.append((os.getpid(), buffer))
        os.close(fd)
    return True


# Buffers of finished writes, kept for the next: a fresh buffer is 8 MB of pages to fault in (in the host too, on
# a virtual machine) for every file. A write in progress holds its own, so threads writing at once never share
# one; and a process forked from this one (a local runner's worker) makes its own rather than write into pages it
# shares with its siblings until it copies them.
_SPARE_BUFFERS: list[tuple[int, mmap.mmap]] = []


def _spare_buffer() -> mmap.mmap | None:
    while _SPARE_BUFFERS:
        owner, buffer = _SPARE_BUFFERS.pop()
        if owner == os.getpid():
            return buffer
    return None


class _Writer:
    """Writes to fd, direct while the filesystem takes it, buffered from the first refusal on."""

    def __init__(self, fd: int):
        self.fd = fd
        self.direct = True

    def buffered(self) -> None:
        if self.direct:
            fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~os.O_DIRECT)
            self.direct = False

    def write(self, data: memoryview) -> None:
        while len(data):
            try:
                written = os.write(self.fd, data)
            except OSError as e:
                # A filesystem that opens files for direct I/O but refuses the writes, or a block size larger
                # than ALIGNMENT: nothing was written, so the same bytes go again through the page cache.
                if e.errno != errno.EINVAL or not self.direct:
                    raise
                self.buffered()
                continue
            data = data[written:]
