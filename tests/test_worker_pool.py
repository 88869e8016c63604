"""The SDK worker pool `bertcorpus cluster` serves (pipeline/engines/worker_pool.py), on its own: a worker that dies
while its runner still listens is started again with its id (a runner waits without end for a worker that died
before it connected), and one whose runner has gone is not. The runner here is a TCP listener that never answers,
so each worker waits to connect for as long as the test needs."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import time

import pytest
from apache_beam.portability.api import beam_fn_api_pb2, endpoints_pb2

from bertcorpus.pipeline.engines import worker_pool
from bertcorpus.pipeline.errors import UserError

from conftest import run_cli


def start_request(worker_id: str, url: str) -> beam_fn_api_pb2.StartWorkerRequest:
    return beam_fn_api_pb2.StartWorkerRequest(
        worker_id=worker_id, control_endpoint=endpoints_pb2.ApiServiceDescriptor(url=url)
    )


def started(caplog) -> list[tuple[str, int]]:
    return [(m[0], int(m[1])) for m in re.findall(r"started worker (\S+) pid (\d+)", caplog.text)]


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.1)


def test_a_worker_that_dies_while_its_runner_listens_is_started_again_and_not_once_its_runner_is_gone(caplog):
    caplog.set_level(logging.INFO, logger=worker_pool.__name__)
    pool = worker_pool.WorkerPool(preload=False)
    runner = socket.create_server(("127.0.0.1", 0))
    url = f"127.0.0.1:{runner.getsockname()[1]}"
    try:
        assert pool.StartWorker(start_request("3-1", url), None).error == ""
        [(worker_id, first)] = started(caplog)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: len(started(caplog)) == 2, "worker started again")
        assert f"worker 3-1 pid {first} exited (-9)" in caplog.text
        (again_id, again) = started(caplog)[1]
        assert (worker_id, again_id) == ("3-1", "3-1") and again != first and pool.live_workers() == 1

        runner.close()  # the runner has gone: a worker that dies now stays dead
        os.kill(again, signal.SIGKILL)
        wait_for(lambda: f"worker 3-1 pid {again} exited (-9)" in caplog.text, "reaped worker")
        time.sleep(2 * worker_pool.CHECK_SECONDS)
        assert len(started(caplog)) == 2 and pool.live_workers() == 0
    finally:
        runner.close()
        pool.close()


def test_a_busy_pool_port_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """`cluster worker-pool` and `cluster flink` on a port something listens on: one line, exit 2, no traceback, and
    for flink nothing fetched first."""
    monkeypatch.setenv("BERTCORPUS_ENGINES_CACHE", str(tmp_path / "engines"))
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        for engine in ("worker-pool", "flink"):
            assert run_cli("cluster", engine, "--pool-port", str(port), "--state-dir", str(tmp_path / "state")) == 2
            assert capsys.readouterr().err.splitlines() == [
                f"bertcorpus cluster: error: the worker pool cannot listen on 127.0.0.1:{port}: Address already in "
                "use; choose another --pool-port, or stop what listens there"
            ]
    assert not (tmp_path / "engines").exists()


def test_a_second_pool_on_a_served_port_fails_rather_than_share_it(monkeypatch):
    server, pool, port = worker_pool.serve("127.0.0.1:0", preload=False)
    try:
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            worker_pool.serve(f"127.0.0.1:{port}", preload=False)
        # Taken between the check and gRPC's own bind: gRPC's refusal is the same line.
        monkeypatch.setattr(worker_pool, "listen_problem", lambda address: None)
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port}: the address is in use"):
            worker_pool.serve(f"127.0.0.1:{port}", preload=False)
    finally:
        server.stop(0)
        pool.close()
