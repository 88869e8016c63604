"""A command run in a process of its own, with the peak resident memory that process reached."""

from __future__ import annotations

import os
import signal
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


# The command starts from this small launcher, not from the test process: a process started by fork or vfork and
# exec inherits its parent's peak RSS as its own starting peak (Linux keeps the high-water mark across exec), and a
# test process that has loaded TensorFlow and PyTorch holds gigabytes. The launcher writes "peak-KiB wait-status".
_LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss} {status}")
"""


def run_measured(*words, workdir: Path, timeout: float = 600) -> Finished:
    """`python -m bertcorpus WORDS` in its own process, with its peak RSS (run_command_measured)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    return run_command_measured([sys.executable, "-m", "bertcorpus", *words], workdir, timeout, env=env)


def run_command_measured(argv: list, workdir: Path, timeout: float = 600, env: dict | None = None) -> Finished:
    """A command in its own process; the peak RSS is the kernel's for that process alone (wait4), not the whole
    test session's children, nor the test process's own."""
    out, err, usage = workdir / "stdout.txt", workdir / "stderr.txt", workdir / "usage.txt"
    command = [sys.executable, "-c", _LAUNCHER, usage, *map(str, argv)]
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        launcher = subprocess.Popen(command, cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            launcher.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
            raise
    if launcher.returncode:
        raise RuntimeError(f"the launcher of {argv} failed: {err.read_text()[-2000:]}")
    peak_kib, status = map(int, usage.read_text().split())
    # Linux gives ru_maxrss in KiB
    return Finished(os.waitstatus_to_exitcode(status), out.read_text(), err.read_text(), peak_kib * 1024)
