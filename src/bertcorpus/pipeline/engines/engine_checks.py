"""Checks, before any work, that a job sent to Flink, Spark or a portable job service can run there.

Each misconfiguration would otherwise surface late and long: Beam starts its job server, translates the job and
submits it before the mistake shows, as a Java stack trace one to three minutes later (a stopped cluster: 21
submission attempts; no worker pool: the first Python stage fails; no --environment_type: Docker is tried). Each
check here is one line, within about two seconds. A run that passes them hears, in one line, when its job server is
of another Beam release than the launcher's Python SDK (version_skew).
"""

from __future__ import annotations

import re
import socket
import sys
import zipfile
from pathlib import Path

import apache_beam
from apache_beam.options.pipeline_options import PipelineOptions

from bertcorpus.pipeline.engines.daemons import http_json
from bertcorpus.pipeline.engines.engine_cache import BEAM_JAVA_VERSION, rebuild_hint
from bertcorpus.pipeline.errors import UserError

PROBE_SECONDS = 2.0
FLINK_LOCAL_MASTERS = {"[local]", "[auto]"}  # Beam then runs an embedded Flink with the DoFns in the launcher
_JAR_FLINK_MINOR = re.compile(r"META-INF/maven/org\.apache\.beam/beam-runners-flink-(\d+\.\d+)/pom\.properties")
_JAR_RUNNER_POM = re.compile(
    r"META-INF/maven/org\.apache\.beam/beam-runners-(?:flink-\d+\.\d+|spark-3)/pom\.properties"
)


def runner_name(options: PipelineOptions) -> str:
    return (options.get_all_options().get("runner") or "").rsplit(".", 1)[-1]


def check_engine(options: PipelineOptions) -> None:
    """Refuse, in one line, a portable run that cannot work; a no-op for the direct runner and Dataflow. The checks
    that need no network come first, so that a run with several mistakes hears of the cheapest to fix."""
    runner = runner_name(options)
    if runner not in ("FlinkRunner", "SparkRunner", "PortableRunner"):
        return
    values = options.get_all_options()
    _check_environment_type(runner, values)
    if runner == "FlinkRunner":
        _check_flink(values)
    elif runner == "SparkRunner":
        _check_spark(values)
    _check_worker_pool(values)
    skew = version_skew(values)
    if skew:
        print(f"note: {skew}", file=sys.stderr, flush=True)


def job_server_beam(jar: Path) -> str | None:
    """The Beam release of the runner a job server jar bundles (its Maven pom.properties), or None where unknown."""
    try:
        with zipfile.ZipFile(jar) as archive:
            pom = next((name for name in archive.namelist() if _JAR_RUNNER_POM.fullmatch(name)), None)
            text = archive.read(pom).decode("utf-8", "replace") if pom else ""
    except (OSError, zipfile.BadZipFile):
        return None
    found = re.search(r"^version=(\S+)", text, re.M)
    return found.group(1) if found else None


def version_skew(values: dict) -> str | None:
    """One line when the job server (Java) is of another Beam release than this launcher and its SDK workers
    (Python): Beam promises no compatibility between releases, and nothing else would say so (docs/engines.md)."""
    jar = values.get("flink_job_server_jar") or values.get("spark_job_server_jar")
    java = job_server_beam(Path(jar).expanduser()) if jar and "://" not in jar else None
    python = apache_beam.__version__
    if java is None or java == python:
        return None
    return (
        f"the job server is Beam {java} (Java), the launcher and its SDK workers Beam {python} (Python): Beam "
        "does not promise that two releases work together; bertcorpus's tests compare every job's bytes on its own "
        f"job servers (Beam {BEAM_JAVA_VERSION}) with the direct runner's (docs/engines.md, version skew)"
    )


def _check_environment_type(runner: str, values: dict) -> None:
    environment = (values.get("environment_type") or "").upper()
    local_master = (runner == "FlinkRunner" and (values.get("flink_master") or "[auto]") in FLINK_LOCAL_MASTERS) or (
        runner == "SparkRunner" and (values.get("spark_master_url") or "local[4]").startswith("local")
    )
    if not environment and not local_master:
        raise UserError(
            f"--runner {runner} needs --environment_type: without it Beam runs the Python steps in Docker "
            "containers; use --environment_type EXTERNAL --environment_config HOST:PORT with a worker pool next to "
            "each worker (`bertcorpus cluster worker-pool`, docs/engines.md)"
        )
    if environment == "EXTERNAL" and not values.get("environment_config"):
        raise UserError("--environment_type EXTERNAL needs --environment_config HOST:PORT of an SDK worker pool")


