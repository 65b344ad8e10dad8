"""Progress output: a redrawn bar only on a terminal; whole lines in a log (file or pipe)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import struct
import subprocess
import sys
import termios

from cs336_basics.progress import LineProgress, progress_bar

STAGE = """
from cs336_basics.progress import progress_bar
with progress_bar(total=3, desc="stage", unit="step") as bar:
    bar.update()
    bar.set_postfix(loss="1.0", refresh=False)
    bar.update(2)
"""


def test_a_pipe_gets_one_closing_line_and_no_carriage_return() -> None:
    result = subprocess.run(
        [sys.executable, "-c", STAGE], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert result.returncode == 0, result.stdout
    assert b"\r" not in result.stdout
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r"stage: done, 3/3 step in 00:0\d, [\d.,]+ step/s, loss=1\.0", lines[0]
    ), lines


def test_a_terminal_gets_the_redrawn_bar() -> None:
    """The same run with stderr on a pseudo-terminal: tqdm's bar, redrawn with carriage
    returns (so the pipe test above is about where the output goes, not about the stage)."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns
    try:
        process = subprocess.Popen([sys.executable, "-c", STAGE], stderr=terminal)
        os.close(terminal)
        output = b""
        while chunk := _read(controller):
            output += chunk
        assert process.wait(timeout=60) == 0
    finally:
        os.close(controller)
    assert b"\r" in output and b"3/3" in output


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the terminal's other end closed
        return b""


def test_periodic_lines_say_how_far_and_how_fast() -> None:
    stream = io.StringIO()
    bar = LineProgress(4, "merging", unit="merge", stream=stream, interval=0.0)
    bar.update(1)
    bar.set_postfix(survived=0)
    bar.update(1)
    bar.close()
    bar.close()  # once only
    lines = stream.getvalue().splitlines()
    assert [line.split(" 00:")[0] for line in lines] == [
        "merging: 1/4 merge (25%)",
        "merging: 2/4 merge (50%)",
        "merging: done, 2/4 merge in",
    ]
    assert lines[1].endswith("merge/s, survived=0") and "\r" not in stream.getvalue()


def test_byte_counts_are_scaled_and_a_vanishing_bar_leaves_no_line() -> None:
    stream = io.StringIO()
    with LineProgress(3_000_000, "encoding", unit="B", unit_scale=True, stream=stream) as bar:
        bar.update(3_000_000)
    assert stream.getvalue().startswith("encoding: done, 3.00M/3.00M B in ")
    quiet = io.StringIO()
    with LineProgress(10, "checking", leave=False, stream=quiet) as bar:
        bar.update(10)
    assert quiet.getvalue() == ""


def test_interactive_streams_get_tqdm_and_disabled_bars_are_silent() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(progress_bar(total=1, desc="x", stream=io.StringIO()), LineProgress)
    assert not isinstance(progress_bar(total=1, desc="x", stream=Terminal()), LineProgress)
    silent = io.StringIO()
    with progress_bar(total=1, desc="x", disable=True, stream=silent) as bar:
        bar.update()
    assert silent.getvalue() == ""


def test_a_disabled_bar_does_not_import_tqdm() -> None:
    # tqdm takes about 6 MB in each process that imports it; the BPE trainer's memory target
    # (at most HF tokenizers' peak) counts it.
    script = (
        "import sys; from cs336_basics.progress import progress_bar\n"
        "with progress_bar(total=2, desc='x', disable=True) as bar: bar.update(2)\n"
        "print('tqdm' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (result.stdout, result.stderr) == ("False\n", "")
