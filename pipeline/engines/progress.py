"""Progress of a long local step on stderr: a live bar on a terminal; elsewhere (a log file, a pipe, CI) a plain
line now and then, since a bar's redraw codes would fill a log with carriage returns."""

from __future__ import annotations

import sys
import time

# Seconds between plain lines: enough to see that a run moves, few enough for a log.
LINE_INTERVAL = 30.0


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


class Progress:
    """Bytes done of a known total. Use as a context manager; update(n) adds n bytes."""

    def __init__(self, total: int, description: str, stream=None, interval: float = LINE_INTERVAL):
        self.total = total
        self.description = description
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.done = 0
        self._bar = None
        if _is_terminal(self.stream):
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
            f"{self.description}: {_size(self.done)} of {_size(self.total)}{share}{final}", file=self.stream, flush=True
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


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
