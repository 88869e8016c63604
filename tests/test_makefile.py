"""The Makefile's targets as a user runs them: after `make test` (an environment with the test extra, which holds
the train and zh extras), `make demo` and `make demo-zh` install nothing, and a fresh checkout installs what each
needs (make's dry run, on a copy of the Makefile and the files its stamps depend on)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The Makefile and the files its install stamps depend on, in a folder of their own."""
    (tmp_path / "src" / "bertcorpus").mkdir(parents=True)
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "src" / "bertcorpus" / "__init__.py", tmp_path / "src" / "bertcorpus")
    return tmp_path


def dry_run(folder: Path, target: str) -> str:
    """What make would run, as a user's shell runs it: not as a sub-make of the `make test` that runs the tests
    (which would add its "Entering directory" lines)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "-n", target], cwd=folder, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def installed(folder: Path, *extras: str) -> None:
    """An environment as `make` leaves it: its python, and a stamp newer than what it depends on per extra."""
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "python").write_text("")
    later = time.time() + 10
    for extra in extras:
        stamp = folder / ".venv" / f".installed-{extra}"
        stamp.write_text("")
        os.utime(stamp, (later, later))


def test_the_demos_install_nothing_after_make_test(checkout):
    installed(checkout, "test")
    for target, command in (("demo", "demo --output demo-out"), ("demo-zh", "demo --zh --output demo-zh-out")):
        lines = dry_run(checkout, target).strip().splitlines()
        assert lines == [f".venv/bin/bertcorpus {command}"], lines


def test_a_fresh_checkout_installs_what_each_target_needs(checkout):
    assert "pip install --quiet -e '.[test]'" in dry_run(checkout, "test")
    demo = dry_run(checkout, "demo")
    assert "pip install --quiet -e '.[train]'" in demo and "[test]" not in demo
    zh = dry_run(checkout, "demo-zh")
    assert "'.[train]'" in zh and "'.[zh]'" in zh
