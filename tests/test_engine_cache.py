"""The engines cache checks what it holds (pipeline/engines/engine_cache.py): each item records the sha256 of its
files as it is built, a damaged item (a truncated job server jar) is named in one line and built again, and a jar
that cannot be used names the cache entry and how to build it again. The cache here is a temporary folder: the real
one (~/.cache/bertcorpus/engines) is never touched."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from bertcorpus.pipeline.engines import engine_cache
from bertcorpus.pipeline.errors import UserError

from conftest import SAMPLE_TEXT, VOCAB, run_cli
from gcs_server import free_port


def write_jar(path: Path) -> Path:
    """A jar (a zip) of a few hundred KB that names the Beam Flink runner, as a job server jar does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr(f"META-INF/maven/org.apache.beam/beam-runners-flink-{engine_cache.FLINK_MINOR}/pom.properties", "")
        for n in range(50):
            jar.writestr(f"org/example/Class{n}.class", bytes(range(256)) * 40)
    return path


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "engines"
    monkeypatch.setenv("BERTCORPUS_ENGINES_CACHE", str(folder))
    return folder


def test_a_truncated_jar_in_an_item_is_named_and_built_again(cache, capsys):
    builds = []

    def build(folder: Path) -> None:
        builds.append(folder)
        write_jar(folder / "built.jar")

    target = cache / "build" / "job-server"
    assert engine_cache._build_atomically(target, build) == target and len(builds) == 1
    record = json.loads((target / engine_cache.CONTENTS).read_text())
    assert list(record) == ["built.jar"] and len(record["built.jar"]) == 64
    engine_cache._build_atomically(target, build)
    assert len(builds) == 1 and capsys.readouterr().err == ""  # an intact item is taken as it is
    truncate(target / "built.jar")
    engine_cache._build_atomically(target, build)
    assert len(builds) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"cluster: the cached {target} is damaged: built.jar differs from what was built; removing it and "
        "building it again"
    ]
    zipfile.ZipFile(target / "built.jar").close()  # whole again
    (target / "built.jar").unlink()
    assert engine_cache.damage(target) == "built.jar is missing"


def test_an_item_built_before_records_has_its_jars_checked_then_recorded(cache):
    item = cache / "flink-old"
    write_jar(item / "lib" / "flink-dist.jar")
    write_jar(item / "opt" / "other.jar")
    assert engine_cache.damage(item) is None and (item / engine_cache.CONTENTS).exists()
    (item / engine_cache.CONTENTS).unlink()
    truncate(item / "opt" / "other.jar")
    problem = engine_cache.damage(item)
    assert problem.startswith("opt/other.jar is not a whole jar: ") and not (item / engine_cache.CONTENTS).exists()


def test_fetch_only_rebuilds_a_damaged_job_server_jar(cache, monkeypatch, capsys):
    """`cluster flink --fetch-only` on a cache whose job server jar was truncated: the entry is named and built
    again (Maven stands in here: it writes a whole jar where `mvn package` would)."""
    home = cache / f"flink-{engine_cache.FLINK_VERSION}"
    write_jar(home / "lib" / f"flink-dist-{engine_cache.FLINK_VERSION}.jar")
    engine_cache._record_contents(home)
    maven_runs = []

    def maven(command: list[str], what: str, cwd: Path | None = None) -> None:  # what: "building JAR_NAME"
        maven_runs.append(what)
        write_jar(cwd / "target" / what.removeprefix("building "))

    monkeypatch.setattr(engine_cache, "_run", maven)
    monkeypatch.setattr(engine_cache, "require_tool", lambda name, why: name)
    monkeypatch.setattr(engine_cache, "require_java", lambda: "java")
    assert run_cli("cluster", "flink", "--fetch-only") == 0
    built = engine_cache.flink_job_server_jar()
    assert len(maven_runs) == 1
    truncate(built)
    capsys.readouterr()
    assert run_cli("cluster", "flink", "--fetch-only") == 0
    err = capsys.readouterr().err
    assert f"cluster: the cached {built.parent} is damaged: built.jar differs from what was built" in err
    assert len(maven_runs) == 2
    zipfile.ZipFile(built).close()


def test_a_cached_jar_that_is_not_a_jar_names_the_way_to_build_it_again(cache, tmp_path, capsys):
    jar = write_jar(cache / "build" / "job-server" / "built.jar")
    truncate(jar)
    out = tmp_path / "out"
    options = [
        "--runner=FlinkRunner",
        f"--flink_master=127.0.0.1:{free_port()}",
        "--flink_version=1.19",
        f"--flink_job_server_jar={jar}",
        "--environment_type=EXTERNAL",
        f"--environment_config=127.0.0.1:{free_port()}",
    ]
    assert run_cli("create", "--input", SAMPLE_TEXT, "--vocab", VOCAB, "--output", out, *options) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"bertcorpus create: error: --flink_job_server_jar {jar}: not a jar (")
    assert line.endswith(
        "; it lies in the engines cache: `bertcorpus cluster flink --fetch-only` (or spark) checks what the cache "
        "holds and builds a damaged item again"
    )
    assert not out.exists()


def test_a_fetch_that_fails_says_to_fetch_where_there_is_network_first():
    """A first start inside a network namespace cannot download: the line says how to fill the cache first."""
    command = [sys.executable, "-c", "import sys; sys.exit('ERROR: Could not find a version (network unreachable)')"]
    with pytest.raises(UserError) as e:
        engine_cache._run(command, "downloading apache-flink-libraries==1.19.3")
    assert str(e.value).startswith("downloading apache-flink-libraries==1.19.3 failed: ")
    assert "ERROR: Could not find a version (network unreachable)" in str(e.value)
    assert str(e.value).endswith(
        "; without network here (a network namespace, an offline host), fetch where there is network first: "
        "`bertcorpus cluster flink --fetch-only` (or spark) fills the cache that a later start only reads"
    )
