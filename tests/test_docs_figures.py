"""The figures the docs quote from commands are the commands' own (.ci/docs_figures.py writes them): docs/dataflow.md's
plan of the full corpus is what `bertcorpus plan` prints for its listing, docs/recipes.md's tables are what `create`
makes of the demo's corpus with each recipe's flags, and docs/command_line.md's inspected shard is one of them.
README.md's demo table is checked in tests/test_demo.py, against the demo run there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def check(what: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, ROOT / ".ci" / "docs_figures.py", "--check", what], capture_output=True, text=True
    )


def test_the_documented_plan_is_the_commands_output():
    done = check("plan")
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_recipes_tables_and_the_inspected_shard_are_what_the_commands_make_of_the_demos_corpus():
    """The ModernBERT-style rows once counted instances of a corpus of one of the demo's two Wikipedia samples."""
    done = check("corpus")
    assert done.returncode == 0, done.stderr[-2000:]
