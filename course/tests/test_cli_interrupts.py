"""Interrupting ``cs336`` with real signals: Ctrl-C in ``encode`` stops the worker pool at once
and leaves no partial output; SIGINT/SIGTERM in ``train`` save a checkpoint and print the
command that resumes; a write killed by SIGKILL leaves a temporary file the next start removes.
``encode`` failing in its writer (a full disk), its reader (bad UTF-8) or a worker (SIGKILL)
ends within seconds with one line and no output, run after run.

A terminal's Ctrl-C reaches every process in the foreground group, so the commands run in a
new session and the tests signal the whole group (``killpg``), as the terminal would.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from .cli_workspace import CLI, REPO, make_workspace

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

ENV = {**os.environ, "PYTHONPATH": str(REPO), "CS336_DEBUG": ""}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("interrupts"))


def _start(args: list[str], cwd: Path, max_file_bytes: int | None = None) -> subprocess.Popen:
    def prepare() -> None:
        # A shell without job control starts background commands with SIGINT ignored, and the
        # command inherits that (Python then never raises KeyboardInterrupt): a suite run as
        # `.ci/run &` would see Ctrl-C do nothing. Give the command what a terminal gives it.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if max_file_bytes is not None:  # writing past it fails with EFBIG, as a full disk would
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.Popen(
        CLI + args,
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=prepare,
    )


def _wait_for(condition, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the command ended early: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the command never got to the point of being interrupted")
        time.sleep(0.05)


def _group_is_gone(pgid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _train_records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [r for r in map(json.loads, lines) if r["split"] == "train"]


def test_ctrl_c_stops_encode_workers_at_once_and_leaves_no_output(workspace):
    # 48 MB of random letter strings: every word is new, so encoding takes seconds even for the
    # compiled encoder (about 30 MB/s on two cores).
    codes = np.random.default_rng(0).integers(0, 31, size=48_000_000, dtype=np.uint8)
    letters = np.where(codes < 26, codes + 97, 32).astype(np.uint8)  # a space one time in six
    (workspace / "big.txt").write_bytes(letters.tobytes())
    args = ["encode", "big.txt", "--tokenizer", "tok", "--out", "big.npy", "--workers", "2"]
    process = _start([*args, "--no-progress"], workspace)
    _wait_for(lambda: any(workspace.glob(".big.npy.*.tmp")), process)
    time.sleep(0.5)  # the workers are busy encoding
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines() == [
        "cs336 encode: interrupted; partial outputs were removed"
    ]
    assert _group_is_gone(process.pid), "encoding workers outlived the command"
    assert not (workspace / "big.npy").exists()
    assert not list(workspace.glob(".big.npy.*"))


# Encoding failures, each repeated: multiprocessing.Pool's terminate() used to hang in about one
# run of two when the writer failed while workers were sending replies bigger than a pipe holds.
REPEATS = 20


@pytest.fixture(scope="module")
def letters(workspace) -> Path:
    """2 MB of random letter strings: with 4 workers, 8 jobs whose replies (about 400 KB of ids
    each) are far bigger than a pipe's buffer, so workers are mid-reply when the command fails."""
    codes = np.random.default_rng(1).integers(0, 31, size=2_000_000, dtype=np.uint8)
    text = np.where(codes < 26, codes + 97, 32).astype(np.uint8).tobytes()
    (workspace / "letters.txt").write_bytes(text)
    (workspace / "letters_bad.txt").write_bytes(text[:1_900_000] + b"\xff" + text[1_900_000:])
    return workspace / "letters.txt"


