"""SDK worker processes forked from the launcher, for local multi-process runs.

Beam's local runner starts each worker process as `python -m apache_beam.runners.worker.sdk_worker_main`: a fresh
interpreter that imports Beam and the job's modules again, about a second and 1.1–1.8 CPU-s per worker, on every
run. By the time a job runs, the launcher has imported all of that already. So, just before the runner starts its
gRPC servers (a process that has started gRPC must not fork), the launcher forks one process per worker; each
waits on a Unix socket. The runner's worker command becomes a small client, started with `python -I -S` (no site
packages, a few milliseconds), that hands a waiting process the environment Beam gives a worker (its control and
logging endpoints, options and id among it) and then waits for its exit status. The forked process runs Beam's own
SDK harness, so the worker is the same; only its start is cheaper.

The pool is used only where forking is safe: on Linux, with no other Python thread running, and in a process that
has not run a job whose workers talk gRPC to it (a test process that already ran a multi-process job starts its
workers the usual way). The native threads of numpy's and pyarrow's libraries are fork-safe. A client that finds no
waiting process (refused, or reset when the last one is taken) starts the usual worker itself.
"""
from __future__ import annotations

import gc
import json
import logging
import os
import select
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

REAP_SECONDS = 30  # how long the end of a run waits for its forked processes before it stops them

# The worker command's code. It runs under `python -I -S`, so it uses the standard library only. It falls back to
# Beam's usual worker only when no forked process has taken it: the connection was refused or reset before "ok".
_CLIENT = """
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
answer = b""
try:
    s.connect(sys.argv[1])
    s.sendall(json.dumps(dict(os.environ)).encode() + b"\\n")
    while len(answer) < 3:
        part = s.recv(3 - len(answer))
        if not part:
            break
        answer += part
except OSError:
    pass
if answer != b"ok\\n":
    s.close()
    os.execv(sys.executable, [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"])
status = b""
while True:
    part = s.recv(16)
    if not part:
        break
    status += part
sys.exit(int(status) if status.strip().isdigit() else 1)
"""

_grpc_started = False  # set once this process has run a job whose workers talk gRPC to it


def note_grpc_started() -> None:
    global _grpc_started
    _grpc_started = True


def can_fork() -> bool:
    # Linux only: on macOS a forked process may crash in system libraries, which is why Python spawns there.
    return sys.platform.startswith("linux") and not _grpc_started and threading.active_count() == 1


class ForkedWorkers:
    """`count` forked processes waiting to become SDK workers; `command` is the worker command that takes one.

    Use as a context manager around the run: leaving it ends the processes no worker took and reaps them all."""

    def __init__(self, count: int):
        """Raises OSError (and leaves nothing behind) where the socket or a process cannot be made."""
        self.pids: list[int] = []
        self.directory = tempfile.mkdtemp(prefix="bertcorpus-workers-")
        self.alive = -1
        try:
            self.address = os.path.join(self.directory, "socket")
            alive_read, self.alive = os.pipe()  # closed by the launcher when the run ends: idle processes then exit
            try:
                self._fork(count, alive_read)
            finally:
                os.close(alive_read)
        except BaseException:
            self.__exit__()
            raise
        self.command = " ".join(shlex.quote(part) for part in (sys.executable, "-I", "-S", "-c", _CLIENT,
                                                                 self.address))

    def _fork(self, count: int, alive_read: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()  # the launcher's objects stay out of the children's collections, so their pages stay shared
        # An interrupt between a fork and noting its pid would lose the process: hold interrupts back meanwhile.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            with socket.socket(socket.AF_UNIX) as listener:
                listener.bind(self.address)
                listener.listen(count)
                for _ in range(count):
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - the forked process never leaves this branch
                        try:
                            launcher_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)  # idle: ended by EOF
                            signal.pthread_sigmask(signal.SIG_SETMASK, held)
                            os.close(self.alive)
                            _serve(listener, alive_read, launcher_sigint)
                        finally:
                            os._exit(1)
                    self.pids.append(pid)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            gc.unfreeze()

    def __enter__(self) -> "ForkedWorkers":
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.alive >= 0:
                os.close(self.alive)
                self.alive = -1
            _reap(self.pids)
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)


def _reap(pids: list[int]) -> None:
    """Wait for the processes to end, REAP_SECONDS at most; then stop them (TERM, then KILL) and wait again."""
    waiting, deadline = set(pids), time.monotonic() + REAP_SECONDS
    pause = 0.001  # processes that are already ending are seen within a millisecond or two; others less often
    for stop in (None, signal.SIGTERM, signal.SIGKILL):
        if stop is not None:
            for pid in waiting:
                logging.getLogger(__name__).warning("stopping forked worker process %d (%s)", pid, stop.name)
                try:
                    os.kill(pid, stop)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 5
        while waiting and time.monotonic() < deadline:
            for pid in list(waiting):
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere
                    done, status = pid, 0
                if done:
                    waiting.discard(pid)
                    if status:
                        logging.getLogger(__name__).warning("forked worker process %d ended with status %d", pid,
                                                            os.waitstatus_to_exitcode(status))
            if waiting:
                time.sleep(pause)
                pause = min(2 * pause, 0.02)
        if not waiting:
            return


def _serve(listener: socket.socket, alive: int, sigint) -> None:
    """In a forked process: take one worker command's connection, run the SDK harness with the environment it
    handed over (and interrupts handled as `sigint`, as in the launcher), send back the exit status; return at
    once if the launcher ends the run first."""
    connection, status = None, 1
    try:
        listener.setblocking(False)
        while connection is None:
            ready, _, _ = select.select([listener, alive], [], [])
            if alive in ready:
                status = 0
                return
            try:
                connection, _ = listener.accept()
            except BlockingIOError:  # another forked process took it
                continue
        listener.close()
        connection.setblocking(True)
        with connection.makefile("rb") as handed:
            environment = json.loads(handed.readline())
        connection.sendall(b"ok\n")
        signal.signal(signal.SIGINT, sigint)
        os.environ.clear()
        os.environ.update(environment)
        # The launcher's log handlers would print the worker's messages; Beam sends them to the runner instead.
        logging.getLogger().handlers.clear()
        sys.argv = sys.argv[:1]
        from apache_beam.runners.worker import sdk_worker_main

        sdk_worker_main.main([])
        status = 0
    except BaseException:  # noqa: BLE001 — whatever happens, this process ends in its caller, with a status
        try:
            import traceback

            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        try:
            if connection is not None:
                connection.sendall(str(status).encode())
                connection.close()
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001 — the client is gone, or the output is
            pass
        os._exit(status)
