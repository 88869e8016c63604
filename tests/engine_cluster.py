"""A local Flink or Spark cluster for the tests, started with `bertcorpus cluster` inside a network namespace.

Beam Java's gRPC servers (the job server's ports, the Fn API servers inside every TaskManager and executor) listen
on every interface, and nothing in Beam changes that. The tests' rule is that what they start listens on the
loopback only, so the cluster, the worker pool and every job sent to it run inside a network namespace whose only
interface is lo: `ip netns exec NAME ...` for each process, REST queries included. Where no namespace can be made
(not root, no iproute2), or Java, Maven or the downloads are missing, the tests skip with one line saying which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BERTCORPUS = [sys.executable, "-m", "bertcorpus"]
START_TIMEOUT = 600  # a cold start on a loaded 2-core machine: three JVMs, each up to a few minutes
JOB_TIMEOUT = 900


def skip_reason() -> str | None:
    """Why the engine tests cannot run here, or None."""
    if os.geteuid() != 0:
        return (
            "the engine tests need root to make a network namespace (ip netns), which keeps Beam's wildcard "
            "binds off the network"
        )
    for tool, why in (("ip", "iproute2"), ("java", "a Java runtime"), ("mvn", "Maven")):
        if shutil.which(tool) is None:
            return f"the engine tests need `{tool}` ({why}) on PATH"
    return None


@contextmanager
def network_namespace() -> Iterator[list[str]]:
    """A network namespace with only the loopback, up; yields the command prefix that runs a process in it."""
    name = f"bertcorpus-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace: `ip netns add` said {made.stderr.strip()}")
    try:
        prefix = ["ip", "netns", "exec", name]
        subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], check=True)
        yield prefix
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def flink_jar(folder: Path, minor: str) -> Path:
    """A jar that names the Beam Flink runner it bundles as a job server jar does (the check reads only that)."""
    jar = folder / f"job-server-{minor}.jar"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr(f"META-INF/maven/org.apache.beam/beam-runners-flink-{minor}/pom.properties", "version=1\n")
    return jar


def assert_same_tree(out: Path, reference: Path, ignore: tuple[str, ...] = ()) -> None:
    """Every file under out is the file under reference, byte for byte, but manifest.json, which is the same but
    for the output path it names; folders named in ignore (a job's scratch output) are left out."""

    def files(root: Path) -> dict[str, Path]:
        return {
            str(p.relative_to(root)): p
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in ignore
        }

    found, expected = files(out), files(reference)
    assert found.keys() == expected.keys()
    for name, path in found.items():
        if path.name == "manifest.json":
            assert json.loads(path.read_text().replace(str(out), str(reference))) == json.loads(
                expected[name].read_text()
            )
        else:
            assert path.read_bytes() == expected[name].read_bytes(), name


def summary_lines(stdout: str, output: Path) -> list[str]:
    """A command's summary, without its timing lines (a local run also times each stage) and a Flink run's restarts,
    with its output path as OUTPUT, and each line's spaces as one (the label column is as wide as the longest label,
    timings included)."""
    timing = re.compile(r" finished in |^\s+time\s+[\d.]+ s$|^\s+time in |^\s+runner restarts\s")
    return [
        " ".join(line.replace(str(output), "OUTPUT").split()) for line in stdout.splitlines() if not timing.search(line)
    ]


def bertcorpus_command(*args) -> list[str]:
    return [*BERTCORPUS, *map(str, args)]


def fetch(engine: str) -> None:
    """Fetch and build what the engine needs (cached after the first time), outside the namespace: it downloads."""
    done = subprocess.run(bertcorpus_command("cluster", engine, "--fetch-only"), capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        pytest.skip(f"`bertcorpus cluster {engine} --fetch-only` failed: {lines[-1] if lines else done.returncode}")


@dataclass
class Cluster:
    prefix: list[str]  # runs a command inside the cluster's network namespace
    state: Path
    process: subprocess.Popen

    @property
    def record(self) -> dict:
        return json.loads((self.state / "cluster.json").read_text())

    @property
    def options(self) -> list[str]:
        return self.record["options"]

    def run(self, *argv, options: list[str] | None = None, timeout: float = JOB_TIMEOUT) -> subprocess.CompletedProcess:
        """A bertcorpus command inside the namespace, with the cluster's options (or the options given) appended."""
        environment = {**os.environ, **self.record["environment"]}
        return subprocess.run(
            [*self.prefix, *bertcorpus_command(*argv, *(self.options if options is None else options))],
            capture_output=True,
            text=True,
            env=environment,
            cwd=ROOT,
            timeout=timeout,
        )

    def launch(self, *argv) -> subprocess.Popen:
        """As run, in the background."""
        environment = {**os.environ, **self.record["environment"]}
        return subprocess.Popen(
            [*self.prefix, *bertcorpus_command(*argv, *self.options)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            cwd=ROOT,
        )

    def get(self, url: str):
        """GET a JSON document from inside the namespace (Flink's REST API, Spark's UI)."""
        return self.get_all([url])[0]

    def get_all(self, urls: list[str]) -> list:
        """GET several JSON documents from inside the namespace, in one process."""
        script = (
            "import json, sys, urllib.request; "
            "json.dump([json.load(urllib.request.urlopen(u, timeout=10)) for u in sys.argv[1:]], sys.stdout)"
        )
        done = subprocess.run([*self.prefix, sys.executable, "-c", script, *urls], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def pool_log(self) -> str:
        return Path(self.record["worker_pool"]["log"]).read_text()


@contextmanager
def running_cluster(engine: str, workdir: Path, *extra: str) -> Iterator[Cluster]:
    """`bertcorpus cluster ENGINE` in a fresh network namespace, until it has written cluster.json; stopped (SIGTERM,
    then its daemons' process groups) afterwards, and the namespace removed."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    fetch(engine)
    state = workdir / f"{engine}-state"
    with network_namespace() as prefix:
        log = open(workdir / f"{engine}-cluster.log", "w")
        process = subprocess.Popen(
            [*prefix, *bertcorpus_command("cluster", engine, "--state-dir", state, *extra)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        cluster = Cluster(prefix, state, process)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not (state / "cluster.json").exists():
                assert process.poll() is None, (
                    f"the cluster did not start: {(workdir / f'{engine}-cluster.log').read_text()}"
                )
                assert time.monotonic() < deadline, f"the cluster did not start within {START_TIMEOUT} s"
                time.sleep(0.5)
            daemon_pids = list(cluster.record["daemons"].values())
            yield cluster
        finally:
            _stop(process, locals().get("daemon_pids", []))
            log.close()


def _stop(process: subprocess.Popen, daemon_pids: list[int]) -> None:
    import signal

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for pid in daemon_pids:  # the command stops them; a command that could not leaves them to this
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
