"""Stopping a long job cleanly on Ctrl-C (SIGINT) or ``kill`` (SIGTERM).

Inside ``StopSignals()`` the first signal only sets ``requested``: the training loop finishes
its current step, writes a checkpoint and returns. The handler then steps aside, so a second
Ctrl-C interrupts at once (``KeyboardInterrupt``), for when the user cannot wait.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """A context in which SIGINT/SIGTERM request a clean stop instead of killing the process."""

    def __init__(self, announce: bool = True) -> None:
        self.requested: str | None = None  # the name of the signal received
        self._announce = announce
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        self._pid = os.getpid()
        if threading.current_thread() is threading.main_thread():  # signals only reach it
            for number in _SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _handle(self, number: int, frame) -> None:
        if os.getpid() != self._pid:  # a forked helper process: the default action, quietly
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        self.requested = signal.Signals(number).name
        if self._announce:
            print(
                f"\n{self.requested}: finishing this step and saving a checkpoint "
                "(Ctrl-C again to stop at once)",
                file=sys.stderr,
            )
        for other in _SIGNALS:  # a second signal interrupts at once
            signal.signal(other, signal.default_int_handler)
