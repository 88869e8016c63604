"""The process's standard streams made safe for the `bertcorpus` command: descriptors that came closed are opened on
/dev/null, text the encoding lacks is escaped, and a failed write is noted and reported once at the end instead of
stopping the run (entry_point in commands.py; docs/command_line.md)."""

from __future__ import annotations

import errno
import io
import os
import sys


class _StandardStream(io.RawIOBase):
    """File descriptor 1 or 2 under sys.stdout or sys.stderr. A write that fails (a reader that went away, a full
    disk, a descriptor closed before the command started) is noted and the rest of the output dropped, not raised:
    raised, it would stop a run in the middle, before it publishes its files, for the sake of its report."""

    def __init__(self, fd: int, closed_at_start: bool):
        super().__init__()
        self.fd, self.closed_at_start = fd, closed_at_start
        self.error: OSError | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return self.error is None and os.isatty(self.fd)

    def write(self, data) -> int:
        if self.error is None and self.closed_at_start:  # (its descriptor now holds /dev/null)
            self.error = OSError(errno.EBADF, os.strerror(errno.EBADF))
        if self.error is None:
            try:
                return os.write(self.fd, data)
            except OSError as e:
                self.error = e
        return len(data)


class StandardStreams:
    """The process's standard streams made safe for a command (entry_point only; tests call main in-process).

    Descriptors 0-2 that were closed are opened on /dev/null, so that no file the run opens takes their number (a
    report printed into a shard) and worker processes inherit valid ones. sys.stdout and sys.stderr escape what
    their encoding lacks instead of failing on it (a token under PYTHONIOENCODING=latin-1, a file name under the C
    locale), and note a failed write instead of raising it (_StandardStream); `finish` reports it. Both are written
    line by line, so that where they go to one file or pipe (`2>&1 | tee log`) their lines stay in the order they
    were printed."""

    def __init__(self):
        closed = [fd for fd in (0, 1, 2) if not _is_open(fd)]
        for fd in closed:
            _open_devnull_at(fd)
        self.stdout = _StandardStream(1, 1 in closed)
        sys.stdout = _text_stream(self.stdout, sys.stdout)
        sys.stderr = _text_stream(_StandardStream(2, 2 in closed), sys.stderr)

    def finish(self, command: str | None, status: int) -> int:
        """The exit status once the output is flushed. A reader that stopped reading (`| head`) took what it wanted:
        the command ends quietly, its status unchanged. Any other failed write to standard output (a full disk, a
        closed descriptor) turns success into one line naming standard output, and status 2."""
        sys.stdout.flush()
        error = self.stdout.error
        if status != 0 or error is None or error.errno == errno.EPIPE:
            return status
        who = f"bertcorpus {command}" if command else "bertcorpus"
        print(f"{who}: error: cannot write to standard output: {error.strerror}", file=sys.stderr, flush=True)
        return 2


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _open_devnull_at(fd: int) -> None:
    opened = os.open(os.devnull, os.O_RDWR)
    if opened != fd:
        os.dup2(opened, fd)
        os.close(opened)


def _text_stream(raw: _StandardStream, previous) -> io.TextIOWrapper:
    """A text stream over raw that keeps the previous one's encoding, is flushed at every line end, and escapes what
    the encoding cannot write (backslashreplace) rather than failing."""
    if previous is None:  # the descriptor was closed: what is written is dropped
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace")
    previous.flush()
    return io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=previous.encoding,
        errors="backslashreplace",
        line_buffering=True,
        write_through=previous.write_through,
    )
