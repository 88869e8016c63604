"""SDK worker processes forked from the launcher, for local multi-process runs.

Beam's local runner starts each worker process as `python -m apache_beam.runners.worker.sdk_worker_main`: a fresh
interpreter that imports Beam and the job's modules again, about a second and 1.1–1.8 CPU-s per worker, on every
run. By the time a job runs, the launcher has imported all of that already. So, just before the runner starts its
gRPC servers (a process that has started gRPC must not fork), the launcher forks one process per worker; each
waits on a Unix socket. The runner's worker command becomes a small client, started with `python -S` (no site
packages, a few milliseconds), that hands the waiting process what Beam gives a worker (its control and logging
endpoints, options and id, as environment variables), and then waits for its exit status. The forked process runs
Beam's own SDK harness, so the worker is the same; only its start is cheaper.

The pool is used only where forking is safe: on Linux, with no other Python thread running, and in a process
that has not used gRPC yet (a test process that already ran a multi-process job starts its workers the
usual way). A client that no forked process takes within a few seconds starts the usual worker itself.
"""
from __future__ import annotations

import json
import logging
import os
import select
import shlex
import shutil
import socket
import sys
import tempfile
import threading

# What the runner's command hands the forked process: the variables Beam sets for a worker.
HANDED_OVER = ("CONTROL_API_SERVICE_DESCRIPTOR", "LOGGING_API_SERVICE_DESCRIPTOR", "PIPELINE_OPTIONS", "WORKER_ID")
TAKE_TIMEOUT_S = 10

# The worker command's code. It runs under `python -S`, so it uses the standard library only.
_CLIENT = f"""
import json, os, socket, sys
env = {{k: os.environ[k] for k in {HANDED_OVER!r} if k in os.environ}}
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    s.sendall(json.dumps(env).encode() + b"\\n")
    s.settimeout({TAKE_TIMEOUT_S})
    taken = s.recv(3) == b"ok\\n"
except OSError:
    taken = False
if not taken:
    os.execv(sys.executable, [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"])
s.settimeout(None)
status = s.recv(16)
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
        self.directory = tempfile.mkdtemp(prefix="bertcorpus-workers-")
        self.address = os.path.join(self.directory, "socket")
        self.pids: list[int] = []
        alive_read, self.alive = os.pipe()  # closed by the launcher when the run ends: idle processes then exit
        try:
            with socket.socket(socket.AF_UNIX) as listener:
                listener.bind(self.address)
                listener.listen(count)
                for _ in range(count):
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - the forked process never returns from here
                        os.close(self.alive)
                        _serve(listener, alive_read)
                    self.pids.append(pid)
        except BaseException:
            self.__exit__()
            raise
        finally:
            os.close(alive_read)
        self.command = " ".join(shlex.quote(part) for part in (sys.executable, "-S", "-c", _CLIENT, self.address))

    def __enter__(self) -> "ForkedWorkers":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.alive)
        for pid in self.pids:
            os.waitpid(pid, 0)
        shutil.rmtree(self.directory, ignore_errors=True)


def _serve(listener: socket.socket, alive: int) -> None:
    """In a forked process: take one worker command's connection, run the SDK harness with what it handed over,
    send back the exit status, and exit; exit at once if the launcher ends the run first."""
    status = 1
    try:
        listener.setblocking(False)
        while True:
            ready, _, _ = select.select([listener, alive], [], [])
            if alive in ready:
                os._exit(0)
            try:
                connection, _ = listener.accept()
                break
            except BlockingIOError:  # another forked process took it
                continue
        listener.close()
        connection.setblocking(True)
        with connection.makefile("rb") as handed:
            os.environ.update(json.loads(handed.readline()))
        connection.sendall(b"ok\n")
        # The launcher's log handlers would print the worker's messages; Beam sends them to the runner instead.
        logging.getLogger().handlers.clear()
        sys.argv = sys.argv[:1]
        from apache_beam.runners.worker import sdk_worker_main

        sdk_worker_main.main([])
        status = 0
    except BaseException:  # noqa: BLE001 — whatever happens, the process must end here, with a status
        import traceback

        traceback.print_exc()
    finally:
        try:
            connection.sendall(str(status).encode())
        except Exception:  # noqa: BLE001 — the client is gone, or never came
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