def _check_worker_pool(values: dict) -> None:
    address = values.get("environment_config") or ""
    if (values.get("environment_type") or "").upper() == "EXTERNAL" and not _accepts(address):
        raise UserError(
            f"no SDK worker pool answers at --environment_config {address}: start one there "
            "(`bertcorpus cluster worker-pool --pool-port PORT`, docs/engines.md)"
        )


def _accepts(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=PROBE_SECONDS):
            return True
    except (OSError, ValueError):
        return False


def _check_jar(flag: str, jar: str | None, how: str) -> Path | None:
    if not jar:
        raise UserError(
            f"--{flag} is required: Beam would download its job server from Maven Central, where none is "
            f"published for this Beam release; {how}"
        )
    if "://" in jar:
        return None
    path = Path(jar).expanduser()
    if not path.is_file():
        raise UserError(f"--{flag} {jar}: no such file; {how}")
    return path


def jar_flink_minor(jar: Path) -> str | None:
    """The Flink minor version a Beam Flink job server jar was built for (from its bundled runner's pom entry)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            for name in archive.namelist():
                found = _JAR_FLINK_MINOR.match(name)
                if found:
                    return found.group(1)
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError(f"--flink_job_server_jar {jar}: not a jar ({e}){rebuild_hint(jar)}") from e
    return None


def _check_flink(values: dict) -> None:
    jar = _check_jar(
        "flink_job_server_jar",
        values.get("flink_job_server_jar"),
        "`bertcorpus cluster flink` builds one and prints its path (docs/engines.md)",
    )
    wanted = values.get("flink_version")
    built_for = jar_flink_minor(jar) if jar else None
    if built_for and wanted and built_for != wanted:
        raise UserError(
            f"--flink_job_server_jar is built for Flink {built_for}, but --flink_version is {wanted}: they must agree"
        )
    master = values.get("flink_master") or "[auto]"
    if master in FLINK_LOCAL_MASTERS:
        return
    url = master if re.match(r"^https?://", master) else f"http://{master}"
    try:
        config = http_json(f"{url.rstrip('/')}/config", timeout=PROBE_SECONDS)
    except OSError as e:
        raise UserError(f"the Flink master cannot be reached at --flink_master {master}: {e}") from e
    running = str(config.get("flink-version", ""))
    minor = ".".join(running.split(".")[:2])
    for what, expected in (("--flink_version", wanted), ("the job server jar", built_for)):
        if expected and minor != expected:
            raise UserError(
                f"the Flink cluster at {master} runs Flink {running}, but {what} is for Flink {expected}: "
                "a job server speaks only its own Flink minor version"
            )
    _check_slots(url, master, values.get("parallelism"))


def _check_slots(url: str, master: str, parallelism) -> None:
    if not parallelism or int(parallelism) <= 0:
        return
    try:
        managers = http_json(f"{url.rstrip('/')}/taskmanagers", timeout=PROBE_SECONDS).get("taskmanagers", [])
    except OSError as e:
        raise UserError(f"the Flink master at {master} did not list its TaskManagers: {e}") from e
    free = sum(int(m.get("freeSlots", 0)) for m in managers)
    if free < int(parallelism):
        raise UserError(
            f"--parallelism {parallelism} needs {parallelism} free task slots, but the Flink cluster at {master} has "
            f"{free} ({len(managers)} TaskManagers); lower --parallelism or add TaskManagers"
        )


def _check_spark(values: dict) -> None:
    _check_jar(
        "spark_job_server_jar",
        values.get("spark_job_server_jar"),
        "`bertcorpus cluster spark` builds one and prints its path (docs/engines.md)",
    )
    master = values.get("spark_master_url") or "local[4]"
    found = re.match(r"^spark://([^/]+)$", master)
    if found and not _accepts(found.group(1)):
        raise UserError(f"the Spark master cannot be reached at --spark_master_url {master}")
