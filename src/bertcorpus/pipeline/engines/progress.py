"""Progress of a long local step on stderr: a live bar on a terminal; elsewhere (a log file, a pipe, CI) a plain
line now and then, since a bar's redraw codes would fill a log with carriage returns. A Beam job's progress line is
run_progress.py's."""

from __future__ import annotations

import sys
import time

from bertcorpus.transforms.progress_interval import line_interval


def readable_size(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:,.2f} GB"
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


class Progress:
    """Bytes done of a known total. Use as a context manager; update(n) adds n bytes."""

    def __init__(self, total: int, description: str, stream=None, interval: float | None = None):
        self.total = total
        self.description = description
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval if interval is not None else line_interval()
        self.done = 0
        self._bar = None
        if is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=description,
                unit="B",
                unit_scale=True,
                file=self.stream,
                dynamic_ncols=True,
                mininterval=1.0,
            )
        self._started = self._last_line = time.monotonic()

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif n and time.monotonic() - self._last_line >= self.interval:
            self._line()

    def _line(self, final: str = "") -> None:
        self._last_line = time.monotonic()
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        print(
            f"{self.description}: {readable_size(self.done)} of {readable_size(self.total)}{share}{final}",
            file=self.stream,
            flush=True,
        )

    def close(self, finished: bool = True) -> None:
        if self._bar is not None:
            self._bar.close()
        elif finished:
            self._line(f" in {time.monotonic() - self._started:.1f} s")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, error_type, *_) -> None:
        self.close(finished=error_type is None)


def is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
