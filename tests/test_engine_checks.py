"""A job sent to Flink or Spark that cannot run there is refused in one line before any work: no output folder, no
job server started, no traceback (pipeline/engines/engine_checks.py). The checks that need a running cluster (a
version that differs, no worker pool) are in tests/test_engines_flink.py."""

from __future__ import annotations

import socket
import zipfile
from pathlib import Path

import apache_beam
from apache_beam.options.pipeline_options import PipelineOptions

from bertcorpus.pipeline.engines.engine_checks import check_engine, version_skew

from conftest import SAMPLE_TEXT, VOCAB, run_cli
from engine_cluster import flink_jar
from gcs_server import free_port


def refused(tmp_path: Path, capsys, *options) -> str:
    """create with the options: exit 2 and one error line, nothing written."""
    out = tmp_path / "out"
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", out, *options) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert not out.exists()
    return err.strip()


def flink_options(tmp_path: Path, **changes) -> list[str]:
    values = {
        "flink_master": f"127.0.0.1:{free_port()}",
        "flink_version": "1.19",
        "flink_job_server_jar": flink_jar(tmp_path, "1.19"),
        "environment_type": "EXTERNAL",
        "environment_config": f"127.0.0.1:{free_port()}",
        **changes,
    }
    return ["--runner", "FlinkRunner", *(f"--{k}={v}" for k, v in values.items() if v is not None)]


def test_flink_without_an_environment_type_is_refused_before_docker(tmp_path, capsys):
    error = refused(tmp_path, capsys, *flink_options(tmp_path, environment_type=None))
    assert error.startswith("bertcorpus create: error: --runner FlinkRunner needs --environment_type: without it")


def test_a_missing_job_server_jar_is_refused(tmp_path, capsys):
    error = refused(tmp_path, capsys, *flink_options(tmp_path, flink_job_server_jar=tmp_path / "no" / "server.jar"))
    assert f"--flink_job_server_jar {tmp_path / 'no' / 'server.jar'}: no such file" in error


def test_a_job_server_for_another_flink_version_is_refused(tmp_path, capsys):
    error = refused(tmp_path, capsys, *flink_options(tmp_path, flink_version="1.20"))
    assert "built for Flink 1.19, but --flink_version is 1.20" in error


def test_no_flink_at_the_master_is_one_line_not_a_retry_loop(tmp_path, capsys):
    options = flink_options(tmp_path)
    master = next(o for o in options if o.startswith("--flink_master=")).split("=", 1)[1]
    error = refused(tmp_path, capsys, *options)
    assert f"the Flink master cannot be reached at --flink_master {master}" in error


def test_no_spark_master_is_one_line(tmp_path, capsys):
    jar = tmp_path / "spark-job-server.jar"
    jar.write_bytes(b"")
    port = free_port()
    options = [
        "--runner",
        "SparkRunner",
        f"--spark_master_url=spark://127.0.0.1:{port}",
        f"--spark_job_server_jar={jar}",
    ]
    error = refused(tmp_path, capsys, *options, "--environment_type=EXTERNAL", f"--environment_config=127.0.0.1:{port}")
    assert f"the Spark master cannot be reached at --spark_master_url spark://127.0.0.1:{port}" in error


def test_a_cluster_with_bad_numbers_is_refused_before_anything_starts(tmp_path, capsys):
    for flags, message in (
        (["--workers", "0"], "--workers and --slots must be at least 1"),
        (["--restart-attempts", "-1"], "--restart-attempts must be 0 or more"),
    ):
        assert run_cli("cluster", "flink", "--state-dir", tmp_path / "state", *flags) == 2
        assert capsys.readouterr().err.strip() == f"bertcorpus cluster: error: {message}"
        assert not (tmp_path / "state").exists()


def runner_jar(path: Path, runner: str, version: str | None) -> Path:
    """A jar that bundles Beam's runner `runner` of release `version` (its pom.properties), as a job server does."""
    with zipfile.ZipFile(path, "w") as archive:
        if version is not None:
            archive.writestr(
                f"META-INF/maven/org.apache.beam/beam-runners-{runner}/pom.properties", f"version={version}\n"
            )
    return path


def test_a_job_server_of_another_beam_release_is_said_in_one_line(tmp_path, capsys):
    """The job servers are Beam 2.62 (Java), the SDK the project's Beam (Python): a run that passes every check is
    told so in one line; a jar of the SDK's own release, or one that names none, says nothing."""
    with socket.create_server(("127.0.0.1", 0)) as master, socket.create_server(("127.0.0.1", 0)) as pool:
        options = [
            "--runner=SparkRunner",
            f"--spark_master_url=spark://127.0.0.1:{master.getsockname()[1]}",
            "--environment_type=EXTERNAL",
            f"--environment_config=127.0.0.1:{pool.getsockname()[1]}",
        ]
        for version, said in (("2.62.0", True), (apache_beam.__version__, False), (None, False)):
            jar = runner_jar(tmp_path / f"spark-{version}.jar", "spark-3", version)
            check_engine(PipelineOptions([*options, f"--spark_job_server_jar={jar}"]))
            err = capsys.readouterr().err.splitlines()
            if said:
                assert err == [
                    f"note: the job server is Beam 2.62.0 (Java), the launcher and its SDK workers Beam "
                    f"{apache_beam.__version__} (Python): Beam does not promise that two releases work together; "
                    "bertcorpus's tests compare every job's bytes on its own job servers (Beam 2.62.0) with the "
                    "direct runner's (docs/engines.md, version skew)"
                ]
            else:
                assert err == []
    assert version_skew({"flink_job_server_jar": str(runner_jar(tmp_path / "f.jar", "flink-1.19", "2.62.0"))})
