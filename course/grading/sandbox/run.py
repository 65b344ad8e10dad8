"""One run, start to end: the mode's launch, the prepare step, the watchdog, the log, and the
outputs streamed back (checked like any untrusted input)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from course.grading.sandbox.container import container_launch
from course.grading.sandbox.job import (
    CONTAINER,
    NAMESPACES,
    Job,
    SandboxLimits,
    SandboxResult,
)
from course.grading.sandbox.launch import program
from course.grading.sandbox.namespaces import namespaces_launch
from course.grading.sandbox.slots import SLOTS
from course.grading.sandbox.watchdog import Meter, finish_run, rlimits, watch

SAFE_NAME = re.compile(r"[A-Za-z0-9_.@+=-]{1,200}")
MAX_OUTPUT_FILES = 10_000


class _CappedReader(threading.Thread):
    """Drains a pipe, keeping at most ``limit`` bytes: head and tail (a log, drained to the
    end so the writer never blocks), or the head only (outputs: reading stops past the limit,
    and the writer gets a broken pipe instead of streaming on)."""

    def __init__(self, fd: int, limit: int, keep_tail: bool) -> None:
        super().__init__(daemon=True)
        self.fd, self.limit, self.keep_tail = fd, limit, keep_tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def run(self) -> None:
        with open(self.fd, "rb", buffering=0) as stream:
            while chunk := stream.read(1 << 16):
                self.total += len(chunk)
                if not self.keep_tail and self.overflowed:
                    break
                room = self.limit - len(self.head)
                self.head += chunk[: max(room, 0)]
                if self.keep_tail and room < len(chunk):
                    self.tail = (self.tail + chunk[max(room, 0) :])[-self.limit :]

    @property
    def overflowed(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        if not self.overflowed:
            return self.head.decode(errors="replace")
        return (
            self.head.decode(errors="replace")
            + f"\n[... {self.total - len(self.head) - len(self.tail)} bytes cut ...]\n"
            + self.tail.decode(errors="replace")
        )


def run_in_mode(
    job: Job, limits: SandboxLimits, out_dir: Path, mode: str, alone: bool
) -> SandboxResult:
    """Run ``job`` in a fresh sandbox of ``mode``; write its ``/out`` files into ``out_dir``
    (created). As root, the run gets a uid of its own (a free one, see Slots) for as long as it
    runs. ``alone``: no other sandbox of this machine's graders runs meanwhile (``Slots.turn``);
    in container mode every run is alone, since runs there share ``/dev/shm`` and the abstract
    socket names, which are wiped only when a run ends. The time spent waiting for a turn is
    not the run's (``SandboxResult.seconds``)."""
    with SLOTS.turn(alone or mode == CONTAINER):
        if os.geteuid() != 0:
            return _run(job, limits, out_dir, mode, uid=None)
        uid = SLOTS.take()
        try:
            return _run(job, limits, out_dir, mode, uid=uid)
        finally:
            SLOTS.give(uid)


def _run(
    job: Job, limits: SandboxLimits, out_dir: Path, mode: str, uid: int | None
) -> SandboxResult:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cs336-sandbox-") as tmp:
        scratch = Path(tmp)
        scratch.chmod(0o711)
        channel_r, channel_w = os.pipe()
        log_r, log_w = os.pipe()
        setup = namespaces_launch if mode == NAMESPACES else container_launch
        try:
            launch = setup(job, limits, scratch, uid, channel_w)
        except BaseException:
            for fd in (channel_r, channel_w, log_r, log_w):
                os.close(fd)
            raise
        prepare = {
            "rlimits": rlimits(limits, uid),
            "uid": uid,
            "stage": launch.stage,
            "argv": launch.argv,
            "env": launch.env,
            "parent": os.getpid(),
        }
        outputs = _CappedReader(channel_r, limits.out_bytes + 2**20, keep_tail=False)
        log = _CappedReader(log_r, limits.log_bytes // 2, keep_tail=True)
        try:
            process = start_prepare(prepare, scratch, log_w, launch.fds)
        finally:
            for fd in (*launch.fds, log_w):
                os.close(fd)
        outputs.start()
        log.start()
        meter = Meter(process, uid, launch.box)
        try:
            timed_out, killed_for = watch(process, limits, meter)
        finally:
            finish_run(process, uid, launch.box)
        outputs.join(timeout=30)
        log.join(timeout=30)
    result = SandboxResult(
        process.returncode, time.monotonic() - started, log.text(), timed_out, killed_for
    )
    result.cpu_seconds = meter.cpu_s
    _collect_outputs(result, outputs, out_dir, limits.out_bytes)
    return result


def start_prepare(prepare: dict, scratch: Path, log: int, fds: tuple[int, ...]) -> subprocess.Popen:
    """Start the prepare step with its spec on stdin (a file: no pipe to fill, no command line to read)."""
    with tempfile.TemporaryFile(dir=scratch) as spec:
        spec.write(json.dumps(prepare).encode())
        spec.seek(0)
        return subprocess.Popen(
            [sys.executable, "-S", "-c", program("prepare")],
            stdin=spec,
            stdout=log,
            stderr=log,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=fds,
            start_new_session=True,  # its own session: its own share of the CPU (autogroup)
        )


def _collect_outputs(
    result: SandboxResult, outputs: _CappedReader, out_dir: Path, limit: int
) -> None:
    out_dir.mkdir(parents=True)
    if outputs.overflowed:
        result.output_error = f"the outputs were over {limit} bytes"
    elif outputs.total:
        result.output_files, skipped = unpack_outputs(bytes(outputs.head), out_dir, limit)
        if skipped:
            result.output_error = "outputs left out: " + ", ".join(skipped[:5])


def unpack_outputs(data: bytes, out_dir: Path, limit: int) -> tuple[list[str], list[str]]:
    """Write the regular files of the tar stream ``data`` (directly below ``out/``) into
    ``out_dir``; return their names and what was skipped (links, FIFOs, odd names, overflow)."""
    written: list[str] = []
    skipped: list[str] = []
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                parts = member.name.split("/")
                if member.isdir() and parts == ["out"]:
                    continue
                plain = len(parts) == 2 and parts[0] == "out" and SAFE_NAME.fullmatch(parts[1])
                total += member.size
                if not (plain and member.isreg()):
                    skipped.append(f"{member.name[:100]!r} (not a plain file)")
                elif total > limit or len(written) >= MAX_OUTPUT_FILES:
                    skipped.append(f"{member.name[:100]!r} (over the output limits)")
                else:
                    with tar.extractfile(member) as source, open(out_dir / parts[1], "xb") as sink:
                        shutil.copyfileobj(source, sink)
                    written.append(parts[1])
    except (tarfile.TarError, EOFError, OSError, UnicodeError) as error:
        skipped.append(f"the rest (damaged output stream: {error})")
    return sorted(written), skipped
