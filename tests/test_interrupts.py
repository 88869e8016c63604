"""Ctrl-C, SIGTERM and a dying worker process, sent for real to a real `python -m bertcorpus create` run: one line,
the exit status, and nothing left that looks complete, in every local mode; and the watch's answers to an interrupt
that lands at an awkward moment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from bertcorpus.pipeline.engines.launcher_watch import THREAD_NAME
from bertcorpus.pipeline.engines.local_shuffle import SPILL_PREFIX
from bertcorpus.pipeline.engines.run_watch import RunWatch

from conftest import TESTS, VOCAB, wait_until

BOOKS = sorted((TESTS / "data" / "books_more").glob("*.txt"))
MODES = {
    "in_memory": ["--direct_running_mode", "in_memory"],
    "multi_processing": ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"],
}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds worker processes in /proc")


@pytest.fixture(scope="module")
def long_input(tmp_path_factory) -> Path:
    """Five real books, three times over (11.7 MB): a create run of some seconds."""
    path = tmp_path_factory.mktemp("long") / "books.txt"
    path.write_bytes(b"".join(book.read_bytes() for book in BOOKS) * 3)
    return path


@pytest.fixture
def start_create():
    """Starts runs that do not outlive the test, however it ends: in a session of their own, they would otherwise
    run on after a failed wait, or after pytest itself."""
    started: list[tuple[subprocess.Popen, str]] = []

    def start(long_input: Path, out: Path, mode: str) -> tuple[subprocess.Popen, str]:
        started.append(_start_create(long_input, out, mode))
        return started[-1]

    yield start
    for run, marker in started:
        run.kill()  # only while it has not been waited for: its pid is not someone else's yet
        for pid in _processes_marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # gone already
        run.communicate()


def _start_create(long_input: Path, out: Path, mode: str) -> tuple[subprocess.Popen, str]:
    """The run, in a session of its own (as a terminal's foreground job), marked so its workers can be found. A run
    that hangs can be made to print the stack of each of its threads (faulthandler, on SIGABRT)."""
    marker = uuid.uuid4().hex
    (out.parent / "tmp").mkdir(exist_ok=True)  # the run's $TMPDIR, where its spill files go
    command = [
        sys.executable,
        "-m",
        "bertcorpus",
        "create",
        "--input",
        str(long_input),
        "--vocab",
        str(VOCAB),
        "--output",
        str(out),
        "--runner",
        "DirectRunner",
        *MODES[mode],
    ]
    run = subprocess.Popen(
        command,
        cwd=TESTS.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "BERTCORPUS_TEST_RUN": marker, "PYTHONFAULTHANDLER": "1", "TMPDIR": str(out.parent / "tmp")},
    )
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


def _workers(marker: str) -> list[int]:
    """The run's worker processes (Beam starts each through a shell, which is left out)."""
    return [pid for pid in _processes_marked(marker, "sdk_worker_main") if not _command_line(pid).startswith("/bin/sh")]


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _watching(pid: int) -> bool:
    """Whether a worker process runs the watch on its launcher (pipeline/engines/launcher_watch.py): a thread that
    names itself in the kernel, and starts when the worker sets up the job's first DoFn."""
    try:
        return any((task / "comm").read_text().strip() == THREAD_NAME for task in Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: only its parent has not collected it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _spilled(out: Path) -> bool:
    return any((out.parent / "tmp").glob(f"*{SPILL_PREFIX}*/*.spill"))


def _wait_for_work(run: subprocess.Popen, out: Path, marker: str, mode: str) -> None:
    """Until the job is at work (of some fifteen seconds): its output is prepared, the documents it read reach the
    first shuffle's spill files and, in multi_processing mode, both worker processes run our DoFns."""
    wait_until(out.exists, run, "output directory")
    if mode == "multi_processing":
        wait_until(lambda: len(_workers(marker)) == 2, run, "two worker processes")
        wait_until(lambda: all(_watching(pid) for pid in _workers(marker)), run, "two workers at work")
    wait_until(lambda: _spilled(out), run, "spill files of the first shuffle")
    assert run.poll() is None, f"the run ended before it could be stopped: {run.communicate()}"


def _finish(run: subprocess.Popen) -> str:
    """The run's stderr once it has ended. A run that does not end shows where its threads are, and is killed with
    its process group."""
    try:
        return run.communicate(timeout=120)[1]
    except subprocess.TimeoutExpired:
        os.kill(run.pid, signal.SIGABRT)
        try:
            run.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # nothing was left of the group
        pytest.fail(f"the run did not end within 120 s of the signal: {run.communicate()[1][-6000:]}")


def _assert_nothing_left(out: Path, marker: str) -> None:
    assert not (out / "manifest.json").exists()
    assert not (out / ".staging").exists()
    deadline = time.time() + 60  # a bound on waiting only: a loaded machine may take seconds to reap them
    while _processes_marked(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _processes_marked(marker) == []
    assert not list((out.parent / "tmp").glob("*shuffle*"))  # the run's spill files went with it


@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_is_one_line_and_exit_130(tmp_path, long_input, start_create, mode):
    out = tmp_path / "out"
    run, marker = start_create(long_input, out, mode)
    _wait_for_work(run, out, marker, mode)
    os.killpg(run.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground process group
    err = _finish(run)
    assert (run.returncode, err) == (130, "bertcorpus create: interrupted\n")
    _assert_nothing_left(out, marker)


def test_ctrl_c_sent_to_the_launcher_alone_stops_its_workers(tmp_path, long_input, start_create):
    out = tmp_path / "out"
    run, marker = start_create(long_input, out, "multi_processing")
    _wait_for_work(run, out, marker, "multi_processing")
    run.send_signal(signal.SIGINT)
    err = _finish(run)
    assert (run.returncode, err) == (130, "bertcorpus create: interrupted\n")
    _assert_nothing_left(out, marker)


@pytest.mark.parametrize("mode", MODES)
def test_sigterm_is_one_line_and_exit_143_with_the_same_clean_up(tmp_path, long_input, start_create, mode):
    out = tmp_path / "out"
    run, marker = start_create(long_input, out, mode)
    _wait_for_work(run, out, marker, mode)
    run.send_signal(signal.SIGTERM)  # what a service manager or `kill` sends
    err = _finish(run)
    assert (run.returncode, err) == (143, "bertcorpus create: terminated\n")
    _assert_nothing_left(out, marker)


def test_a_killed_worker_is_one_line_naming_the_stage(tmp_path, long_input, start_create):
    out = tmp_path / "out"
    run, marker = start_create(long_input, out, "multi_processing")
    _wait_for_work(run, out, marker, "multi_processing")
    os.kill(_workers(marker)[0], signal.SIGKILL)
    err = _finish(run)
    assert run.returncode == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith(
        "bertcorpus create: error: a worker process was killed by SIGKILL while running create pretraining data/"
    )
    assert err.endswith(" (out of memory?); the run stopped and published nothing\n")
    _assert_nothing_left(out, marker)


def test_the_workers_of_a_killed_launcher_end_themselves(tmp_path, long_input, start_create):
    """SIGKILL leaves the launcher no chance to stop its workers: each ends itself once its launcher is gone (they
    used to wait on its channel for some 25 minutes, holding their memory)."""
    out = tmp_path / "out"
    run, marker = start_create(long_input, out, "multi_processing")
    _wait_for_work(run, out, marker, "multi_processing")
    workers = _workers(marker)
    run.kill()
    run.wait()
    deadline = time.time() + 60  # a bound on waiting only: they poll every half second
    while any(_alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "the orphaned workers are still running"


def test_the_watch_ends_a_process_whose_launcher_is_gone_and_only_then(tmp_path):
    """watch_launcher in a process started through a shell by a 'launcher' process, as Beam starts its workers: it
    runs on while the launcher lives, and ends itself once the launcher is killed."""
    ready = tmp_path / "ready"
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import os, time\n"
        "from bertcorpus.pipeline.engines.launcher_watch import watch_launcher\n"
        "watch_launcher()\n"
        f"open({str(ready)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    launcher = (
        "import subprocess, time\n"
        "from bertcorpus.pipeline.engines.launcher_watch import mark_launcher\n"
        "mark_launcher()\n"
        f"subprocess.Popen({f'{sys.executable} {worker}'!r}, shell=True)\n"
        "time.sleep(600)\n"
    )
    run = subprocess.Popen([sys.executable, "-c", launcher], cwd=TESTS.parent, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(ready.exists, run, "the worker", timeout=120)
        wait_until(lambda: ready.read_text().isdigit(), run, "the worker's pid", timeout=120)
        pid = int(ready.read_text())
        wait_until(lambda: _watching(pid), run, "the watch", timeout=120)
        assert _alive(pid)  # the launcher lives: the worker runs on
    finally:
        run.kill()
        run.wait()
    deadline = time.time() + 60
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


# --------------------------------------------------------------------- an interrupt at an awkward moment


def test_a_state_sampler_that_ctrl_c_cut_off_is_stopped():
    """In in_memory mode the launcher runs bundles itself. Ctrl-C landing as a bundle starts its state sampler, after
    the sampling thread started but before Beam noted it, leaves that thread running, and it is no daemon: the run
    printed its line and then hung as it exited, waiting for it."""
    from apache_beam.runners.worker import statesampler
    from apache_beam.utils.counters import CounterFactory

    sampler = statesampler.StateSampler("stage", CounterFactory())
    before = set(threading.enumerate())
    try:
        with pytest.raises(KeyboardInterrupt), RunWatch():
            statesampler.set_current_tracker(sampler)  # what StateSampler.start does before the interrupt lands
            super(statesampler.StateSampler, sampler).start()
            sampling = [t for t in set(threading.enumerate()) - before if not t.daemon]
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(10)
        assert len(sampling) == 1
        sampling[0].join(timeout=2)
        assert not sampling[0].is_alive() and statesampler.get_current_tracker() is None
    finally:
        sampler.finished = True  # lets pytest exit where the watch did not stop the thread


def _fail_in_thread(error: Exception) -> None:
    def fail():
        raise error

    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()


def test_the_launcher_is_interrupted_once():
    """After Ctrl-C, a worker that dies of the launcher's own SIGTERM, or Ctrl-C pressed again, must not interrupt
    the launcher a second time: that breaks off Beam's clean-up (and the watch's) at any point."""
    handler = signal.getsignal(signal.SIGINT)
    watch = RunWatch()
    try:
        with watch:
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(10)
            _fail_in_thread(RuntimeError("Worker subprocess exited with return code -15"))  # Beam's waiting thread
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pytest.fail("the launcher was interrupted a second time")
    assert watch.interrupted and watch.dead_worker_status is None
    assert signal.getsignal(signal.SIGINT) is handler


def test_ctrl_c_during_the_clean_up_is_noted_and_the_clean_up_finishes(monkeypatch):
    """Ctrl-C as a finished run's watch ends: the watch still points standard error back and restores the handler,
    and the run counts as interrupted."""
    handler, stderr = signal.getsignal(signal.SIGINT), os.readlink("/proc/self/fd/2")
    watch = RunWatch(quiet_workers=True)
    saved = os.dup(2)
    try:
        try:
            with watch:
                assert os.readlink("/proc/self/fd/2") == os.devnull
                monkeypatch.setattr(watch, "_unwatch_stages", lambda: os.kill(os.getpid(), signal.SIGINT))
        except KeyboardInterrupt:
            pytest.fail("the clean-up was broken off")
        assert watch.interrupted
        assert os.readlink("/proc/self/fd/2") == stderr and signal.getsignal(signal.SIGINT) is handler
    finally:  # where the watch did not
        os.dup2(saved, 2)
        os.close(saved)
        signal.signal(signal.SIGINT, handler)
