"""Worker packaging: the Dockerfile matches pyproject.toml, and Beam's staging can build our sdist offline."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_dockerfile_base_image_and_dependencies_match_pyproject():
    instructions = dockerfile_instructions()
    assert instructions[:2] == [("ARG", "BEAM_VERSION=2.77.0"), ("FROM", "apache/beam_python3.11_sdk:${BEAM_VERSION}")]
    requirements = []
    for kind, arg in instructions:
        if kind == "RUN" and "pip install" in arg:
            for command in arg.split("&&"):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    requirements += [w for w in words[2:] if not w.startswith("-") and w != "."]
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(requirements) == sorted(declared)
    assert not any(r.lower().startswith(("tensorflow", "keras")) for r in requirements)
    copied = {source for kind, arg in instructions if kind == "COPY" for source in arg.split()[:-1]}
    # the package with its package data (the demo's samples among them) is the plain tree under src/
    assert {"src", "beam_jobs.yaml", "pyproject.toml"} <= copied
    assert not [p for p in (ROOT / "src").rglob("*") if p.is_symlink()]


def package_files() -> set[str]:
    """The files of the package in the checkout, as a wheel names them (bertcorpus/...): its modules and the
    package data that pyproject.toml names."""
    return {
        str(p.relative_to(ROOT / "src"))
        for p in (ROOT / "src" / "bertcorpus").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.parametrize("setup_file", ["setup.py", "pyproject.toml"])
def test_beam_staging_builds_an_sdist_with_every_package(tmp_path, setup_file):
    from apache_beam.runners.portability.stager import Stager

    tarball = Stager._build_setup_package(str(ROOT / setup_file), str(tmp_path))
    members = {m.name.split("/", 1)[1]: m for m in tarfile.open(tarball).getmembers() if "/" in m.name}
    for module in (*PACKAGED, "src/bertcorpus/pipeline/cli/commands.py", "src/bertcorpus/transforms/tfrecord.py"):
        assert module in members and members[module].isfile(), module
    in_sdist = [name for name in members if name.startswith("src/bertcorpus/") and members[name].isfile()]
    assert len(in_sdist) == len(set(in_sdist))  # each file once
    assert {name.removeprefix("src/") for name in in_sdist} == package_files()


# What an installed bertcorpus needs from each kind of package folder, the demo's samples included.
PACKAGED = (
    "src/bertcorpus/__init__.py",
    "src/bertcorpus/pipeline/create/job.py",
    "src/bertcorpus/wordpiece/tokenizer.py",
    "src/bertcorpus/trainer/loader.py",
    "src/bertcorpus/pipeline/cli/demo-samples/sources.yaml",
    "src/bertcorpus/pipeline/cli/demo-samples/wiki/DATA.md",
    "src/bertcorpus/pipeline/cli/demo-samples/wiki/enwiki-2014-sample-truncated.xml.bz2",
    "src/bertcorpus/pipeline/cli/demo-samples/books/DATA.md",
    "src/bertcorpus/pipeline/cli/demo-samples/books/gutenberg_utf8/84-0.txt",
)


def test_a_wheel_holds_the_files_themselves(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp_path, ROOT],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("bertcorpus-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in PACKAGED:
        assert path.removeprefix("src/") in names, path
    packaged = [n for n in names if n.startswith("bertcorpus/")]
    assert len(packaged) == len(set(packaged)) and set(packaged) == package_files()  # every file, each once
    samples = [n for n in names if n.endswith(".xml.bz2")]
    on_disk = {n: (ROOT / "src" / n).resolve().stat().st_size for n in samples}
    assert samples and all(zipfile.ZipFile(wheel).getinfo(n).file_size == on_disk[n] > 20_000 for n in samples)


def test_the_build_system_is_in_every_environment_the_package_is_installed_in():
    """Beam stages the package for Dataflow with `python -m build --no-isolation --sdist` in the launching
    environment (no PyPI there): every build requirement must come with the package itself. `wheel` did not (an
    sdist needs none): in a `pip install -e .` environment the build stopped at "ERROR Unmet dependencies ... wheel",
    and only Beam's fallback to `setup.py sdist` staged the package, after a line that looked like a failure."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed_with = {Requirement(r).name for r in project["project"]["dependencies"]}
    needed = {Requirement(r).name for r in project["build-system"]["requires"]}
    assert needed <= installed_with, needed - installed_with
    assert {"setuptools", "build"} <= installed_with  # the backend, and the frontend Beam calls


def test_graph_command_draws_a_job_offline(tmp_path, capsys, monkeypatch):
    from conftest import run_cli

    monkeypatch.chdir(ROOT)  # the jobs file is ./beam_jobs.yaml
    assert run_cli("graph", "pretraining-128", "--output", tmp_path) == 0
    dot = (tmp_path / "pretraining-128.dot").read_text()
    for step in (
        "read documents",
        "group into buckets",
        "build instances",
        "group into shards",
        "write shards",
        "publish",
    ):
        assert step in dot
    assert str(tmp_path / "pretraining-128.dot") in capsys.readouterr().out
