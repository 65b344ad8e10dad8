"""Progress reports that read well wherever the output goes.

On a terminal (or in a notebook) :func:`progress_bar` is a tqdm bar, redrawn in place. Anywhere
else (output to a file, a pipe, a CI log) redraws would leave one copy of the bar per refresh in
the log, joined by carriage returns; there it is a :class:`LineProgress` instead: a plain line
every ``SUMMARY_SECONDS`` with the count, the rate and the latest postfix, and one closing line
per stage. Both take the calls the runner makes (``update``, ``set_postfix``, ``write``,
``close``, ``with``). A disabled bar is a silent :class:`LineProgress`, so a run that shows no
bar never imports tqdm (about 6 MB of memory in each process that does).
"""

from __future__ import annotations

import math
import sys
import time
from typing import IO, Any

# How often a run whose output is not a terminal reports how far it is.
SUMMARY_SECONDS = 30.0


def progress_bar(
    *,
    total: int | None,
    desc: str,
    unit: str = "it",
    unit_scale: bool = False,
    initial: int = 0,
    disable: bool = False,
    leave: bool = True,
    stream: IO[str] | None = None,
) -> Any:
    """A tqdm bar on an interactive ``stream`` (default: stderr, as tqdm's), else a
    :class:`LineProgress` writing to it; a silent bar when ``disable``."""
    stream = stream or sys.stderr
    if disable:  # a LineProgress that never reports
        return LineProgress(total, desc, unit, unit_scale, initial, False, stream, math.inf)
    if _interactive(stream):
        return _tqdm()(
            total=total,
            desc=desc,
            unit=unit,
            unit_scale=unit_scale,
            initial=initial,
            leave=leave,
            file=stream,
            dynamic_ncols=True,
        )
    return LineProgress(total, desc, unit, unit_scale, initial, leave, stream)


def _tqdm() -> Any:
    """tqdm's bar class (its notebook widget in Jupyter), imported on first use."""
    from tqdm.auto import tqdm

    return tqdm


def _interactive(stream: IO[str]) -> bool:
    """A terminal, or a Jupyter kernel (whose widget bars tqdm.auto draws without redraws)."""
    try:
        return stream.isatty() or "ipykernel" in sys.modules
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineProgress:
    """Progress as whole lines: one every ``interval`` seconds while it runs, one at the end
    (unless ``leave`` is false, for a bar that would vanish on a terminal)."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        unit_scale: bool = False,
        initial: int = 0,
        leave: bool = True,
        stream: IO[str] | None = None,
        interval: float = SUMMARY_SECONDS,
    ) -> None:
        self.total, self.desc, self.unit, self.unit_scale = total, desc, unit, unit_scale
        self.n = self.initial = initial
        self.leave, self.stream, self.interval = leave, stream or sys.stderr, interval
        self.postfix = ""
        self.closed = False
        self.start = time.monotonic()
        self.next_report = self.start + interval

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now >= self.next_report:
            self._print(self._summary(now))
            self.next_report = now + self.interval

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        """Shown at the end of the next line (``refresh`` is tqdm's; lines never redraw)."""
        self.postfix = ", ".join(f"{key}={value}" for key, value in values.items())

    def write(self, text: str) -> None:
        """A line of the run's own (tqdm's ``write`` prints it to stdout too)."""
        print(text, file=sys.stdout, flush=True)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.leave:
            self._print(self._summary(time.monotonic(), done=True))

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _summary(self, now: float, done: bool = False) -> str:
        elapsed = now - self.start
        rate = (self.n - self.initial) / elapsed if elapsed > 0 else 0.0
        count = self._amount(self.n)
        if self.total is not None:
            count += f"/{self._amount(self.total)}"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total and not done else ""
        interval = _tqdm().format_interval(elapsed)
        timing = f"in {interval}" if done else interval
        line = f"{self.desc}: {'done, ' if done else ''}{count} {self.unit}{share} {timing}, "
        line += f"{self._amount(rate)} {self.unit}/s"
        return f"{line}, {self.postfix}" if self.postfix else line

    def _amount(self, value: float) -> str:
        if self.unit_scale:
            return _tqdm().format_sizeof(value)
        return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.2f}"

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
