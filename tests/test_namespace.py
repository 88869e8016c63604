"""One import namespace: installed, the project is `bertcorpus` and nothing else, so a user's own `trainer`,
`pipeline`, `transforms` or `wordpiece` module never shadows ours, and ours never shadows theirs."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pipeline", "transforms", "wordpiece", "trainer")


def test_every_package_folder_is_installed_under_the_namespace():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # A plain tree under src/: src/bertcorpus is bertcorpus/, whose sub-packages link to the top-level folders.
    assert tool["package-dir"] == {"": "src"}
    assert (ROOT / "src" / "bertcorpus").resolve() == (ROOT / "bertcorpus").resolve()
    # nothing else on the path of an editable install (setuptools' own metadata aside)
    assert [p.name for p in (ROOT / "src").iterdir() if not p.name.endswith(".egg-info")] == ["bertcorpus"]
    for name in FOLDERS:
        link = ROOT / "bertcorpus" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link
    found = {
        "bertcorpus." + ".".join(init.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    } | {"bertcorpus"}
    assert sorted(tool["packages"]) == sorted(found)


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
