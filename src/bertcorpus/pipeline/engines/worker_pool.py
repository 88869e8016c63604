"""An SDK worker pool for Beam's EXTERNAL environment, one per host, shared by every TaskManager or executor there.

A runner (a Flink TaskManager, a Spark executor) asks the pool, through Beam's portability API
(BeamFnExternalWorkerPool), to start an SDK worker for an environment it opens, and to stop it when it closes the
environment. This pool differs from Beam's stock one (worker_pool_main) in four ways:

- **Workers are keyed by (id, control endpoint), not by id alone.** Each runner numbers its workers itself ("1-1",
  "2-1", ...), so two TaskManagers on one host ask for the same ids. StopWorker(id) stops only the workers with that
  id whose control endpoint is closed: the runner closes an environment's control server before it asks for the
  stop, and another runner's worker of the same id still has its endpoint open. (The stock pool keeps one process
  per id, and one TaskManager's StopWorker kills the other's live worker: that one waits 3 minutes and fails.)
- **Workers are forked from a preloaded process** (multiprocessing's forkserver with Beam's SDK harness and the
  bertcorpus job modules imported once): a worker costs a fork, not a fresh interpreter importing Beam (~2.5 CPU-s).
- **It listens on the address it is given** (the stock pool binds every interface), and its workers die with it:
  they share its process group, and each also gets SIGKILL when the forkserver above it exits. A worker whose
  runner went away (its control endpoint closed) is stopped within a few seconds.
- **A worker that dies while its runner still listens is started again** (up to MAX_RESTARTS times), with the same
  id: Beam's runner waits without end for a worker that died before it connected ("Still waiting for startup of
  environment"); one that dies inside a bundle breaks the bundle's stream, and the runner fails that task, which the
  engine's restart then retries.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.forkserver
import signal
import socket
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc

from bertcorpus.pipeline.errors import UserError

# Imported by the forkserver before it forks any worker: Beam's SDK harness and every module a job's DoFns live in.
PRELOADED_MODULES = [
    "apache_beam.runners.worker.sdk_worker",
    "bertcorpus.pipeline.create.job",
    "bertcorpus.pipeline.extract.wiki_job",
    "bertcorpus.pipeline.extract.books_job",
    "bertcorpus.pipeline.vocab.job",
]
CHECK_SECONDS = 3.0  # how often dead workers are reaped and orphaned ones (runner gone) stopped
STOP_GRACE_SECONDS = 10.0
MAX_RESTARTS = 3  # of one worker that keeps dying
_PR_SET_PDEATHSIG = 1

_LOGGER = logging.getLogger(__name__)


def endpoint_open(url: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at a HOST:PORT endpoint."""
    host, _, port = url.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def listen_problem(address: str) -> str | None:
    """Why the pool cannot listen on HOST:PORT (the port in use, an address not this host's), or None; checked with a
    plain socket first, so that the user gets one line rather than gRPC's log and traceback."""
    host, _, port = address.rpartition(":")
    try:
        number = int(port)
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds: past TIME_WAIT, not a listener
            probe.bind((host.strip("[]"), number))
    except ValueError:
        return f"{address} is not HOST:PORT"
    except OSError as e:
        return e.strerror or str(e)
    return None


def _run_worker(control_url: str, worker_id: str, data_buffer_time_limit_ms: int) -> None:
    """The body of a forked worker: Beam's SDK harness, connected to its runner's control endpoint."""
    try:  # die with the forkserver above (which exits with the pool), not only with the process group
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from apache_beam.runners.worker.sdk_worker import SdkHarness

    SdkHarness(control_url, worker_id=worker_id, data_buffer_time_limit_ms=data_buffer_time_limit_ms).run()


@dataclass
class _Worker:
    worker_id: str
    control_url: str
    process: multiprocessing.Process
    restarts: int = 0
    started: float = field(default_factory=time.monotonic)


class WorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    """StartWorker / StopWorker of Beam's external worker pool API, over forked SDK worker processes."""

    def __init__(self, data_buffer_time_limit_ms: int = 0, preload: bool = True):
        self._context = multiprocessing.get_context("forkserver")
        if preload:
            self._context.set_forkserver_preload(PRELOADED_MODULES)
            # Now rather than at the first worker: the imports then delay no task.
            multiprocessing.forkserver.ensure_running()
        self._data_buffer_time_limit_ms = data_buffer_time_limit_ms
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        threading.Thread(target=self._watch, name="worker-watch", daemon=True).start()

    def StartWorker(self, request, context):
        try:
            self._start(request.worker_id, request.control_endpoint.url)
        except Exception as e:  # reported to the runner, which fails the task with it
            return beam_fn_api_pb2.StartWorkerResponse(error=f"could not start an SDK worker: {e}")
        return beam_fn_api_pb2.StartWorkerResponse()

    def _start(self, worker_id: str, control_url: str, restarts: int = 0) -> _Worker:
        process = self._context.Process(
            target=_run_worker,
            args=(control_url, worker_id, self._data_buffer_time_limit_ms),
            name=f"sdk-worker-{worker_id}",
            daemon=True,  # multiprocessing terminates daemonic children when the pool exits
        )
        process.start()
        worker = _Worker(worker_id, control_url, process, restarts=restarts)
        with self._lock:
            self._workers.append(worker)
        _LOGGER.info("started worker %s pid %d for %s", worker_id, process.pid, control_url)
        return worker

    def StopWorker(self, request, context):
        with self._lock:
            named = [w for w in self._workers if w.worker_id == request.worker_id]
        for worker in named:
            if worker.process.is_alive() and endpoint_open(worker.control_url):
                continue  # another runner's worker with the same id, still in use
            self._stop(worker, "stop requested")
        return beam_fn_api_pb2.StopWorkerResponse()

    def live_workers(self) -> int:
        with self._lock:
            return sum(w.process.is_alive() for w in self._workers)

    def _stop(self, worker: _Worker, why: str) -> None:
        with self._lock:
            if worker not in self._workers:
                return
            self._workers.remove(worker)
        _LOGGER.info("stopping worker %s pid %s (%s)", worker.worker_id, worker.process.pid, why)
        threading.Thread(target=_terminate, args=(worker.process,), daemon=True).start()

    def _watch(self) -> None:
        """Reap workers that exited; stop those whose runner is gone (their control endpoint no longer accepts)."""
        while not self._closed.wait(CHECK_SECONDS):
            with self._lock:
                workers = list(self._workers)
            for worker in workers:
                if not worker.process.is_alive():
                    self._reap(worker)
                elif time.monotonic() - worker.started > CHECK_SECONDS and not endpoint_open(worker.control_url):
                    self._stop(worker, "its runner is gone")

    def _reap(self, worker: _Worker) -> None:
        """Forget an exited worker. One that died (killed, crashed) while its runner still listens is started again
        with the same id: a runner whose worker dies before it connects waits for it without end."""
        with self._lock:
            if worker not in self._workers:
                return
            self._workers.remove(worker)
        code = worker.process.exitcode
        _LOGGER.info("worker %s pid %s exited (%s)", worker.worker_id, worker.process.pid, code)
        if code != 0 and worker.restarts < MAX_RESTARTS and endpoint_open(worker.control_url):
            try:
                self._start(worker.worker_id, worker.control_url, worker.restarts + 1)
            except Exception as e:  # the runner then fails the task, as it would without a restart
                _LOGGER.info("could not start worker %s again: %s", worker.worker_id, e)

    def close(self) -> None:
        """Stop every worker: SIGTERM, then SIGKILL after STOP_GRACE_SECONDS."""
        self._closed.set()
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            _terminate(worker.process)


def _terminate(process: multiprocessing.Process) -> None:
    if not process.is_alive():
        process.join(0)
        return
    process.terminate()
    process.join(STOP_GRACE_SECONDS)
    if process.is_alive():
        process.kill()
        process.join()


def serve(address: str, preload: bool = True):
    """Start the pool's gRPC server on address (HOST:PORT; port 0 picks a free one). Returns (server, pool, port)."""
    check_can_listen(address)
    pool = WorkerPool(preload=preload)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        options=[
            # As Beam's own pool: the runner's keep-alive pings must not count as abuse on an idle connection.
            ("grpc.http2.max_pings_without_data", 0),
            ("grpc.http2.max_ping_strikes", 0),
            # A second pool on a port that one already serves must fail, not share the port with it.
            ("grpc.so_reuseport", 0),
        ],
    )
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:  # newer gRPC raises where older ones returned 0: taken between the check and now
        port = 0
    if port == 0:
        pool.close()
        raise UserError(cannot_listen(address, "the address is in use or not this host's"))
    server.start()
    return server, pool, port


def check_can_listen(address: str) -> None:
    problem = listen_problem(address)
    if problem:
        raise UserError(cannot_listen(address, problem))


def cannot_listen(address: str, why: str) -> str:
    return f"the worker pool cannot listen on {address}: {why}; choose another --pool-port, or stop what listens there"
