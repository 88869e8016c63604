"""Faults on a Flink cluster of two TaskManagers while `create` runs: a TaskManager SIGKILLed after some of its
subtasks finished (a replacement started, as a cluster manager would), and an SDK worker process SIGKILLed as it
starts (the pool starts it again). With the restart strategy `bertcorpus cluster` configures, the job finishes, and
its bytes and counts are the in-memory run's. Minutes per test: these run in .ci/run's slow step
(`pytest -m slow_engines`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BOOKS, VOCAB, run_cli
from engine_cluster import Cluster, assert_same_tree, running_cluster, summary_lines

pytestmark = [pytest.mark.xdist_group("flink-faults"), pytest.mark.slow_engines]
LOCAL = ["--runner=DirectRunner", "--direct_running_mode=in_memory"]
CREATE = ["--input", *BOOKS, "--vocab", VOCAB, "--dupe-factor", "3"]
REST = "http://127.0.0.1:8081"
WAIT_SECONDS = 600


@pytest.fixture(scope="module")
def flink_for_faults(tmp_path_factory):
    with running_cluster("flink", tmp_path_factory.mktemp("flink-faults")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def local_create(tmp_path_factory):
    """The in-memory run both faults are compared with, and its summary."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("local") / "out"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert run_cli("create", *CREATE, "--output", out, *LOCAL) == 0
    return out, summary_lines(printed.getvalue(), out)


def running_job(flink: Cluster, before: set[str], job: subprocess.Popen) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        jobs = {j["jid"]: j["state"] for j in flink.get(f"{REST}/jobs/overview")["jobs"] if j["jid"] not in before}
        running = [jid for jid, state in jobs.items() if state == "RUNNING"]
        if running:
            return running[0]
        assert job.poll() is None, job.communicate()
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(1)


def finished_subtasks_on(flink: Cluster, jid: str, manager: str) -> int:
    vertices = flink.get(f"{REST}/jobs/{jid}")["vertices"]
    finished = 0
    for listing in flink.get_all([f"{REST}/jobs/{jid}/vertices/{v['id']}/taskmanagers" for v in vertices]):
        for m in listing["taskmanagers"]:
            if m["taskmanager-id"] == manager:
                finished += m["status-counts"].get("FINISHED", 0)
    return finished


def resource_id(log: Path) -> str:
    return re.search(r"Starting TaskManager with ResourceID: (\S+)", log.read_text()).group(1)


def finish_and_compare(job: subprocess.Popen, out: Path, local_create) -> None:
    try:
        stdout, stderr = job.communicate(timeout=WAIT_SECONDS)
    finally:
        if job.poll() is None:  # a job that hangs must not outlive the test
            job.terminate()
            job.communicate()
    assert job.returncode == 0, stderr[-3000:]
    local, local_summary = local_create
    assert summary_lines(stdout, out) == local_summary
    assert_same_tree(out, local)


def test_a_task_manager_killed_mid_job_is_replaced_and_the_bytes_are_the_same(flink_for_faults, local_create, tmp_path):
    flink = flink_for_faults
    state = flink.state
    victim_log = state / "log" / "taskmanager-0.out"
    victim, victim_pid = resource_id(victim_log), flink.record["daemons"]["Flink TaskManager 0"]
    before = {j["jid"] for j in flink.get(f"{REST}/jobs/overview")["jobs"]}
    job = flink.launch("create", *CREATE, "--output", tmp_path / "out")
    jid = running_job(flink, before, job)
    deadline = time.monotonic() + WAIT_SECONDS
    while finished_subtasks_on(flink, jid, victim) == 0:
        assert job.poll() is None and time.monotonic() < deadline, "no subtask finished on the TaskManager"
        time.sleep(0.5)
    os.kill(victim_pid, signal.SIGKILL)
    environment = {
        **os.environ,
        "FLINK_HOME": str(Path(flink.record["home"])),
        "FLINK_CONF_DIR": str(state / "conf"),
        "FLINK_LOG_DIR": str(state / "log"),
        "FLINK_PID_DIR": str(state / "run"),
    }
    with open(state / "log" / "taskmanager-replacement.out", "w") as log:
        replacement = subprocess.Popen(
            [*flink.prefix, str(Path(flink.record["home"]) / "bin" / "taskmanager.sh"), "start-foreground"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
    try:
        finish_and_compare(job, tmp_path / "out", local_create)
        assert flink.get(f"{REST}/jobs/{jid}")["state"] == "FINISHED"
        assert flink.get(f"{REST}/jobs/{jid}/exceptions")["exceptionHistory"]["entries"]  # it failed, then restarted
    finally:
        with_group_killed(replacement)


def test_an_sdk_worker_killed_is_started_again_and_the_bytes_are_the_same(flink_for_faults, local_create, tmp_path):
    flink = flink_for_faults
    before = {j["jid"] for j in flink.get(f"{REST}/jobs/overview")["jobs"]}
    started_before = len(re.findall(r"started worker", flink.pool_log()))
    job = flink.launch("create", *CREATE, "--output", tmp_path / "out")
    running_job(flink, before, job)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:  # a worker of the third stage that runs Python, as soon as the pool has started it
        started = re.findall(r"started worker \S+ pid (\d+)", flink.pool_log())[started_before:]
        live = [int(pid) for pid in started if _alive(int(pid))]
        if len(started) >= 3 and live:
            break
        assert job.poll() is None and time.monotonic() < deadline, "no SDK worker started"
        time.sleep(0.2)
    os.kill(live[-1], signal.SIGKILL)
    finish_and_compare(job, tmp_path / "out", local_create)
    log = flink.pool_log()
    killed = re.search(rf"worker (\S+) pid {live[-1]} exited \(-9\)", log)
    assert killed and f"started worker {killed.group(1)} pid" in log[killed.end() :]  # started again


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def with_group_killed(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