@pytest.fixture
def full_disk(tmp_path) -> Iterator[tuple[Path, int | None, str]]:
    """Where to write, a file size limit for the command, and the error a full disk gives: a
    64 KB tmpfs where this process may mount one (root), else a file size limit (writing past
    it fails with EFBIG instead of ENOSPC, through the same code)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True
    )
    if mounted.returncode != 0:
        yield tmp_path / "ids.npy", 1 << 20, "File too large"  # 1 MB: the kernels' caches fit
        return
    yield mount_point / "ids.npy", None, "No space left on device"
    subprocess.run(["umount", str(mount_point)], check=True)


def _encode_fails_cleanly(
    workspace: Path,
    source: str,
    out: Path,
    expected: str,
    max_file_bytes: int | None = None,
    during=None,
) -> None:
    """Run ``cs336 encode`` (4 workers) expecting it to fail: within seconds, with one error
    line containing ``expected``, no output or temporary file, and no process left over."""
    args = ["encode", source, "--tokenizer", "tok", "--out", str(out), "--workers", "4"]
    process = _start([*args, "--no-progress"], workspace, max_file_bytes)
    if during is not None:
        during(process)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"cs336 encode hung after failing ({expected!r})")
    lines = stderr.strip().splitlines()
    assert process.returncode in (1, 2) and len(lines) == 1, stderr
    assert lines[0].startswith("cs336 encode: error: ") and expected in lines[0], stderr
    assert _group_is_gone(process.pid), "encoding workers outlived the command"
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.*")), "partial output"


def test_encode_onto_a_full_disk_fails_at_once_every_time(workspace, letters, full_disk):
    out, max_file_bytes, expected = full_disk
    for _ in range(REPEATS):
        _encode_fails_cleanly(workspace, letters.name, out, expected, max_file_bytes)


def test_encode_with_a_worker_killed_fails_at_once_every_time(workspace, letters):
    def kill_a_worker(process: subprocess.Popen) -> None:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        _wait_for(lambda: children.read_text().split(), process, timeout=60)
        os.kill(int(children.read_text().split()[0]), signal.SIGKILL)  # as the OOM killer does

    for _ in range(REPEATS):
        _encode_fails_cleanly(
            workspace,
            letters.name,
            workspace / "ids.npy",
            "an encoding worker process was killed by signal 9",
            during=kill_a_worker,
        )


def test_encode_of_bad_utf8_fails_at_once(workspace, letters):
    # The bad byte is in the last job: its worker fails while the others are mid-reply.
    for _ in range(5):
        _encode_fails_cleanly(
            workspace, "letters_bad.txt", workspace / "ids.npy", "not valid UTF-8: bad byte"
        )


@pytest.mark.parametrize(
    "signal_number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"]
)
def test_signal_in_train_saves_a_checkpoint_and_prints_the_resume_command(workspace, signal_number):
    from cs336_basics.checkpoint import read_checkpoint

    run = workspace / f"run-{signal_number.name}"
    args = ["train", "--config", "run.json", "--out-dir", run.name, "--max-steps", "100000"]
    args += ["--log-interval", "1", "--checkpoint-interval", "100000"]
    process = _start(args, workspace)
    _wait_for(lambda: len(_train_records(run)) >= 3, process)
    if signal_number == signal.SIGINT:
        os.killpg(process.pid, signal_number)  # Ctrl-C at a terminal
    else:
        os.kill(process.pid, signal_number)  # `kill PID`
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("cs336 train: interrupted at step ")
    step = int(last.split("at step ")[1].split(";")[0])
    assert read_checkpoint(run / "checkpoints" / "latest.pt")["iteration"] == step >= 3
    assert [r["step"] for r in _train_records(run)] == list(range(1, step + 1))
    command = last.split("resume with: ")[1]
    assert shlex.split(command) == [
        "cs336",
        "train",
        "--config",
        f"{run.name}/config.json",
        "--resume",
    ]
    if signal_number == signal.SIGINT:
        _resume_after_a_killed_write(workspace, run, command, step)


def _resume_after_a_killed_write(workspace: Path, run: Path, command: str, step: int) -> None:
    """SIGKILL a process in the middle of an atomic checkpoint write, then run the printed
    resume command: it removes the temporary file and continues from ``step``."""
    checkpoint = run / "checkpoints" / "latest.pt"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from cs336_basics.atomic_write import atomic_writer\n"
            "with atomic_writer(sys.argv[1]) as out:\n"
            "    out.write(b'x' * 100_000); out.flush(); print('writing', flush=True)\n"
            "    time.sleep(60)\n",
            str(checkpoint),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline().strip() == "writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    leftovers = list(checkpoint.parent.glob(".latest.pt.*.tmp"))
    assert len(leftovers) == 1, "the killed write should have left its temporary file"

    args = shlex.split(command)[1:] + ["--max-steps", str(step + 2)]
    resumed = subprocess.run(
        CLI + args, cwd=workspace, env=ENV, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "removed" in resumed.stderr and not leftovers[0].exists()
    assert [r["step"] for r in _train_records(run)] == list(range(1, step + 3))
