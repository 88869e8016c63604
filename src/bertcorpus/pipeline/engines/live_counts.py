"""The counts of a local run while it runs, gathered from every process that works on it, for its progress line.

Beam's local runner (its FnApiRunner) hands a job's metrics back only with a finished bundle, and it runs each
stage as one bundle per worker: the counters of a stage that takes an hour come back after the hour. So every count
a job makes through pipeline/tally.py (the same numbers its Beam counters get) is also added up here, in the process
that made it, and each process writes its totals now and then to a file of its own in a directory that the launcher
names in an environment variable, which worker processes inherit. The launcher sums the files (`LiveCounts`).
Where the variable is not set (a remote runner's workers, a TestPipeline) nothing is kept. No output depends on any
of it: the counts that outputs and manifests state travel as data (pipeline/tally.py).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter

ENV = "BERTCORPUS_LIVE_COUNTS"
WRITE_EVERY = 1.0  # seconds between a process's writes of its totals

_lock = threading.Lock()
_writing = threading.Lock()
_totals: Counter = Counter()
_directory: str | None = None  # the run the totals belong to
_changed = False
_writer: threading.Thread | None = None
_name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}.json"  # this process's file: a later process may reuse its pid


def add(namespace: str, counts: dict[str, int]) -> None:
    """Add counts made in this process to the totals of the run under way (none outside a local run)."""
    global _changed, _directory, _totals
    directory = os.environ.get(ENV)
    if not directory:
        return
    with _lock:
        if directory != _directory:  # a new run of the same process: the launcher runs in_memory jobs itself
            _directory, _totals = directory, Counter()
        for name, value in counts.items():
            if value:
                _totals[f"{namespace}/{name}"] += value
        _changed = True
    _start_writer()


def _start_writer() -> None:
    global _writer
    if _writer is None:
        with _lock:
            if _writer is None:
                _writer = threading.Thread(target=_write_now_and_then, name="bertcorpus live counts", daemon=True)
                _writer.start()
                atexit.register(_write)  # what came since the last write, from a process that ends


def _write_now_and_then() -> None:
    while True:
        time.sleep(WRITE_EVERY)
        _write()


def _write() -> None:
    """This process's totals into its file, if they changed since it was last written."""
    global _changed
    with _writing:  # the writer thread, or the exit of the process
        with _lock:
            if not _changed:
                return
            directory, totals, _changed = _directory, dict(_totals), False
        path = os.path.join(directory, _name)
        try:
            with open(f"{path}.partial", "w") as f:
                json.dump(totals, f)
            os.replace(f"{path}.partial", path)  # a reader sees the old totals or the new, never half
        except OSError:
            pass  # the run ended and its directory went, or its disk is full: the counts are for show only


class LiveCounts:
    """The launcher's side, for one run: `directory` (the run's own, else a temporary one removed at the end) is
    named in ENV while the run lasts, and `totals()` sums what the run's processes wrote there so far,
    {"namespace/name": n}."""

    def __init__(self, directory: str | None = None):
        self.directory, self._temporary = directory, directory is None

    def __enter__(self) -> LiveCounts:
        if self._temporary:
            self.directory = tempfile.mkdtemp(prefix="bertcorpus-counts-")
        os.makedirs(self.directory, exist_ok=True)
        self._previous = os.environ.get(ENV)
        os.environ[ENV] = self.directory
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = self._previous
        if self._temporary:
            shutil.rmtree(self.directory, ignore_errors=True)

    def totals(self) -> Counter:
        totals: Counter = Counter()
        try:
            entries = [entry.path for entry in os.scandir(self.directory) if entry.name.endswith(".json")]
        except OSError:
            return totals
        for path in entries:
            try:
                with open(path) as f:
                    totals.update(json.load(f))
            except (OSError, ValueError):
                continue  # replaced or removed as it was read: the next look finds it
        return totals
