"""The figures the docs quote from commands are the commands' own: docs/dataflow.md's plan of the full corpus is
what `bertcorpus plan` prints for its listing (.ci/docs_figures.py writes it; README.md's demo table is checked in
tests/test_demo.py, against the demo run there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_plan_is_the_commands_output():
    done = subprocess.run(
        [sys.executable, ROOT / ".ci" / "docs_figures.py", "--check", "plan"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
