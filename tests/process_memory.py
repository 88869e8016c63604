"""A command run in a process of its own, with the peak resident memory that process reached."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_bytes: int


def run_measured(*words, workdir: Path, timeout: float = 600) -> Finished:
    """`python -m bertcorpus WORDS` in its own process; the peak RSS is the kernel's for that process alone (wait4),
    not the whole test session's children."""
    out, err = workdir / "stdout.txt", workdir / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "bertcorpus", *map(str, words)], cwd=ROOT, env=env, stdout=stdout, stderr=stderr
        )
        try:
            _, status, usage = _wait4(process, timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    process.returncode = os.waitstatus_to_exitcode(status)
    # Linux gives ru_maxrss in KiB
    return Finished(process.returncode, out.read_text(), err.read_text(), usage.ru_maxrss * 1024)


def _wait4(process: subprocess.Popen, timeout: float):
    import time

    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            return pid, status, usage
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, timeout)
        time.sleep(0.1)
