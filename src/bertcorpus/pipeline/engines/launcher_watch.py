"""Worker processes of a local run exit within a second of their launcher's death.

In --direct_running_mode multi_processing, Beam starts each SDK worker as a child of the launcher (through a shell).
When the launcher is killed outright (SIGKILL, the kernel's out-of-memory killer), nothing tells its workers: they
wait on the launcher's gRPC channel for many minutes, each holding its memory. So the launcher puts its process id
in the environment its workers inherit (mark_launcher), and the first of our DoFns set up in a worker process starts
a daemon thread there that ends the process as soon as the launcher is no longer its parent or grandparent.

Nothing of Beam is changed: the watch lives in our DoFns' setup (WatchedDoFn), and where the launcher is not an
ancestor of the worker (Dataflow, Flink, a worker pool, a run in one process) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import time

import apache_beam as beam

LAUNCHER_ENV = "BERTCORPUS_LAUNCHER_PID"
THREAD_NAME = "launcher-watch"  # also the thread's name in the kernel (Linux), as `ps -T` shows it
POLL_SECONDS = 0.5
_started = False
_lock = threading.Lock()


def mark_launcher() -> None:
    """Called by a process about to run a pipeline locally: the workers it starts inherit its id."""
    os.environ[LAUNCHER_ENV] = str(os.getpid())


def parent_of(pid: int) -> int | None:
    """The parent of a process, from /proc (Linux); None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def launcher_is_ancestor(launcher: int) -> bool:
    """Whether the launcher is this process's parent, or its parent's parent (Beam starts workers through a shell)."""
    parent = os.getppid()
    return parent == launcher or parent_of(parent) == launcher


def watch_launcher() -> None:
    """In a worker process of a local run, once: a daemon thread that ends the process when the launcher goes."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    try:
        launcher = int(os.environ.get(LAUNCHER_ENV, ""))
    except ValueError:
        return
    if launcher == os.getpid() or not launcher_is_ancestor(launcher):
        return
    threading.Thread(target=_watch, args=(launcher,), name=THREAD_NAME, daemon=True).start()


def _watch(launcher: int) -> None:
    _name_this_thread(THREAD_NAME)
    while launcher_is_ancestor(launcher):
        time.sleep(POLL_SECONDS)
    print(f"bertcorpus: the run's launcher (process {launcher}) is gone; worker {os.getpid()} exits", file=sys.stderr)
    os._exit(1)  # nothing is left to report to: Beam's own shutdown would wait on the dead channel


def _name_this_thread(name: str) -> None:
    """Give the calling thread its name in the kernel too (Linux), where `ps -T` and /proc show it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


class WatchedDoFn(beam.DoFn):
    """A DoFn whose setup starts the watch on the launcher in its worker process (watch_launcher); a subclass with a
    setup of its own calls super().setup()."""

    def setup(self):
        watch_launcher()
