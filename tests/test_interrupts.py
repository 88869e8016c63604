"""Ctrl-C and a dying worker process, sent for real to a real `python -m pipeline create` run: one line, the exit
status, and nothing left that looks complete, in every local mode."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conftest import TESTS, VOCAB

BOOKS = sorted((TESTS / "data" / "books_more").glob("*.txt"))
MODES = {"in_memory": ["--direct_running_mode", "in_memory"],
         "multi_processing": ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds worker processes in /proc")


@pytest.fixture(scope="module")
def long_input(tmp_path_factory) -> Path:
    """Five real books, three times over (11.7 MB): a create run of some seconds."""
    path = tmp_path_factory.mktemp("long") / "books.txt"
    path.write_bytes(b"".join(book.read_bytes() for book in BOOKS) * 3)
    return path


def _start_create(long_input: Path, out: Path, mode: str) -> tuple[subprocess.Popen, str]:
    """The run, in a session of its own (as a terminal's foreground job), marked so its workers can be found."""
    marker = uuid.uuid4().hex
    command = [sys.executable, "-m", "pipeline", "create", "--input", str(long_input), "--vocab", str(VOCAB),
               "--output", str(out), "--runner", "DirectRunner", *MODES[mode]]
    run = subprocess.Popen(command, cwd=TESTS.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True, env={**os.environ, "BERTCORPUS_TEST_RUN": marker})
    return run, marker


def _processes_marked(marker: str, command_part: str = "") -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            continue
        if f"BERTCORPUS_TEST_RUN={marker}".encode() in environ and command_part in command:
            found.append(int(entry))
    return found


def _wait_until(condition, run: subprocess.Popen, what: str, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while not condition():
        assert run.poll() is None, f"the run ended before {what}: {run.communicate()}"
        assert time.time() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.05)


def _workers(marker: str) -> list[int]:
    """The run's worker processes (Beam starts each through a shell, which is left out)."""
    return [pid for pid in _processes_marked(marker, "sdk_worker_main")
            if not _command_line(pid).startswith("/bin/sh")]


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _wait_for_work(run: subprocess.Popen, out: Path, marker: str, mode: str) -> None:
    """Until the job is running: its output is prepared and, in multi_processing mode, its worker processes have
    started; then two seconds into its work (of some fifteen)."""
    _wait_until(out.exists, run, "output directory")
    if mode == "multi_processing":
        _wait_until(lambda: len(_workers(marker)) == 2, run, "two worker processes")
    time.sleep(2)
    assert run.poll() is None, f"the run ended before it could be stopped: {run.communicate()}"


def _finish(run: subprocess.Popen) -> str:
    """The run's stderr once it has ended; a run that does not end is killed, with its process group."""
    try:
        return run.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        pytest.fail(f"the run did not end within 120 s of the signal: {run.communicate()[1][-2000:]}")


def _assert_nothing_left(out: Path, marker: str) -> None:
    assert not (out / "manifest.json").exists()
    assert not (out / ".staging").exists()
    deadline = time.time() + 10
    while _processes_marked(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_marked(marker) == []


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, long_input, mode):
    out = tmp_path / "out"
    run, marker = _start_create(long_input, out, mode)
    _wait_for_work(run, out, marker, mode)
    os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground process group
    err = _finish(run)
    assert (run.returncode, err) == (130, "bertcorpus create: interrupted\n")
    _assert_nothing_left(out, marker)


def test_ctrl_c_sent_to_the_launcher_alone_stops_its_workers(tmp_path, long_input):
    out = tmp_path / "out"
    run, marker = _start_create(long_input, out, "multi_processing")
    _wait_for_work(run, out, marker, "multi_processing")
    run.send_signal(signal.SIGINT)
    err = _finish(run)
    assert (run.returncode, err) == (130, "bertcorpus create: interrupted\n")
    _assert_nothing_left(out, marker)


def test_a_killed_worker_is_one_line_naming_the_stage(tmp_path, long_input):
    out = tmp_path / "out"
    run, marker = _start_create(long_input, out, "multi_processing")
    _wait_for_work(run, out, marker, "multi_processing")
    os.kill(_workers(marker)[0], signal.SIGKILL)
    err = _finish(run)
    assert run.returncode == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("bertcorpus create: error: a worker process was killed by SIGKILL while running "
                          "create pretraining data/")
    assert err.endswith(" (out of memory?); the run stopped and published nothing\n")
    _assert_nothing_left(out, marker)
