"""Long-running processes of a local cluster: each in a session (process group) of its own, stopped by its group.

A daemon's group is its own, not the launching command's, so that Ctrl-C in a terminal reaches only the command,
which then stops its daemons in order; and so that one daemon (one TaskManager) can be stopped or lost alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bertcorpus.pipeline.errors import UserError

STOP_GRACE_SECONDS = 10.0
START_TIMEOUT_SECONDS = 240.0  # a JVM on a loaded 2-core machine takes up to a minute to come up


@dataclass
class Daemon:
    name: str
    process: subprocess.Popen
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def last_words(self) -> str:
        """The daemon log's last line that says something, for an error message."""
        try:
            lines = [line.strip() for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        errors = [line for line in lines if "Exception" in line or "ERROR" in line or "rror:" in line]
        return (errors or lines or [""])[-1][:300]

    def stop(self) -> None:
        stop_group(self.process)


class LocalCluster:
    """What the local Flink and Spark clusters share: a leader (the JobManager, the master) and its followers (the
    TaskManagers, the workers), each a daemon, watched while the cluster comes up and stopped together."""

    def leader(self) -> Daemon | None:
        raise NotImplementedError

    def followers(self) -> list[Daemon]:
        raise NotImplementedError

    def daemons(self) -> list[Daemon]:
        """The followers, then the leader: the order they stop in."""
        return [*self.followers(), *self._leaders()]

    def wait_for(self, ready: Callable[[], bool], what: str) -> float:
        """Seconds until ready() (wait_until), while every daemon started so far stays up."""
        return wait_until(ready, what, [*self._leaders(), *self.followers()], START_TIMEOUT_SECONDS)

    def _leaders(self) -> list[Daemon]:
        """The leader, once started."""
        leader = self.leader()
        return [leader] if leader else []

    def stop(self) -> None:
        for daemon in self.daemons():
            daemon.stop()


def start(name: str, command: list[str], log: Path, environment: dict[str, str], cwd: Path | None = None) -> Daemon:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=cwd,
            start_new_session=True,
        )
    return Daemon(name, process, log)


def stop_group(process: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM to the process's group, SIGKILL to what is left of it after grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, grace)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # the leader may be gone while others of its group linger (a JVM's children)
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def http_json(url: str, timeout: float = 2.0):
    """GET url and parse its JSON body; OSError (refused, timed out, not JSON) where that fails."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, ValueError) as e:
        raise OSError(str(getattr(e, "reason", e))) from e


def wait_until(ready: Callable[[], bool], what: str, daemons: list[Daemon], timeout: float) -> float:
    """Poll ready() until true; seconds it took. A daemon that exits meanwhile, or the timeout, is one line."""
    started = time.monotonic()
    while True:
        for daemon in daemons:
            if not daemon.alive():
                raise UserError(
                    f"{daemon.name} exited (status {daemon.process.returncode}) before {what}; "
                    f"{daemon.log}: {daemon.last_words()}"
                )
        try:
            if ready():
                return time.monotonic() - started
        except OSError:
            pass
        if time.monotonic() - started > timeout:
            raise UserError(f"{what} did not happen within {timeout:.0f} s; see the logs in {daemons[0].log.parent}")
        time.sleep(0.5)
