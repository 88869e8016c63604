"""Beam's portable Job API on the loopback: Beam's own job service and an external SDK worker pool.

This is the path of Flink, Spark and Dataflow's runner v2: the job is submitted to a job service as a portable
pipeline and runs in SDK workers that a worker pool starts as separate processes, with nothing of the launching
process shared. Both services are Beam's own entry points, started as subprocesses and stopped (their whole
process groups, with the workers) afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gcs_server import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class PortableServices:
    job_port: int
    pool_port: int
    log_dir: Path

    def options(self) -> list[str]:
        return [
            "--runner",
            "PortableRunner",
            "--job_endpoint",
            f"localhost:{self.job_port}",
            "--environment_type",
            "EXTERNAL",
            "--environment_config",
            f"localhost:{self.pool_port}",
        ]

    def workers_started(self) -> int:
        """SDK worker processes the pool has started so far (it logs a line for each)."""
        return (self.log_dir / "worker_pool.log").read_text().count("Starting worker with command")


def _start(args: list[str], log: Path, environment: dict[str, str]) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM to the service and the workers it started (its own process group), SIGKILL if they linger."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def running_services(workdir: Path, extra_environment: dict[str, str]) -> Iterator[PortableServices]:
    """Start the job service and a worker pool whose workers see extra_environment; stop both afterwards."""
    environment = {
        **os.environ,
        **extra_environment,
        # The pool starts each worker as `python -c ...`: this interpreter, with bertcorpus installed.
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
    }
    pool_port, port_file = free_port(), workdir / "job_service.port"
    pool = _start(
        ["apache_beam.runners.worker.worker_pool_main", "--service_port", str(pool_port)],
        workdir / "worker_pool.log",
        environment,
    )
    try:
        service = _start(
            [
                "apache_beam.runners.portability.local_job_service_main",
                "--port",
                "0",
                "--port_file",
                str(port_file),
                "--staging_dir",
                str(workdir / "staging"),
            ],
            workdir / "job_service.log",
            environment,
        )
        try:
            wait_for_port(pool_port, pool, "Beam's worker pool")
            deadline = time.time() + 30
            while not port_file.exists():
                if service.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"Beam's job service did not start: {(workdir / 'job_service.log').read_text()}")
                time.sleep(0.05)
            job_port = int(port_file.read_text())
            wait_for_port(job_port, service, "Beam's job service")
            yield PortableServices(job_port, pool_port, workdir)
        finally:
            _stop_group(service)
    finally:
        _stop_group(pool)
