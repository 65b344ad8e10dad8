"""The limits of a run and their watchdog: rlimits for every process, a meter of what all the
run's processes use together (CPU time, memory, disk in the box), and the end of a run: every
process of its uid killed, and what the uid left in the machine's shared places deleted."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import time
from contextlib import suppress
from pathlib import Path

from course.grading.sandbox.job import SandboxLimits

POLL_S = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MAX_BOX_FILES = 20_000  # files a container-mode run may keep in its box
CPU_BACKSTOP_S = 10  # RLIMIT_CPU is the CPU limit plus this


# Where any user may create files on an ordinary Linux machine (searched, with the world-writable
# folders below them, for what a run's uid left behind).
SHARED_PLACES = ("/dev/shm", "/dev/mqueue", "/tmp", "/var/tmp", "/run/lock", "/var/lock")


def rlimits(limits: SandboxLimits, uid: int | None) -> dict[str, int]:
    # RLIMIT_NPROC counts every process of the uid; a dedicated uid starts near zero, the
    # instructor's own (not root) already has some.
    own = 0 if uid is not None else len(processes_of(os.getuid(), threads=True))
    return {
        "RLIMIT_AS": limits.address_space_bytes,
        # A backstop a little past the watchdog's limit, which counts every process and, when
        # it stops a run, says so (at the limit itself the kernel's SIGKILL would say nothing).
        "RLIMIT_CPU": int(limits.cpu_s) + CPU_BACKSTOP_S,
        "RLIMIT_FSIZE": limits.file_size_bytes,
        "RLIMIT_NPROC": own + limits.processes,
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 4096,
    }


def processes_of(uid: int, threads: bool = False) -> list[int]:
    """Live processes (or their threads) owned by ``uid``; zombies are not counted."""
    found = []
    for entry in os.listdir("/proc"):
        with suppress(OSError, IndexError):
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found += os.listdir(f"/proc/{entry}/task") if threads else [int(entry)]
    return found


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            line = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(line.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (a snapshot of /proc)."""
    children = _children_map()
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def _cpu_and_memory(pids: list[int]) -> tuple[float, int]:
    """CPU seconds (with those of reaped children) and memory of ``pids`` (``_memory_of``)."""
    ticks, memory = 0, 0
    for pid in pids:
        with suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
            memory += _memory_of(pid)
    return ticks / CLOCK_TICKS, memory


def _memory_of(pid: int) -> int:
    """The proportional set size, so pages shared by many processes (a pool forked after
    ``import torch``) count once. Reading it needs ptrace rights, which a container's root
    lacks (no CAP_SYS_PTRACE): then the process's own anonymous and shared memory, which
    any reader may see (file pages are the page cache's, not the process's)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as stream:
            for line in stream:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return sum(int(fields.get(k, "0 kB").split()[0]) for k in ("RssAnon", "RssShmem")) * 1024


def _shared_files_of(uid: int) -> list[os.DirEntry]:
    """The ``/dev/shm`` entries ``uid`` owns (memory, not resident in any process)."""
    owned = []
    with suppress(OSError):
        for entry in os.scandir("/dev/shm"):
            with suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    owned.append(entry)
    return owned


def _shm_bytes(uid: int) -> int:
    total = 0
    for entry in _shared_files_of(uid):
        with suppress(OSError):
            total += entry.stat(follow_symlinks=False).st_blocks * 512
    return total


def _disk_bytes(box: Path, limit: int) -> int:
    """Bytes the run has written in its box (over ``limit`` as soon as it has too many files)."""
    total, count = 0, 0
    for name in ("work", "tmp", "out"):
        for top, dirs, files in os.walk(box / name):
            for entry in [*dirs, *files]:
                count += 1
                with suppress(OSError):
                    total += os.lstat(os.path.join(top, entry)).st_blocks * 512
            if count > MAX_BOX_FILES:
                return limit + 1
    return total


class Meter:
    """What one run uses: all processes of its uid (or, without a uid of its own, the tree
    below the process the grader started), its shared memory and its box."""

    def __init__(self, process: subprocess.Popen, uid: int | None, box: Path | None) -> None:
        self.process, self.uid, self.box = process, uid, box
        self.cpu_s = 0.0

    def pids(self) -> list[int]:
        if self.uid is None:
            return process_tree(self.process.pid)
        return processes_of(self.uid)

    def over(self, limits: SandboxLimits, check_disk: bool) -> str | None:
        cpu, memory = _cpu_and_memory(self.pids())
        self.cpu_s = max(self.cpu_s, cpu)
        if self.uid is not None and self.box is not None:
            memory += _shm_bytes(self.uid)
        if self.cpu_s > limits.cpu_s:
            return "cpu"
        if memory > limits.memory_bytes:
            return "memory"
        disk_limit = 2 * limits.work_bytes + limits.out_bytes
        if check_disk and self.box is not None and _disk_bytes(self.box, disk_limit) > disk_limit:
            return "disk"
        return None


def watch(
    process: subprocess.Popen, limits: SandboxLimits, meter: Meter
) -> tuple[bool, str | None]:
    """Wait for ``process``; stop the run at a limit (wall clock, CPU, memory, disk)."""
    started = time.monotonic()
    polls = 0
    while True:
        try:
            process.wait(timeout=POLL_S)
            return False, None
        except subprocess.TimeoutExpired:
            polls += 1
        if time.monotonic() - started > limits.wall_s:
            return True, None
        reason = meter.over(limits, check_disk=polls % 5 == 0)
        if reason:
            return False, reason


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL every descendant of ``process`` (the sandbox's PID-namespace init is one of them,
    and its death ends every process inside), then let ``process``, the subreaper, reap them
    and exit; kill it too if it does not."""
    for pid in reversed(process_tree(process.pid)[1:]):
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def kill_uid(uid: int) -> None:
    """SIGKILL every process ``uid`` owns, wherever it went (a daemon that left the tree
    too): a child becomes ``uid`` and signals everything it may, which is exactly that."""
    for _ in range(100):
        if not processes_of(uid):
            return
        child = os.fork()
        if child == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        time.sleep(0.02)


def finish_run(process: subprocess.Popen, uid: int | None, box: Path | None) -> None:
    if uid is not None:
        kill_uid(uid)
    if uid is not None:
        remove_files_of(uid)
    if process.returncode is None:  # never signal a reaped pid: it may be reused
        kill_tree(process)


def remove_files_of(uid: int) -> list[str]:
    """Delete, as root, what ``uid`` left in the places every user may write (``/dev/shm``, the
    machine's ``/tmp`` and the like, and any world-writable folder below them): nothing a run
    wrote survives it for a later run to read, and ``/dev/shm`` is memory. Returns what went.
    (With Landlock, ``/dev/shm`` is the one such place a container-mode run may write; without
    it, these are where the run's uid may create files; the box goes with the run's scratch.)"""
    removed = []
    todo = [Path(p) for p in SHARED_PLACES]
    while todo:
        folder = todo.pop()
        with suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                with suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    if info.st_uid == uid:
                        _remove(entry)
                        removed.append(entry.path)
                    elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                        todo.append(Path(entry.path))
    return removed


def _remove(entry: os.DirEntry) -> None:
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path, ignore_errors=True)
    else:
        os.unlink(entry.path)
