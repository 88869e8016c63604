"""How often a long run prints a plain progress line where its output is a log, not a terminal: the Beam jobs'
lines (pipeline/engines) and the trainer's between its log windows (trainer/train_log.py) read the same setting."""

from __future__ import annotations

import os

# Seconds between plain lines: enough to see that a run moves, few enough for a log. The environment variable
# INTERVAL_ENV sets another (docs/command_line.md).
LINE_INTERVAL = 30.0
INTERVAL_ENV = "BERTCORPUS_PROGRESS_INTERVAL"


def line_interval() -> float:
    """Seconds between plain progress lines: $BERTCORPUS_PROGRESS_INTERVAL where it is a positive number, else
    LINE_INTERVAL."""
    try:
        seconds = float(os.environ.get(INTERVAL_ENV, LINE_INTERVAL))
    except ValueError:
        return LINE_INTERVAL
    return seconds if seconds > 0 else LINE_INTERVAL
