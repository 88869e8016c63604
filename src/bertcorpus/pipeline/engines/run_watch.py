"""A local run watched for Ctrl-C (SIGINT), SIGTERM and worker processes that die, so that each ends in one line.

While a job runs, Ctrl-C or SIGTERM is noted before it interrupts the launcher, and it stops the worker processes
the run started (which the terminal's Ctrl-C also reaches). Beam turns the interrupt into other errors (a
RuntimeError naming the step it hit, or a worker that went away); whatever error the run ends with, `interrupted`
says it was stopped, and `stop()` is the exception that says by which signal. A worker process that dies for
another reason is noted with the stage that was running, and stops the run the same way (Beam could otherwise wait
for it forever). Exceptions in Beam's threads are logged (shown with --verbose) rather than printed, and so, in
multi_processing mode, is what the worker processes write to standard error: Beam's workers print there every failed
bundle's traceback, which the launcher already has, and their own on Ctrl-C. The watch also times the stages as
Beam's local runner runs them, one after another (`stage_times`).

The launcher is interrupted once. A second signal (Ctrl-C pressed again, or one arriving while the watch sets
itself up or ends) is only noted: raised again, it would break off Beam's clean-up or the watch's own, and a
half-done clean-up can leave a thread that keeps the process from exiting, or standard error pointing nowhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import threading
import time

from bertcorpus.pipeline.errors import STOP_SIGNALS, stop_exception

# Beam's local runner logs the stage of each bundle it runs here, at debug level.
BUNDLE_LOGGER = "apache_beam.runners.portability.fn_api_runner.fn_runner.run_bundle"
_WORKER_EXIT = re.compile(r"Worker subprocess exited with return code (-?\d+)")
_REFERENCE = re.compile(r"^ref_AppliedPTransform_(.+)_\d+$")
_INTERRUPTED_STATUSES = {-signal.SIGINT, 128 + signal.SIGINT}  # a worker's Ctrl-C, directly or through a shell


class RunWatch:
    def __init__(self, step_names: list[str] = (), quiet_workers: bool = False):
        """step_names: the job's step labels, to name a stage by them. quiet_workers: worker processes started
        during the run write their standard error nowhere."""
        self.step_names = list(step_names)
        self.quiet_workers = quiet_workers
        self.interrupted = False
        self.stop_signal: int | None = None  # the first of STOP_SIGNALS to arrive
        self.dead_worker_status: int | None = None  # the exit status of the first worker process that died
        self.stage: str | None = None  # the stage whose bundle ran last
        self.stage_seconds: dict[str, float] = {}  # seconds each stage ran, in the order they first ran
        self._stage_started = 0.0
        self._active = threading.current_thread() is threading.main_thread()
        self._watching = False  # between the set-up and the clean-up
        self._raised = False  # a signal has interrupted the launcher
        self._handlers: dict[int, object] = {}
        self._excepthook = self._stderr = self._stage_handler = None

    def __enter__(self) -> RunWatch:
        if not self._active:
            return self
        self._children_before = _descendants(os.getpid())
        try:
            for signum in STOP_SIGNALS:
                self._handlers[signum] = signal.getsignal(signum)
                signal.signal(signum, self._stop)
            if self.quiet_workers:
                self._stderr = _redirect_stderr_fd(os.devnull)
            self._excepthook, threading.excepthook = threading.excepthook, self._thread_failed
            self._watch_stages()
            self._watching = True
            if self.interrupted:  # a signal that came while standard error was redirected, and was noted
                raise self.stop()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, *exc) -> bool:
        """Undo the set-up, also a partial one. A signal arriving meanwhile is noted, not raised (_stop)."""
        if not self._active:
            return False
        self._watching = False
        if self._stage_handler is not None:
            self._unwatch_stages()
        if self._raised:
            # Processes that Beam started while the interrupt unwound, which would otherwise outlive the launcher
            # (and keep it waiting for them as it exits).
            for pid in _descendants(os.getpid()) - self._children_before:
                _terminate(pid)
            _stop_state_sampler()
        if exc[0] is None and self._excepthook is not None:
            # After a failure Beam's threads may still end with errors of their own (a worker stopped under them)
            # while the command reports the failure: they stay logged, not printed.
            threading.excepthook = self._excepthook
        if self._stderr is not None:
            _restore_stderr_fd(self._stderr)
            self._stderr = None
        for signum, handler in self._handlers.items():  # last: from here on the signals interrupt again
            signal.signal(signum, handler)
        self._handlers = {}
        return False

    @contextlib.contextmanager
    def user_stderr(self):
        """A text stream to where standard error went when the run began, also while worker processes write theirs
        nowhere (quiet_workers). Use it within the watch's `with` block."""
        if self._stderr is None:
            yield sys.stderr
            return
        encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
        with open(os.dup(self._stderr), "w", encoding=encoding, errors="backslashreplace", buffering=1) as stream:
            yield stream

    def stage_times(self) -> list[tuple[str, float]]:
        """(the job's steps in a stage, seconds) for each stage that ran, in order; stages of the same steps summed."""
        times: dict[str, float] = {}
        for stage, seconds in self.stage_seconds.items():
            name = readable_stage(stage, self.step_names)
            times[name] = times.get(name, 0.0) + seconds
        return list(times.items())

    def _stage_began(self, stage: str | None) -> None:
        now = time.monotonic()
        if self.stage is not None:
            self.stage_seconds[self.stage] = self.stage_seconds.get(self.stage, 0.0) + now - self._stage_started
        self.stage, self._stage_started = stage, now

    def stop(self) -> KeyboardInterrupt:
        """The exception for the signal that stopped the run: KeyboardInterrupt, or Terminated for SIGTERM."""
        return stop_exception(self.stop_signal or signal.SIGINT)

    def _stop(self, signum, frame) -> None:
        if self.dead_worker_status is None:  # else a SIGINT sent by _thread_failed
            self.interrupted = True
            self.stop_signal = self.stop_signal or signum
        for pid in _descendants(os.getpid()) - self._children_before:
            _terminate(pid)
        if self._raised or _in_code(frame, _UNINTERRUPTED):
            return
        self._raised = True
        raise self.stop()

    def worker_death(self) -> str:
        """One line on the worker process that died."""
        status = self.dead_worker_status
        signum = -status if status < 0 else status - 128 if status > 128 else None  # a shell reports 128 + N
        how = (
            f"was killed by {signal.Signals(signum).name}"
            if signum in signal.valid_signals()
            else f"exited with status {status}"
        )
        where = f" while running {readable_stage(self.stage, self.step_names)}" if self.stage else ""
        hint = " (out of memory?)" if signum == signal.SIGKILL else ""  # what the kernel's OOM killer sends
        return f"a worker process {how}{where}{hint}; the run stopped and published nothing"

    def _thread_failed(self, args) -> None:
        found = _WORKER_EXIT.search(str(args.exc_value))
        if found and int(found.group(1)) in _INTERRUPTED_STATUSES:
            self.interrupted = True
        elif found and self.dead_worker_status is None and not self._raised and self._watching:
            # (Once the launcher is interrupted, workers die of its SIGTERM: that is no news.)
            self.dead_worker_status = int(found.group(1))
            # The run cannot finish, and Beam may wait for the dead worker forever: stop it as Ctrl-C would.
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        logging.getLogger(__name__).info(
            "in thread %s",
            args.thread.name if args.thread else "?",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )

    def _watch_stages(self) -> None:
        watch = self

        class StageNoted(logging.Handler):
            def emit(self, record):
                if str(record.msg).startswith("Running bundle for stage") and record.args:
                    watch._stage_began(str(record.args[0]))

        logger = logging.getLogger(BUNDLE_LOGGER)
        self._logger_state = logger.level, logger.propagate
        self._stage_handler = StageNoted()
        logger.addHandler(self._stage_handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False  # its debug lines are not for the user

    def _unwatch_stages(self) -> None:
        self._stage_began(self.stage)  # the last stage's time
        logger = logging.getLogger(BUNDLE_LOGGER)
        logger.removeHandler(self._stage_handler)
        logger.level, logger.propagate = self._logger_state


def _stop_state_sampler() -> None:
    """Stop the state sampler of a bundle that an interrupt broke off in this thread (where the in_memory mode
    runs bundles) while the sampler started or stopped. Beam then never stops its thread, which is not a daemon:
    the interpreter would wait for it forever as the command exits."""
    from apache_beam.runners.worker import statesampler

    sampler = statesampler.get_current_tracker()
    if sampler is None or sampler.finished:
        return
    try:
        sampler.stop()
    except (AttributeError, RuntimeError):  # the interrupt came before its thread was made, or started
        pass


def _in_code(frame, codes) -> bool:
    """Whether frame, or a frame it was called from, runs one of codes."""
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def readable_stage(stage: str, step_names: list[str]) -> str:
    """A fused stage's name → the job's own steps in it, two levels deep: 'create pretraining data/write shards'.
    Beam names a step inside a stage by its label, or by the label with each run of other characters made '-'."""
    by_reference = {re.sub(r"[^A-Za-z0-9_-]+", "-", name): name for name in step_names}
    steps = []
    for part in re.split(r"[()+]+", stage):
        reference = _REFERENCE.match(part)
        name = by_reference.get(reference.group(1), part) if reference else part
        step = "/".join(name.split("/")[:2])
        if step and step not in steps:
            steps.append(step)
    return " + ".join(steps) if steps else stage


def _descendants(pid: int) -> set[int]:
    """The processes below pid (Linux; elsewhere none are known)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@contextlib.contextmanager
def stderr_silenced():
    """File descriptor 2 pointed at /dev/null meanwhile: native code (TensorFlow's C++ and absl logging as it loads)
    writes there directly, past Python's logging and its levels."""
    saved = _redirect_stderr_fd(os.devnull)
    try:
        yield
    finally:
        _restore_stderr_fd(saved)


def _redirect_stderr_fd(path: str) -> int:
    """Point file descriptor 2, which new processes inherit, at path; return a copy of the old one. Output to
    sys.stderr meanwhile goes there too."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY)
    os.dup2(target, 2)
    os.close(target)
    return saved


def _restore_stderr_fd(saved: int) -> None:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass  # gone already


# Code that a signal must not break off: the watch's clean-up, and the redirection of standard error, which would
# otherwise stay pointed nowhere.
_UNINTERRUPTED = {RunWatch.__exit__.__code__, _redirect_stderr_fd.__code__, _restore_stderr_fd.__code__}
