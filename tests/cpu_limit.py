"""The grader's time limit on one graded case, applied where you run the case yourself.

The grader stops a case after ``CASE_CPU_SECONDS`` of CPU time (all the processes it starts;
``case_cpu_s`` in the course's rubric) and scores it 0. The public cases, and the tests on inputs
as small as the handout's example, run under the same limit on this process's CPU time, which
is never more than what the grader counts: a case too slow to grade, or a loop that never ends,
fails here, naming the function of yours that was running, instead of hanging. Time spent
waiting (sleeping, a loaded machine) does not count. Windows has no CPU timer: no limit there.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tests.hints import diagnosis_lines
from tests.raised_in import ROOT, is_yours, where

CASE_CPU_SECONDS = 60
# After the limit, the timer fires again this often: code that catches the first interruption
# (a broad ``except Exception``) is interrupted again.
REPEAT_SECONDS = 1.0


class OutOfTime(Exception):
    """A case that used up its CPU time (raised inside the code that was running)."""

    says_where = True  # its message names the function it stopped (raised_in stays silent)


@contextmanager
def case_cpu_limit(what: str, seconds: float = CASE_CPU_SECONDS) -> Iterator[None]:
    """Run the block with at most ``seconds`` of this process's CPU time; past it, raise
    ``OutOfTime`` saying which of your functions was running."""

    def stop(signum: int, frame: FrameType | None) -> None:
        message = (
            f"{what} used {seconds:g} s of CPU time without returning: the grader stops a case "
            "there and scores it 0"
        )
        raise OutOfTime(message + diagnosis_lines([running(frame)]))

    # Windows has no CPU timer, and a signal reaches only the main thread: no limit there.
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
    else:
        previous = signal.signal(signal.SIGPROF, stop)
        signal.setitimer(signal.ITIMER_PROF, seconds, REPEAT_SECONDS)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)


def running(frame: FrameType | None) -> str:
    """Which function of yours ``frame`` (or a frame it was called from) was running; ``""``
    when none of them was."""
    while frame is not None and not is_yours(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    return (
        f"it was still running {where(frame, frame.f_lineno, ROOT)}: a loop that never "
        "ends, or work that grows faster than the input"
    )
