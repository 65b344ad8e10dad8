"""Counting the pre-tokens of a file's byte ranges, in this process and in helper processes.

:func:`cs336_basics.bpe.train_bpe` counts the first share of a file's chunks in its own process
and each other share in a *helper*: a fresh interpreter that runs :func:`main` of this module and
imports nothing but what counting needs. Not a forked or a ``multiprocessing`` worker, for memory:
a forked worker's resident set counts all its parent's pages again (each worker adds the parent's
interpreter, libraries and data to the tree's total), and a worker that ``multiprocessing``
spawns imports the parent's ``__main__`` module again (a script that imports torch would import
it once per worker).

A helper's protocol is pickles over its pipes. It reads one job ``(path, ranges,
special_tokens)`` from stdin, then writes to stdout ``("counted", n_bytes)`` after each range
(for the progress bar). Once its stdin ends (the parent closes it when done with its own share,
or has gone), it writes its table as ``("counts", [(pre_token, count), ...])`` in batches and
``("done", None)``; or ``("error", exception)`` if counting failed. A helper whose parent has
gone stops at its next write, as the pipe is broken.

The hand-over is kept small, as it is the tree's peak on a corpus with few distinct pre-tokens:
pickling a whole table at once would build a memo as large as the table in the helper, and
unpickling it would put a second whole table beside the parent's, while the parent still
counted. Batch by batch, once the parent has finished counting, each batch goes into the
parent's table.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from cs336_basics.chunking import read_text_range
from cs336_basics.pretokenization import _count_pretoken_strings

# ``[(start, end), ...]``: byte ranges of the file, each starting and ending at a safe boundary.
Ranges = list[tuple[int, int]]

# Pre-tokens per batch of a helper's table (see above).
BATCH_ITEMS = 4096

# How a helper starts: the directory that holds this package goes first on its path, so it
# imports the same code as its parent whatever its working directory holds.
_START = f"import sys; sys.path.insert(0, sys.argv[1]); from {__name__} import main; main()"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def count_ranges(
    path: str,
    ranges: Ranges,
    special_tokens: Sequence[str],
    counted: Callable[[int], object] = lambda n_bytes: None,
    counts: Counter[bytes] | None = None,
) -> Counter[bytes]:
    """Count the pre-tokens of the byte ranges ``[start, end)`` of the file, reading one range at a
    time (so one range's text is held, beside the counts); ``counted(n_bytes)`` after each. The
    counts are added to ``counts`` if given (and returned)."""
    counts = Counter() if counts is None else counts
    # What ``count_pretokens`` does, with one table of strings for all the ranges, encoded once.
    strings: Counter[str] = Counter()
    for start, end in ranges:
        _count_pretoken_strings(read_text_range(path, start, end), special_tokens, strings)
        counted(end - start)
    for pre_token, count in strings.items():
        counts[pre_token.encode("utf-8")] += count
    return counts


def count_shares(
    path: str,
    shares: list[Ranges],
    special_tokens: Sequence[str],
    counted: Callable[[int], object] = lambda n_bytes: None,
) -> Counter[bytes]:
    """Count the pre-tokens of all ``shares`` at once: the first here, each other in a helper
    process. ``counted(n_bytes)`` is called here, after every range of every share."""
    messages: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
    helpers: list[_Helper] = []
    # One table for all: a helper's batches are added as they arrive, and the share counted here
    # goes in directly (two whole tables side by side would raise this process's peak).
    counts: Counter[bytes] = Counter()
    waiting = len(shares) - 1

    def handle(kind: str, value) -> None:
        nonlocal waiting
        if kind == "counted":
            counted(value)
        elif kind == "counts":
            for pre_token, count in value:
                counts[pre_token] += count
        elif kind == "done":
            waiting -= 1
        else:
            raise value

    def counted_here(n_bytes: int) -> None:
        counted(n_bytes)
        while not messages.empty():  # the helpers' news, without waiting for it
            handle(*messages.get())

    try:
        for share in shares[1:]:
            helpers.append(_Helper(path, share, special_tokens, messages))
        count_ranges(path, shares[0], special_tokens, counted_here, counts)
        for helper in helpers:
            helper.send_table()
        while waiting:
            handle(*messages.get())
    finally:
        for helper in helpers:
            helper.stop()
    return counts


class _Helper:
    """A helper process counting one share; a thread here passes its messages on to ``messages``."""

    def __init__(
        self,
        path: str,
        ranges: Ranges,
        special_tokens: Sequence[str],
        messages: queue.SimpleQueue,
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _START, _PACKAGE_ROOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.thread: threading.Thread | None = None
        try:
            pickle.dump((path, ranges, tuple(special_tokens)), self.process.stdin)
            self.process.stdin.flush()
        except OSError:  # it ended before reading its job; its exit code says more
            self.stop()
            code = self.process.returncode
            raise RuntimeError(f"a pre-tokenization helper failed to start (exit {code})") from None
        self.thread = threading.Thread(target=self._relay, args=(messages,), daemon=True)
        self.thread.start()

    def _relay(self, messages: queue.SimpleQueue) -> None:
        """Put the helper's messages on ``messages`` until its last; report an early end."""
        try:
            while True:
                kind, value = pickle.load(self.process.stdout)
                messages.put((kind, value))
                if kind in ("done", "error"):
                    return
        except (EOFError, OSError, pickle.UnpicklingError):
            code = self.process.wait()
            error = RuntimeError(f"a pre-tokenization helper ended with no counts (exit {code})")
            messages.put(("error", error))

    def send_table(self) -> None:
        """Let the helper send its table (it waits for the end of its stdin)."""
        with contextlib.suppress(OSError):  # it has ended: the relay reports why
            self.process.stdin.close()

    def stop(self) -> None:
        """End the helper if it still runs (counting failed here), and wait for it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        if self.thread is not None:
            self.thread.join()
        self.send_table()
        self.process.stdout.close()


def main() -> None:
    """A helper: count the job read from stdin; the messages go to stdout (see the module)."""
    # Ctrl-C reaches the whole process group: the parent stops its helpers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    path, ranges, special_tokens = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer

    def send(kind: str, value) -> None:
        try:
            pickle.dump((kind, value), out)
            out.flush()
        except BrokenPipeError:  # the parent has gone: nobody wants the rest
            os._exit(1)

    try:
        counts = count_ranges(path, ranges, special_tokens, lambda n: send("counted", n))
    except Exception as error:  # raised again in the parent, e.g. a file that is not UTF-8
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            error = RuntimeError(f"{type(error).__name__}: {error}")
        send("error", error)
        return
    sys.stdin.buffer.read()  # wait until the parent has finished counting (or has gone)
    items = iter(counts.items())
    while batch := list(itertools.islice(items, BATCH_ITEMS)):
        send("counts", batch)
    send("done", None)
