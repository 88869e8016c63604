"""A GroupByKey for the values that carry most of a job's bytes, and how a run on this machine does it.

Beam's local runner (its FnApiRunner) relays every shuffled byte through the launching process: it receives
each worker's output, holds all of it until the stage ends, then re-encodes it and sends each worker its share,
one large message each, into freshly allocated memory at every step. For `create`'s instance pieces that is most
of a local run's bytes, most of its peak memory, and a stretch of the run that no number of workers shortens.

So a local run spills those values to files on this machine, encoded by their own coders, and shuffles only
their places (file, offset, size); every other runner groups them with its own shuffle. The choice is made in one place,
`runners.local_shuffle`, through Beam's public PTransformOverride. The files live in a directory of the run's own
under $TMPDIR, which goes when the run ends, or at the next local run if this one was killed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import shutil
import tempfile
import uuid

import apache_beam as beam
from apache_beam import typehints

from bertcorpus.pipeline.engines.launcher_watch import WatchedDoFn

SPILL_PREFIX = "bertcorpus-shuffle-"


class GroupLargeValues(beam.PTransform):
    """(key, value) → (key, [values]) in no particular order: a GroupByKey. A local run replaces it with
    `SpilledGroupByKey` (runners.local_shuffle)."""

    def expand(self, pcoll):
        return pcoll | "group" >> beam.GroupByKey()


class SpilledGroupByKey(beam.PTransform):
    """GroupLargeValues for workers that share `directory`: the values go through files there, encoded by the coder
    that Beam would shuffle them with (the one registered for their type)."""

    def __init__(self, directory: str):
        super().__init__()
        self.directory = directory

    def expand(self, pcoll):
        key_type, value_type = typehints.typehints.coerce_to_kv_type(pcoll.element_type).tuple_types
        coder = beam.coders.registry.get_coder(value_type)
        # (key, value) → (key, (file, offset, size)) → (key, [places]) → (key, [values])
        return (
            pcoll
            | "spill values"
            >> beam.ParDo(SpillValues(self.directory, coder)).with_output_types(
                typehints.Tuple[key_type, typehints.Tuple[str, int, int]]
            )
            | "group places" >> beam.GroupByKey()
            | "read spilled values"
            >> beam.Map(read_spilled, coder).with_output_types(
                typehints.Tuple[key_type, typehints.Iterable[value_type]]
            )
        )


class SpillValues(WatchedDoFn):
    """(key, value) → (key, (file, offset, size)); each bundle appends to a file of its own, which is closed, and
    so complete, before the bundle ends and before any step after the grouping reads it."""

    def __init__(self, directory: str, coder: beam.coders.Coder):
        self.directory = directory
        self.coder = coder
        self._file = None

    def start_bundle(self):
        self.teardown()  # a file that a failed bundle left open

    def process(self, element):
        key, value = element
        data = self.coder.encode(value)
        path = self._file.name if self._file else os.path.join(self.directory, f"{uuid.uuid4().hex}.spill")
        try:
            if self._file is None:
                self._file = open(path, "wb")
            offset = self._file.tell()
            self._file.write(data)
        except OSError as e:
            raise _spill_error(e, path) from e
        yield key, (path, offset, len(data))

    def finish_bundle(self):
        self.teardown()

    def teardown(self):
        # Closing writes what is still buffered: on a full disk that fails too, and must say where and what to do.
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError as e:
                raise _spill_error(e, file.name) from e


def _spill_error(error: OSError, path: str) -> OSError:
    # No colon in the text: a worker's error reaches the launcher as text, cut at the first colon after the cause.
    folder = os.path.dirname(os.path.dirname(path)) or "."
    return OSError(
        error.errno,
        f"{error.strerror} (a run on this machine keeps what it shuffles in spill files under {folder}, "
        f"its TMPDIR; point TMPDIR at a disk with room)",
        path,
    )


def read_spilled(element, coder: beam.coders.Coder):
    """(key, [(file, offset, size)]) → (key, [values]), read file by file in order of offset."""
    key, places = element
    values, opened = [], {}
    try:
        for path, offset, size in sorted(places):
            if path not in opened:
                opened[path] = os.open(path, os.O_RDONLY)
            data = os.pread(opened[path], size, offset)
            if len(data) != size:
                raise OSError(
                    errno.EIO,
                    f"spill file ends before byte {offset + size}: was it deleted or truncated while the job ran?",
                    path,
                )
            values.append(coder.decode(data))
    finally:
        for fd in opened.values():
            os.close(fd)
    return key, values


@contextlib.contextmanager
def spill_directory():
    """A directory for one run's spill files under $TMPDIR, removed when the run ends however it ends. The run
    locks it from before it takes its name until the run ends, so that a later run can tell the directories of
    runs that were killed (SIGKILL, out of memory) from those of runs still going, and remove them."""
    parent = tempfile.gettempdir()
    remove_abandoned(parent)
    starting = tempfile.mkdtemp(prefix=f".{SPILL_PREFIX}", dir=parent)
    lock = os.open(os.path.join(starting, ".lock"), os.O_CREAT | os.O_RDWR, 0o600)
    directory = os.path.join(parent, os.path.basename(starting)[1:])
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.rename(starting, directory)
        yield directory
    finally:
        os.close(lock)
        for path in (starting, directory):
            shutil.rmtree(path, ignore_errors=True)


def remove_abandoned(parent: str) -> None:
    """Remove the spill directories under `parent` whose runs no longer hold their lock."""
    for path in glob.glob(os.path.join(glob.escape(parent), f"{SPILL_PREFIX}*")):
        try:
            lock = os.open(os.path.join(path, ".lock"), os.O_RDWR)
        except OSError:
            continue  # gone already, or not ours to remove
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its run is still going
        finally:
            os.close(lock)
        shutil.rmtree(path, ignore_errors=True)
