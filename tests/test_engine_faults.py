"""Faults on a Flink cluster of two TaskManagers while `create` runs: a TaskManager SIGKILLed after some of its
subtasks finished (a replacement started, as a cluster manager would), and an SDK worker process SIGKILLed while it
works on a bundle (the runner fails that task; tests/test_worker_pool.py has the pool start one that died before it
connected). With the restart strategy `bertcorpus cluster` configures, the job finishes, and its bytes and counts
are the in-memory run's. Where no restart is allowed, the lost TaskManager ends the job: the command says so in one
line, publishes nothing, and a rerun gives the same bytes. Minutes per test: these run in .ci/run's slow step
(`make test-slow`)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import BOOKS, DATA, VOCAB, run_cli
from engine_cluster import Cluster, assert_same_tree, running_cluster, summary_lines

pytestmark = [pytest.mark.xdist_group("flink-faults"), pytest.mark.slow]
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
    """The in-memory run the faults are compared with, and its summary."""
    return local_run(CREATE, tmp_path_factory.mktemp("local") / "out")


def local_run(create: list, out: Path) -> tuple[Path, list[str]]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert run_cli("create", *create, "--output", out, *LOCAL) == 0
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


def final_state(flink: Cluster, jid: str) -> str:
    """The job's state once Flink's REST API shows it ended: it serves a job's graph from a cache kept for a few
    seconds, so a query soon after the launcher exits may still say RUNNING."""
    deadline = time.monotonic() + 60
    while (state := flink.get(f"{REST}/jobs/{jid}")["state"]) not in ("FINISHED", "FAILED", "CANCELED"):
        assert time.monotonic() < deadline, f"the job is still {state}"
        time.sleep(1)
    return state


def resource_id(log: Path) -> str:
    return re.search(r"Starting TaskManager with ResourceID: (\S+)", log.read_text()).group(1)


def finish_and_compare(job: subprocess.Popen, out: Path, local_create) -> str:
    """The job's bytes and summary are the in-memory run's; its summary's restarts row."""
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
    return next(line.split(None, 2)[2] for line in stdout.splitlines() if line.strip().startswith("runner restarts"))


def kill_a_task_manager_mid_job(flink: Cluster, out: Path) -> tuple[subprocess.Popen, str]:
    """Launch create, wait until a subtask finished on TaskManager 0, SIGKILL it; the job and its Flink id."""
    victim = resource_id(flink.state / "log" / "taskmanager-0.out")
    before = {j["jid"] for j in flink.get(f"{REST}/jobs/overview")["jobs"]}
    job = flink.launch("create", *CREATE, "--output", out)
    jid = running_job(flink, before, job)
    deadline = time.monotonic() + WAIT_SECONDS
    while finished_subtasks_on(flink, jid, victim) == 0:
        assert job.poll() is None and time.monotonic() < deadline, "no subtask finished on the TaskManager"
        time.sleep(0.5)
    os.kill(flink.record["daemons"]["Flink TaskManager 0"], signal.SIGKILL)
    return job, jid


def test_a_task_manager_killed_mid_job_is_replaced_and_the_bytes_are_the_same(flink_for_faults, local_create, tmp_path):
    flink = flink_for_faults
    state = flink.state
    job, jid = kill_a_task_manager_mid_job(flink, tmp_path / "out")
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
        restarts = finish_and_compare(job, tmp_path / "out", local_create)
        assert final_state(flink, jid) == "FINISHED"
        assert flink.get(f"{REST}/jobs/{jid}/exceptions")["exceptionHistory"]["entries"]  # it failed, then restarted
        assert int(restarts.split()[0].rstrip("+")) >= 1 and "(the first: " in restarts  # and the summary says so
    finally:
        with_group_killed(replacement)


