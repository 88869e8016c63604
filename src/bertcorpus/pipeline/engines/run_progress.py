"""The progress line of a local Beam run: what has been read (bytes of the inputs' total, and the job's items), what
has been written, and the stage running, from the counts that the run's processes report as they go
(live_counts.py). On a terminal it is one line redrawn in place every second; elsewhere (a log, a pipe, CI) a plain
line every `line_interval()` seconds, since a redrawn line would fill a log with carriage returns.

    create: 1:02 read 12.3 MB of 40.0 MB (31%), 1,234 documents; wrote 45,678 instances; at tokenize buckets
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bertcorpus.pipeline.engines.live_counts import LiveCounts
from bertcorpus.pipeline.engines.progress import is_terminal, readable_size
from bertcorpus.transforms.progress_interval import line_interval

REDRAW_EVERY = 1.0  # seconds between redraws of a terminal's line
BYTES_READ = "progress/bytes_read"  # tally.progress's counter of the bytes readers have read (inputs/streams.py)
# The longest run of step names a stage is named by, in the progress line and the summary's "time in" rows: three
# names of thirty characters would push the summary's values past a hundred columns.
LABEL_CHARS = 40


@dataclass(frozen=True)
class ProgressPlan:
    """What a job's progress line shows: the bytes of its inputs, and which of its counters ("namespace/name")
    count the items it has read and written, each with the word for them."""

    total_bytes: int = 0
    read: tuple[str, str] | None = None  # ("create/documents_read", "documents")
    written: tuple[str, str] | None = None  # ("progress/instances_written", "instances")


def clock(seconds: float) -> str:
    """1:02, or 1:02:03 past an hour."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _working_steps(readable: str, movers: set[str]) -> list[str]:
    """The job's steps (two labels deep) in a stage that run_watch.readable_stage names, without Beam's own parts (no
    job label) and those in `movers` (groupings and flattens, whose ends a stage starts or stops at), unless nothing
    else is left."""
    steps = [step for step in dict.fromkeys(readable.split(" + ")) if "/" in step]
    return [step for step in steps if step not in movers] or steps


def _named(steps: list[str], readable: str, most: int = 0) -> str:
    """Steps without the label of the job that holds them all; with `most`, the first so many that fit in
    LABEL_CHARS (the first always), and how many more there are."""
    names = list(dict.fromkeys(step.split("/", 1)[1] for step in steps))
    if not most:
        return " + ".join(names) or readable
    shown = names[:1]
    for name in names[1:most]:
        if len(" + ".join([*shown, name])) > LABEL_CHARS:
            break
        shown.append(name)
    more = len(names) - len(shown)
    return " + ".join([*shown, *([f"{more} more"] if more else [])]) or readable


def short_stage(readable: str, movers: set[str] = frozenset(), most: int = 0) -> str:
    """A stage ('create pretraining data/group into buckets + create pretraining data/tokenize buckets + Write') →
    the job's steps that work in it ('tokenize buckets'); with `most`, the first so many of them, and how many more
    there are."""
    return _named(_working_steps(readable, movers), readable, most)


def step_seconds(monitoring_infos) -> dict[str, float]:
    """Seconds each of the job's steps ('job/step') worked, summed over workers: Beam's execution-time metrics of
    every transform in it."""
    from apache_beam.metrics import monitoring_infos as infos

    seconds: dict[str, float] = {}
    for info in monitoring_infos:
        label = info.labels.get(infos.PTRANSFORM_LABEL, "")
        if info.urn == infos.TOTAL_MSECS_URN and label.count("/") >= 1:
            step = "/".join(label.split("/")[:2])
            seconds[step] = seconds.get(step, 0.0) + infos.extract_counter_value(info) / 1000
    return seconds


def busiest(readable: str, movers: set[str], worked: dict[str, float], most: int = 3) -> str:
    """A stage named by the steps that worked most in it: those with at least a third of the busiest one's time,
    as Beam measured it, by all its working steps where it measured none; the first `most` of them."""
    steps = _working_steps(readable, movers)
    top = max((worked.get(step, 0.0) for step in steps), default=0.0)
    return _named([step for step in steps if worked.get(step, 0.0) >= top / 3] if top else steps, readable, most)


def stage_time_rows(times: list[tuple[str, float]], share: float = 0.03) -> list[tuple[str, str]]:
    """Summary rows of the seconds stages took: one per stage name (those of one name summed), in the order they
    first ran; the stages under `share` of the whole run together in one row."""
    total = sum(seconds for _, seconds in times)
    named: dict[str, float] = {}
    for name, seconds in times:
        named[name] = named.get(name, 0.0) + seconds
    rows = [(f"time in {name}", f"{seconds:.1f} s") for name, seconds in named.items() if seconds >= share * total]
    rest = [seconds for seconds in named.values() if seconds < share * total]
    if rest:
        rows.append((f"time in {len(rest)} other stages", f"{sum(rest):.1f} s"))
    return rows


def progress_line(what: str, plan: ProgressPlan, totals: dict, stage: str | None, seconds: float) -> str:
    read_bytes = totals.get(BYTES_READ, 0)
    if plan.total_bytes:
        read = f"read {readable_size(read_bytes)} of {readable_size(plan.total_bytes)}"
        read += f" ({min(read_bytes / plan.total_bytes, 1.0):.0%})"  # an input that grew while the run read it
    else:
        read = f"read {readable_size(read_bytes)}"
    if plan.read:
        read += f", {totals.get(plan.read[0], 0):,} {plan.read[1]}"
    parts = [read]
    if plan.written:
        parts.append(f"wrote {totals.get(plan.written[0], 0):,} {plan.written[1]}")
    if stage:
        parts.append(f"at {stage}")
    return f"{what}: {clock(seconds)} " + "; ".join(parts)


class RunProgress:
    """While the `with` block runs: the progress line on `stream`, from `counts`, with the stage that `stage()`
    names. The terminal's line is cleared at the end, for the lines that follow."""

    def __init__(self, what: str, plan: ProgressPlan, counts: LiveCounts, stage: Callable[[], str | None], stream):
        self.what, self.plan, self.counts, self.stage, self.stream = what, plan, counts, stage, stream
        self.live = is_terminal(stream)
        self.lines = 0  # plain lines printed
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._show, name="bertcorpus progress", daemon=True)

    def __enter__(self) -> RunProgress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        if self.live:
            self._write("\r\x1b[K")

    def line(self) -> str:
        stage = self.stage()
        return progress_line(
            self.what,
            self.plan,
            self.counts.totals(),
            short_stage(stage) if stage else None,
            time.monotonic() - self._started,
        )

    def _show(self) -> None:
        while not self._done.wait(REDRAW_EVERY if self.live else line_interval()):
            if self.live:
                width = shutil.get_terminal_size().columns - 1
                self._write("\r" + _cut(self.line(), width) + "\x1b[K")
            else:
                self._write(self.line() + "\n")
                self.lines += 1

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # standard error went away: the run goes on without its progress
            self._done.set()


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"
