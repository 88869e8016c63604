"""Local multi-process runs fork their SDK worker processes from the launcher (pipeline/forked_workers.py): the
output is the same, no forked process outlives the run, forking is refused where it is unsafe, and a worker command
that finds no forked process starts Beam's usual worker instead."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import pytest
from conftest import SAMPLE_TEXT, TESTS, VOCAB, run_cli
from test_create_pipeline import tree_digest

REPO = TESTS.parent


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_two_worker_run_forks_its_workers_and_writes_the_same_bytes(tmp_path, books_jsonl):
    common = ["create", "--input", str(books_jsonl), str(SAMPLE_TEXT), "--vocab", str(VOCAB), "--dupe-factor", "2",
              "--num-buckets", "4", "--num-shards", "2"]
    # A fresh launcher, as on the command line: this test process may have used gRPC already.
    done = subprocess.run([sys.executable, "-m", "pipeline", "-v", *common, "--output", str(tmp_path / "forked"),
                           "--direct_running_mode=multi_processing", "--direct_num_workers=2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    forked = re.search(r"forked 2 SDK worker processes: (\d+) (\d+)", done.stderr)
    assert forked, done.stderr[-3000:]
    assert all(gone(int(pid)) for pid in forked.groups())  # reaped with the run
    assert run_cli(*common, "--output", tmp_path / "in-memory", "--direct_running_mode=in_memory") == 0
    forked_files, in_memory = tree_digest(tmp_path / "forked"), tree_digest(tmp_path / "in-memory")
    assert forked_files == in_memory and len(in_memory) >= 4


def test_forked_processes_that_no_worker_takes_end_with_the_run():
    from pipeline.forked_workers import ForkedWorkers

    with ForkedWorkers(2) as workers:
        assert len(workers.pids) == 2 and not any(gone(pid) for pid in workers.pids)
        directory = workers.directory
    assert all(gone(pid) for pid in workers.pids) and not os.path.exists(directory)


def test_forking_is_refused_while_another_thread_runs():
    from pipeline import forked_workers

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not forked_workers.can_fork()
    finally:
        release.set()
        other.join()


def test_a_worker_command_that_finds_no_forked_process_starts_the_usual_worker(tmp_path):
    from pipeline.forked_workers import _CLIENT

    env = {k: v for k, v in os.environ.items() if k != "CONTROL_API_SERVICE_DESCRIPTOR"}
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _CLIENT, str(tmp_path / "no-such-socket")],
                          env=env, capture_output=True, text=True, timeout=120)
    # Beam's own worker started, and stopped at once for want of a runner to talk to.
    assert done.returncode != 0 and "CONTROL_API_SERVICE_DESCRIPTOR" in done.stderr, done.stderr[-2000:]


def test_a_pool_that_cannot_be_made_leaves_nothing_behind(tmp_path, monkeypatch):
    from pipeline import forked_workers

    long_dir = tmp_path / ("d" * 120)  # too long for a Unix socket's address
    monkeypatch.setattr(forked_workers.tempfile, "mkdtemp", lambda prefix: (long_dir.mkdir(), str(long_dir))[1])
    with pytest.raises(OSError):
        forked_workers.ForkedWorkers(2)
    assert not long_dir.exists()