def test_an_sdk_worker_killed_mid_bundle_fails_its_task_and_the_bytes_are_the_same(
    flink_for_faults, tmp_path_factory, tmp_path
):
    # Five times the text of the other tests (7 MB of books, split at blank lines): each stage keeps its SDK workers
    # busy for seconds, long enough to be caught inside a bundle. SOP: its labels are balanced by construction,
    # where random next sentences over many one-paragraph documents lean past NSP's bound and are refused.
    books = [*BOOKS, *sorted((DATA / "books_more").glob("*.txt")), *sorted((DATA / "books").glob("*/*.txt"))]
    create = ["--input", *books, "--vocab", VOCAB, "--dupe-factor", "10", "--pair-objective", "sop"]
    local = local_run(create, tmp_path_factory.mktemp("local-more") / "out")
    flink = flink_for_faults
    for attempt in range(3):  # a worker caught working may end its bundle before the kill lands: try again
        before = {j["jid"] for j in flink.get(f"{REST}/jobs/overview")["jobs"]}
        started_before = len(re.findall(r"started worker", flink.pool_log()))
        out = tmp_path / f"out-{attempt}"
        job = flink.launch("create", *create, "--output", out)
        jid = running_job(flink, before, job)
        try:
            os.kill(busy_worker(started_before, job, flink), signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended its bundle and exited just before: a miss
        finish_and_compare(job, out, local)
        # The runner saw the bundle's stream break, failed that task and restarted the job on new workers: the
        # kill fell inside a bundle, not between two.
        if flink.get(f"{REST}/jobs/{jid}/exceptions")["exceptionHistory"]["entries"]:
            return
    pytest.fail("in three runs, no kill of a working SDK worker failed a task")


def busy_worker(started_before: int, job: subprocess.Popen, flink: Cluster) -> int:
    """The pid of an SDK worker of the job that is inside a bundle: one using the CPU in two polls in a row."""
    deadline, cpu_then, streak = time.monotonic() + WAIT_SECONDS, {}, {}
    while True:
        started = [int(pid) for pid in re.findall(r"started worker \S+ pid (\d+)", flink.pool_log())[started_before:]]
        now = {pid: seconds for pid in started if (seconds := cpu_seconds(pid)) is not None}
        streak = {pid: streak.get(pid, 0) + 1 if now[pid] - cpu_then.get(pid, now[pid]) >= 0.05 else 0 for pid in now}
        busy = [pid for pid, polls in streak.items() if polls >= 2]
        if busy:
            return max(busy, key=now.get)
        assert job.poll() is None and time.monotonic() < deadline, "no SDK worker was seen working"
        cpu_then = now
        time.sleep(0.1)


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of a live process (None once it is gone): /proc/PID/stat's fields 14 and 15."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def with_group_killed(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def test_a_job_that_cannot_finish_says_so_in_one_line_publishes_nothing_and_a_rerun_is_the_same(
    local_create, tmp_path_factory, tmp_path
):
    out = tmp_path / "out"
    with running_cluster("flink", tmp_path_factory.mktemp("flink-no-restarts"), "--restart-attempts", "0") as flink:
        job, jid = kill_a_task_manager_mid_job(flink, out)
        try:
            _, stderr = job.communicate(timeout=WAIT_SECONDS)
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        assert job.returncode == 2, stderr[-3000:]
        assert "Traceback" not in stderr
        errors = [line for line in stderr.splitlines() if line.startswith("bertcorpus create: error: ")]
        assert errors == [stderr.strip().splitlines()[-1]], stderr[-3000:]
        line = errors[0]
        assert line.startswith("bertcorpus create: error: the runner's job "), line
        assert " ended FAILED before it finished: " in line, line
        assert line.endswith("; nothing was published, and a rerun of the same command starts afresh"), line
        assert final_state(flink, jid) == "FAILED"
        assert [p for p in out.rglob("*") if p.is_file()] == []  # no manifest, no records, no staged pieces
        # The surviving TaskManager's two slots hold the job's parallelism of 2: the rerun runs there.
        rerun = flink.run("create", *CREATE, "--output", out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    local, local_summary = local_create
    assert summary_lines(rerun.stdout, out) == local_summary
    assert_same_tree(out, local)
