"""One import namespace: installed, the project is `bertcorpus` and nothing else, so a user's own `trainer`,
`pipeline`, `transforms` or `wordpiece` module never shadows ours, and ours never shadows theirs."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "bertcorpus"
FOLDERS = ("pipeline", "transforms", "wordpiece", "trainer")


def test_every_package_folder_is_installed_under_the_namespace():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"] == {"": "src"}
    # nothing else on the path of an editable install (setuptools' own metadata aside)
    assert [p.name for p in (ROOT / "src").iterdir() if not p.name.endswith(".egg-info")] == ["bertcorpus"]
    found = {".".join(("bertcorpus", *init.parent.relative_to(PACKAGE).parts)) for init in PACKAGE.rglob("__init__.py")}
    assert sorted(tool["packages"]) == sorted(found)
    assert {name.split(".")[1] for name in found if name.count(".") == 1} == set(FOLDERS)


def tracked() -> list[tuple[str, str]]:
    """(mode, path) of every file git tracks."""
    listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [
        (entry.split(b" ", 1)[0].decode(), entry.split(b"\t", 1)[1].decode()) for entry in listed.split(b"\0") if entry
    ]


def test_the_package_is_a_plain_tree_with_one_path_per_file():
    """No link anywhere under src/, none to a folder of code anywhere in the repository, and each of the
    package's modules is a file git lists, once: where git, Python, tracebacks, editors and structure tools all see
    the same path."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    files = tracked()
    links = [path for mode, path in files if mode == "120000"]
    assert not [path for path in links if path.startswith("src/")], links
    for link in links:  # the links that remain (test data that the demo ships) point to data, never to code
        target = (ROOT / link).resolve()
        assert target.is_file() or not list(target.rglob("*.py")), link
    modules = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    assert modules == sorted(path for mode, path in files if path.startswith("src/") and path.endswith(".py"))
    assert sorted(str(p.relative_to(ROOT)) for p in paths_to_the_package()) == modules  # no second way to one


def paths_to_the_package() -> list[Path]:
    """Every path in the checkout, links followed, that reaches a module of the package."""
    found, seen = [], set()
    for folder, subfolders, names in os.walk(ROOT, followlinks=True):
        real = os.path.realpath(folder)
        subfolders[:] = [] if real in seen else [d for d in subfolders if d not in (".git", ".venv", "__pycache__")]
        seen.add(real)
        found += [
            Path(folder, n) for n in names if n.endswith(".py") and Path(folder, n).resolve().is_relative_to(PACKAGE)
        ]
    return found


def test_a_module_reports_the_path_git_lists():
    done = subprocess.run(
        [sys.executable, "-c", "import bertcorpus.pipeline.create.job as j; print(j.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == PACKAGE / "pipeline" / "create" / "job.py"


USER_SCRIPT = """
import json, sys
import trainer, pipeline, transforms, wordpiece      # the user's own modules
import bertcorpus
from bertcorpus import PretrainingLoader, WordPieceTokenizer, document_sentences
from bertcorpus.loader import PretrainingLoader as Loader
from bertcorpus.pipeline.cli.commands import command_flags
print(json.dumps({
    "users": [m.WHOSE for m in (trainer, pipeline, transforms, wordpiece)],
    "loader": PretrainingLoader.__module__, "same": Loader is PretrainingLoader,
    "sentences": document_sentences("One sentence here. And a second one."),
    "create_flags": "--seq-configs" in command_flags("create"),
    "ours": sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in
                    ("trainer", "pipeline", "transforms", "wordpiece", "bertcorpus")}),
}))
"""


def test_a_users_own_modules_of_the_same_names_shadow_nothing(tmp_path):
    for name in FOLDERS:
        (tmp_path / f"{name}.py").write_text(f"WHOSE = 'the user\\'s {name}'\n")
    done = subprocess.run(
        [sys.executable, "-c", USER_SCRIPT],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert sorted(found["users"]) == sorted(f"the user's {name}" for name in FOLDERS)
    assert found["loader"] == "bertcorpus.trainer.loader" and found["same"]
    assert found["sentences"] == ["One sentence here.", "And a second one."]
    assert found["create_flags"]
    assert found["ours"] == ["bertcorpus", "pipeline", "trainer", "transforms", "wordpiece"]


def test_importing_the_namespace_loads_nothing_heavy():
    script = (
        "import sys, bertcorpus; print(sorted(m for m in ('numpy', 'apache_beam', 'pyarrow', 'keras') "
        "if m in sys.modules)); print(bertcorpus.__version__)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    heavy, version = done.stdout.split()
    assert heavy == "[]"
    assert version == importlib.metadata.version("bertcorpus")  # the installed metadata takes it from there


def test_an_unknown_public_name_is_an_attribute_error():
    import bertcorpus

    with pytest.raises(AttributeError, match="no attribute 'Loader'"):
        bertcorpus.Loader  # noqa: B018
    assert set(bertcorpus.__all__) <= set(dir(bertcorpus))
