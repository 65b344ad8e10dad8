"""Which uid a run gets, and when it may run: uids unique among the graders of this machine
(a lock file each), and turns that let a run be alone when it must."""

from __future__ import annotations

import fcntl
import os
import secrets
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from course.grading.sandbox.watchdog import processes_of

# Sandbox uids are SANDBOX_UID_BASE + slot, with a base drawn per grader process from a range no
# account uses: graders in other containers on the same kernel (Gradescope runs many) share uids
# with this one, and a uid's process count (RLIMIT_NPROC) and signals are the kernel's, not the
# container's. Slots make the uids unique among graders that share this machine's /tmp.
SANDBOX_UID_BASE = 1_000_000 + secrets.randbelow(2_000_000_000 // 1024) * 1024


class Slots:
    """Sandbox uids unique among the sandboxes running at once on this machine, also across
    grader processes (a lock file per uid), and owning no process when taken."""

    def __init__(self, base: int = SANDBOX_UID_BASE, count: int = 256) -> None:
        self.base, self.count = base, count
        self._held: dict[int, int] = {}  # uid -> fd of its lock file
        self._lock = threading.Lock()

    def _folder(self) -> Path:
        folder = Path(tempfile.gettempdir()) / f"cs336-grade-slots-{os.getuid()}"
        with suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise RuntimeError(f"{folder} is not a private folder of this user")
        return folder

    def take(self) -> int:
        folder = self._folder()
        with self._lock:
            for uid in range(self.base, self.base + self.count):
                if uid in self._held:
                    continue
                fd = os.open(folder / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                if processes_of(uid):  # left over from someone else: not ours to use
                    os.close(fd)
                    continue
                self._held[uid] = fd
                return uid
        raise RuntimeError(f"all {self.count} sandbox uids are busy")

    def give(self, uid: int) -> None:
        with self._lock:
            os.close(self._held.pop(uid))  # closing releases the lock

    @contextmanager
    def turn(self, alone: bool) -> Iterator[None]:
        """Hold a turn to run a sandbox: ``alone`` while no other sandbox of any grader that
        shares this folder runs (a sandbox whose output the student reads must not run beside
        one that holds hidden inputs), else beside any others that do not need to be alone.
        The gate makes those waiting to be alone go first: later sandboxes queue behind them."""
        folder = self._folder()
        gate = os.open(folder / "gate.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        turns = os.open(folder / "turns.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(turns, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield
        finally:
            os.close(turns)  # closing releases the lock
            os.close(gate)


SLOTS = Slots()
