"""Run untrusted code in a sandbox and collect the files it writes.

``run_sandboxed(job, limits, out_dir)`` runs ``job.argv`` confined at the best level this machine
offers (``isolation()`` finds it once and ``results.json`` names it):

* **namespaces** (``bwrap``, where namespaces can be made): new user, PID, mount, network, IPC,
  UTS and cgroup namespaces, no capabilities, no nested user namespaces, death with the grader;
  a file system made of read-only binds of exactly the job's files plus ``/usr``, a synthetic
  ``/etc/passwd``, fresh ``/proc``, a minimal ``/dev`` and size-capped private tmpfs mounts for
  ``/work`` (the student's copy), ``/tmp``, ``/dev/shm`` and ``/out``;
* **container** (an ordinary Docker container, where no namespace of any kind can be made): the
  run gets a private folder ("box") with ``work``, ``tmp`` and ``out`` that only its uid owns,
  and copies of the job's files that only its uid can read; Landlock, where the kernel offers
  it, lets it read only the system folders, the Python runtime and its box, write only below
  its box, open no TCP connection and signal nothing outside; without Landlock the file system
  is held by ownership alone, and ``isolation()`` refuses this mode unless the probe proves the
  instructor's files unreadable to the sandbox's uid.

In both, as root the run gets a uid of its own (one per concurrent slot) that owns nothing of
the grader; ``no_new_privs`` and a seccomp filter (``course/grading/confine.py``: no ptrace, mounts,
namespaces, sockets other than ``AF_UNIX``, ``memfd``/SysV shared memory, ``setsid``, io_uring,
BPF, keyrings) come before any student code; ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``,
``RLIMIT_NPROC`` and no core dumps bind every process; a watchdog kills every process of the
run when its CPU time (all processes together, so a busy neighbour cannot make it time out),
its resident plus shared memory, its disk use in the box, or a generous wall clock pass their
limits. A run ends when its command does: the launcher then kills everything else it may
signal, and the process that started the run (outside it, as root) kills every process of the
uid when the launcher ends or the grader dies. Then, as root, the grader deletes whatever the
uid left in the places every user may write (``remove_files_of``). In container mode, where
runs share ``/dev/shm`` and the abstract socket names, no two runs overlap (``Slots.turn``).
Command lines, environments and mount tables inside a run name sandbox paths only.

When the command has finished, a small launcher inside the sandbox streams ``/out`` as a tar
to a pipe; the grader reads at most ``out_bytes`` from it and accepts only regular files with
plain names, written fresh into ``out_dir``. The stream comes from the sandbox, so it is
checked like any other untrusted input; the judge validates every file again.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

MIN_BWRAP = (0, 8, 0)
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`)"
# Sandbox uids are SANDBOX_UID_BASE + slot, with a base drawn per grader process from a range no
# account uses: graders in other containers on the same kernel (Gradescope runs many) share uids
# with this one, and a uid's process count (RLIMIT_NPROC) and signals are the kernel's, not the
# container's. Slots make the uids unique among graders that share this machine's /tmp.
SANDBOX_UID_BASE = 1_000_000 + secrets.randbelow(2_000_000_000 // 1024) * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
SAFE_NAME = re.compile(r"[A-Za-z0-9_.@+=-]{1,200}")
MAX_OUTPUT_FILES = 10_000
POLL_S = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MAX_BOX_FILES = 20_000  # files a container-mode run may keep in its box
CPU_BACKSTOP_S = 10  # RLIMIT_CPU is the CPU limit plus this

# Runs inside the sandbox before anything of the student's, after the source of
# course/grading/confine.py: copy their files (namespaces mode), confine itself, run the command, then
# stream the outputs folder to the channel. Stdlib only, started with `python -S`.
LAUNCHER = r"""
import json, os, shutil, signal, subprocess, sys, tarfile
spec = json.loads(sys.argv[1])
if spec["copy_from"]:
    shutil.copytree(spec["copy_from"], spec["cwd"])
    os.makedirs(spec["env"]["HOME"])
try:
    enforced = [restrict_paths(**spec["landlock"])] if spec["landlock"] else []
    enforced.append(confine_syscalls())
except OSError as error:
    sys.exit(f"sandbox: could not confine the run, nothing was run: {error}")
if spec["report"]:
    with open(os.path.join(spec["out"], "isolation.json"), "w") as stream:
        json.dump(enforced, stream)
code = subprocess.call(spec["argv"], stdin=subprocess.DEVNULL, cwd=spec["cwd"], env=spec["env"])
# The command has ended: so does everything it left running (all this uid's processes but this
# one, or all of the PID namespace's but its init), before its outputs are read.
try:
    os.kill(-1, signal.SIGKILL)
except OSError:  # none left, or (Landlock's scope) none it may signal
    pass
with os.fdopen(spec["channel"], "wb") as channel, tarfile.open(fileobj=channel, mode="w|") as tar:
    tar.add(spec["out"], arcname="out")
sys.exit(code if code >= 0 else 128 - code)
"""
# Runs on the host as the grader's user (root, or the instructor), reading its spec from stdin,
# so that no command line shows a host path: set the limits (in namespaces mode, as root, first
# exposing the binds through a private mount namespace), then fork the run, which becomes the
# sandbox's unprivileged uid and execs the launcher (or bwrap). This process stays outside it, as
# the run's parent and a child subreaper (orphans are reaped here), and a root process the run's
# uid cannot signal. When the run's first process ends, or the grader dies (PR_SET_PDEATHSIG:
# SIGTERM), every process of the run's uid is killed at once; then it exits with that status.
PREPARE = r"""
import ctypes, json, os, resource, signal, sys, time
spec = json.loads(sys.stdin.read())
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
def check(result, what):
    if result != 0:
        sys.exit(f"sandbox setup: {what}: {os.strerror(ctypes.get_errno())}")
def children_left():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        return False
    return True
def end_run(*_):
    # Without a uid of its own the run is namespaces mode's: bwrap ends it (--die-with-parent).
    for _ in range(500 if spec["uid"] is not None else 0):
        helper = os.fork()
        if helper == 0:  # the run's uid signals everything it may: exactly the run
            try:
                os.setgroups([])
                os.setgid(spec["uid"])
                os.setuid(spec["uid"])
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(helper, 0)
        if not children_left():
            break
        time.sleep(0.01)
    os._exit(status)
status = 1
for name, value in spec["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
if spec["stage"]:
    CLONE_NEWNS, MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 1, 4096, 16384, 1 << 18
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    for source, point, veil in spec["stage"]:
        check(libc.mount(source.encode(), point.encode(), None, MS_BIND | MS_REC, None), source)
        if veil is None:
            continue
        empty = os.path.join(os.path.dirname(point), "empty")
        layers = f"lowerdir={point}:{empty}".encode()
        if libc.mount(b"overlay", veil.encode(), b"overlay", MS_RDONLY, layers) != 0:
            # No overlay here: the bind itself (the mount table then names the original).
            check(libc.mount(point.encode(), veil.encode(), None, MS_BIND | MS_REC, None), veil)
check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
signal.signal(signal.SIGTERM, end_run)
check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0), "PR_SET_PDEATHSIG")
if os.getppid() != spec["parent"]:  # the grader is gone already
    os._exit(1)
me = os.getpid()
child = os.fork()
if child == 0:
    if spec["uid"] is not None:
        os.setgroups([])
        os.setgid(spec["uid"])
        os.setuid(spec["uid"])
    # Die with this process (set after setuid, which clears it).
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "PR_SET_PDEATHSIG")
    if os.getppid() != me:
        os._exit(1)
    try:
        os.execve(spec["argv"][0], spec["argv"], spec["env"])  # no PATH search
    except OSError as error:
        print(f"sandbox setup: cannot run {spec['argv'][0]} as uid {os.getuid()}: {error} "
              "(every user must be able to read the runtime: install it under /opt, as "
              "the Gradescope setup does)", file=sys.stderr)
        os._exit(127)
while True:
    try:
        pid, code = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        status = os.waitstatus_to_exitcode(code)
        status = status if status >= 0 else 128 - status
        break
end_run()
"""
NAMESPACES, CONTAINER = "namespaces", "container"
# Read-only system folders of a container-mode run (Landlock); devices it may read and write.
SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/sys",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm")
# Where any user may create files on an ordinary Linux machine (searched, with the world-writable
# folders below them, for what a run's uid left behind).
SHARED_PLACES = ("/dev/shm", "/dev/mqueue", "/tmp", "/var/tmp", "/run/lock", "/var/lock")


class SandboxUnavailable(RuntimeError):
    """No isolation level works here (what was tried, and what to do, in the message)."""


@dataclass(frozen=True)
class Isolation:
    """The level a sandbox runs at: its mode and what it enforces, in words."""

    mode: str  # NAMESPACES or CONTAINER
    enforced: tuple[str, ...]
    missing: tuple[str, ...] = ()  # what this machine could not give, and why

    def describe(self) -> str:
        text = f"{self.mode} ({', '.join(self.enforced)})"
        return text + (f"; not available here: {'; '.join(self.missing)}" if self.missing else "")


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 900  # a generous wall-clock bound: busy neighbours only slow a run down
    cpu_s: int = 300  # CPU seconds of all the run's processes together (RLIMIT_CPU: a bit more)
    memory_bytes: int = 8 * 2**30  # proportional + shared memory of all the run's processes
    address_space_bytes: int = 16 * 2**30  # per process; torch maps far more than it touches
    processes: int = 256  # processes and threads (RLIMIT_NPROC)
    file_size_bytes: int = 64 * 2**20  # largest file (RLIMIT_FSIZE)
    work_bytes: int = 64 * 2**20  # /work (the student's copy, HOME) and /tmp each
    out_bytes: int = 64 * 2**20  # /out, and what the grader reads back
    shm_bytes: int = 64 * 2**20  # tmpfs /dev/shm (namespaces mode), as Docker's default
    log_bytes: int = 32 * 2**10  # kept of stdout+stderr (head and tail)


@dataclass(frozen=True)
class Job:
    """What to run, named by sandbox paths. ``runtime`` maps sandbox paths to the large, shared,
    world-readable Python runtime (bound read-only, or used in place in container mode);
    ``binds`` maps them to the job's own files (bound read-only, or copied where only the
    run's uid can read them); ``submission`` (host folder) becomes ``/work/submission``, the
    working directory. ``masks`` are runtime paths the run must not see (is a folder)."""

    python: str  # the interpreter (sandbox path) that runs the launcher
    argv: list[str]
    binds: dict[str, Path]
    submission: Path
    env: dict[str, str] = field(default_factory=dict)
    masks: dict[str, bool] = field(default_factory=dict)
    runtime: dict[str, Path] = field(default_factory=dict)
    report_isolation: bool = False  # the probe: the launcher writes what it enforced


@dataclass
class SandboxResult:
    returncode: int | None
    seconds: float
    log: str
    timed_out: bool = False
    killed_for: str | None = None  # "memory", "cpu" or "disk" when the watchdog killed the run
    output_error: str | None = None
    output_files: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0


@dataclass(frozen=True)
class Runtime:
    """The Python the sandbox runs: the interpreter's prefix and the environment's packages,
    without ``.pth`` processing (``python -S``), so an editable install of the reference
    solution in the same environment is invisible."""

    prefix: Path
    site_packages: Path

    @classmethod
    def current(cls) -> Runtime:
        import sysconfig

        return cls(Path(sys.base_prefix), Path(sysconfig.get_paths()["purelib"]))

    def binds(self) -> dict[str, Path]:
        return {"/opt/python": self.prefix, "/opt/site-packages": self.site_packages}

    def masks(self, blocked: tuple[str, ...] = ()) -> dict[str, bool]:
        """Sandbox paths the run must not see: the ``blocked`` packages (the rubric's policy),
        and editable installs (path ``.pth`` files and their dist-info), hidden although
        inert, so nothing in the sandbox even names the instructor's checkout."""
        hidden = {}  # sandbox path -> is a folder
        for name in blocked:
            for entry in (self.site_packages / name, self.site_packages / f"{name}.py"):
                if entry.exists():
                    hidden[f"/opt/site-packages/{entry.name}"] = entry.is_dir()
        for pth in self.site_packages.glob("*.pth"):
            lines = pth.read_text(errors="replace").splitlines()
            if any(line.strip().startswith("/") for line in lines):
                hidden[f"/opt/site-packages/{pth.name}"] = False
        for url in self.site_packages.glob("*.dist-info/direct_url.json"):
            if '"editable": true' in url.read_text(errors="replace").replace('":true', '": true'):
                hidden[f"/opt/site-packages/{url.parent.name}"] = True
        return hidden

    @property
    def python(self) -> str:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return f"/opt/python/bin/{version}"

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": "/opt/site-packages", "LD_LIBRARY_PATH": "/opt/python/lib"}


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
                if _processes_of(uid):  # left over from someone else: not ours to use
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


# --- Command line -------------------------------------------------------------------------------


def _system_binds() -> list[str]:
    """``/usr`` and the top-level library/binary folders, as links where the host has links."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _passwd(uid: int) -> str:
    return f"root:x:0:0::/nonexistent:/bin/false\nstudent:x:{uid}:{uid}::/work/home:/bin/false\n"


def bwrap_command(
    job: Job, limits: SandboxLimits, sources: dict[str, str], passwd_fd: int
) -> list[str]:
    """The ``bwrap`` arguments up to the command; ``sources`` maps sandbox paths to host paths
    bwrap can read."""
    args = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
        *_system_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--ro-bind-data",
        str(passwd_fd),
        "/etc/passwd",
    ]
    for target, size in (
        ("/work", limits.work_bytes),
        ("/tmp", limits.work_bytes),
        ("/dev/shm", limits.shm_bytes),
        ("/out", limits.out_bytes),
    ):
        args += ["--size", str(size), "--tmpfs", target]
    for target, source in sorted(sources.items()):
        args += ["--ro-bind", source, target]
    for target, is_dir in sorted(job.masks.items()):
        empty = (
            ["--tmpfs", target, "--remount-ro", target]
            if is_dir
            else ["--ro-bind", "/dev/null", target]
        )
        args += empty
    # bwrap's own root and /dev are unsized tmpfs mounts: nothing may write there.
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in sorted(sandbox_env(job).items()):
        args += ["--setenv", key, value]
    return [*args, "--"]


def sandbox_env(job: Job) -> dict[str, str]:
    """The whole environment of the student's command (sandbox paths): nothing of the grader's."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/work/home",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        **job.env,
    }


@cache
def _confine_source() -> str:
    """course/grading/confine.py's definitions (not its command line: ``-c`` code runs as __main__)."""
    source = Path(__file__).with_name("confine.py").read_text(encoding="utf-8")
    return source.split('\nif __name__ == "__main__":')[0] + "\n"


def launcher_argv(python: str, spec: dict) -> list[str]:
    """The launcher: course/grading/confine.py's functions, then LAUNCHER, run by ``python -S``."""
    return [python, "-S", "-c", _confine_source() + LAUNCHER, json.dumps(spec)]


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


# --- Running ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Launch:
    """How PREPARE starts one run: the command it execs (and that command's environment), the
    bind mounts it makes first, the descriptors the run inherits, the run's box (container)."""

    argv: list[str]
    env: dict[str, str]
    stage: list[tuple[str, str]]
    fds: tuple[int, ...]
    box: Path | None = None


def _namespaces_launch(
    job: Job, limits: SandboxLimits, scratch: Path, uid: int | None, channel: int
) -> _Launch:
    sources, stage = _stage(
        {**job.runtime, **job.binds, "/in/submission": job.submission}, scratch, uid is not None
    )
    passwd_r, passwd_w = os.pipe()
    os.write(passwd_w, _passwd(uid if uid is not None else os.getuid()).encode())
    os.close(passwd_w)
    spec = {
        "argv": job.argv,
        "channel": channel,
        "copy_from": "/in/submission",
        "cwd": "/work/submission",
        "out": "/out",
        "env": sandbox_env(job),
        "landlock": None,
        "report": job.report_isolation,
    }
    # bwrap reads its options from a file, so that the sandbox's init (a copy of bwrap, whose
    # command line the run can read) names no host path; the launcher's names sandbox paths.
    bwrap, *options = bwrap_command(job, limits, sources, passwd_r)
    with tempfile.TemporaryFile(dir=scratch) as stream:
        stream.write(b"\0".join(option.encode() for option in options))
        stream.seek(0)
        options_fd = os.dup(stream.fileno())
    argv = [bwrap, "--args", str(options_fd), *launcher_argv(job.python, spec)]
    # The sandbox's init keeps this environment; it can read it.
    return _Launch(argv, {"PATH": "/usr/bin:/bin"}, stage, (channel, passwd_r, options_fd))


def _container_launch(
    job: Job, limits: SandboxLimits, scratch: Path, uid: int | None, channel: int
) -> _Launch:
    """A box only ``uid`` can enter: copies of the job's files it may read, and ``work``,
    ``tmp`` and ``out`` it owns; sandbox paths in the command and environment become box paths."""
    if uid is None:
        raise SandboxUnavailable("container mode runs code as a uid of its own: it needs root")
    box = scratch / "box"
    box.mkdir(mode=0o750)
    os.chown(box, 0, uid)
    # The runtime is used in place, named through links in the box, so that the run's command
    # line and environment name box paths only.
    (box / "rt").mkdir(mode=0o755)
    places = {}
    for target, source in job.runtime.items():
        link = box / "rt" / Path(target).name
        link.symlink_to(source, target_is_directory=True)
        places[target] = str(link)
    for i, (target, source) in enumerate(sorted(job.binds.items())):
        copy = box / "ro" / str(i)
        copy.parent.mkdir(exist_ok=True)
        _copy(source, copy)
        places[target] = str(copy)
    for name in ("work", "tmp", "out"):
        (box / name).mkdir(mode=0o700)
        places[f"/{name}"] = str(box / name)
    shutil.copytree(job.submission, box / "work" / "submission")
    (box / "work" / "home").mkdir()
    for path in [*(box / n for n in ("work", "tmp", "out")), *(box / "work").rglob("*")]:
        os.lchown(path, uid, uid)
    env = {key: _translate(value, places) for key, value in sandbox_env(job).items()}
    reads, listed = _runtime_reads(job, places)
    landlock = {
        "read": [*SYSTEM_READ, *reads, str(box / "ro")],
        "write": [str(box / n) for n in ("work", "tmp", "out")] + list(DEVICES),
        "listed": listed,
    }
    spec = {
        "argv": [_translate(arg, places) for arg in job.argv],
        "channel": channel,
        "copy_from": None,
        "cwd": str(box / "work" / "submission"),
        "out": str(box / "out"),
        "env": env,
        "landlock": landlock,
        "report": job.report_isolation,
    }
    return _Launch(launcher_argv(_translate(job.python, places), spec), env, [], (channel,), box)


def _copy(source: Path, target: Path) -> None:
    """A root-owned, world-readable copy (the box's own mode keeps other uids out)."""
    if source.is_dir():
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copyfile(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _translate(text: str, places: dict[str, str]) -> str:
    """``text`` (a path, or ``--option=path``) with its sandbox path replaced by a host path."""
    prefix, _, path = text.rpartition("=") if text.startswith("--") else ("", "", text)
    for target in sorted(places, key=len, reverse=True):
        if path == target or path.startswith(target + "/"):
            path = places[target] + path[len(target) :]
            break
    return f"{prefix}={path}" if prefix else path


def _runtime_reads(job: Job, places: dict[str, str]) -> tuple[list[str], list[str]]:
    """Host paths the run may read from the runtime, and folders it may only list: each runtime
    folder, or, where masks hide some of its entries, every other entry of it (the folder
    itself stays listable: Python's import system lists what it searches)."""
    reads, listed = [], []
    for target in job.runtime:
        hidden = {Path(m).name for m in job.masks if str(Path(m).parent) == target}
        host = Path(places[target])
        if hidden:
            reads += [str(p) for p in host.iterdir() if p.name not in hidden]
            listed.append(str(host))
        else:
            reads.append(str(host))
    return reads, listed


def _stage(binds: dict[str, Path], staging: Path, as_root: bool) -> tuple[dict[str, str], list]:
    """Host paths bwrap binds from, and (as root) the mounts that expose them to the sandbox
    uid, which may not be able to walk to the originals (e.g. under /root): a bind of each
    original, and over a folder's bind a read-only overlay, so that the sandbox's mount table
    shows the overlay's root and this staging folder, never the original's host path (a bind
    mount's entry names the folder it shows)."""
    if not as_root:
        return {target: str(source) for target, source in binds.items()}, []
    sources, mounts = {}, []
    (staging / "empty").mkdir(mode=0o755)  # an overlay without an upper layer needs two lower
    for i, (target, source) in enumerate(sorted(binds.items())):
        point, veil = staging / f"bind{i}", staging / f"view{i}"
        if source.is_dir():
            point.mkdir(mode=0o755)
            veil.mkdir(mode=0o755)
        else:
            point.touch(mode=0o644)
        sources[target] = str(veil if source.is_dir() else point)
        mounts.append((str(source), str(point), str(veil) if source.is_dir() else None))
    return sources, mounts


def _rlimits(limits: SandboxLimits, uid: int | None) -> dict[str, int]:
    # RLIMIT_NPROC counts every process of the uid; a dedicated uid starts near zero, the
    # instructor's own (not root) already has some.
    own = 0 if uid is not None else len(_processes_of(os.getuid(), threads=True))
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


# --- Watching -----------------------------------------------------------------------------------


def _processes_of(uid: int, threads: bool = False) -> list[int]:
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


class _Meter:
    """What one run uses: all processes of its uid (or, without a uid of its own, the tree
    below the process the grader started), its shared memory and its box."""

    def __init__(self, process: subprocess.Popen, uid: int | None, box: Path | None) -> None:
        self.process, self.uid, self.box = process, uid, box
        self.cpu_s = 0.0

    def pids(self) -> list[int]:
        if self.uid is None:
            return process_tree(self.process.pid)
        return _processes_of(self.uid)

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


def _watch(
    process: subprocess.Popen, limits: SandboxLimits, meter: _Meter
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
        if not _processes_of(uid):
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


def _end(process: subprocess.Popen, uid: int | None, box: Path | None) -> None:
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


def run_sandboxed(
    job: Job,
    limits: SandboxLimits,
    out_dir: Path,
    level: Isolation | None = None,
    alone: bool = False,
) -> SandboxResult:
    """Run ``job`` in a fresh sandbox at ``level`` (default: the best this machine offers);
    write its ``/out`` files into ``out_dir`` (created). As root, the run gets a uid of its own
    (a free one, see Slots) for as long as it runs. ``alone``: no other sandbox of this machine's
    graders runs meanwhile (``Slots.turn``); in container mode every run is alone, since runs
    there share ``/dev/shm`` and the abstract socket names, which are wiped only when a run
    ends. The time spent waiting for a turn is not the run's (``SandboxResult.seconds``)."""
    mode = (level or isolation()).mode
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
        setup = _namespaces_launch if mode == NAMESPACES else _container_launch
        try:
            launch = setup(job, limits, scratch, uid, channel_w)
        except BaseException:
            for fd in (channel_r, channel_w, log_r, log_w):
                os.close(fd)
            raise
        prepare = {
            "rlimits": _rlimits(limits, uid),
            "uid": uid,
            "stage": launch.stage,
            "argv": launch.argv,
            "env": launch.env,
            "parent": os.getpid(),
        }
        outputs = _CappedReader(channel_r, limits.out_bytes + 2**20, keep_tail=False)
        log = _CappedReader(log_r, limits.log_bytes // 2, keep_tail=True)
        try:
            process = _start_prepare(prepare, scratch, log_w, launch.fds)
        finally:
            for fd in (*launch.fds, log_w):
                os.close(fd)
        outputs.start()
        log.start()
        meter = _Meter(process, uid, launch.box)
        try:
            timed_out, killed_for = _watch(process, limits, meter)
        finally:
            _end(process, uid, launch.box)
        outputs.join(timeout=30)
        log.join(timeout=30)
    result = SandboxResult(
        process.returncode, time.monotonic() - started, log.text(), timed_out, killed_for
    )
    result.cpu_seconds = meter.cpu_s
    _collect_outputs(result, outputs, out_dir, limits.out_bytes)
    return result


def _start_prepare(
    prepare: dict, scratch: Path, log: int, fds: tuple[int, ...]
) -> subprocess.Popen:
    """Start PREPARE with its spec on stdin (a file: no pipe to fill, no command line to read)."""
    with tempfile.TemporaryFile(dir=scratch) as spec:
        spec.write(json.dumps(prepare).encode())
        spec.seek(0)
        return subprocess.Popen(
            [sys.executable, "-S", "-c", PREPARE],
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


# --- Which level works here ---------------------------------------------------------------------


def bwrap_version() -> tuple[int, ...]:
    """The installed bubblewrap's version; ``SandboxUnavailable`` when it is missing."""
    path = shutil.which("bwrap")
    if not path:
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    words = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.split()
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", words[-1] if words else "")
    if not match:
        raise SandboxUnavailable(f"cannot tell the version of {path}: {words}")
    return tuple(int(part or 0) for part in match.groups())


# The probe: this machine's level must run a command, and that command must not reach the
# instructor's files (argv[1]: its outputs folder; argv[2]: a JSON list of host paths it must
# fail to read or list, as JSON so that no sandbox path in them is translated).
PROBE = """
import json, os, sys
reached = []
for path in json.loads(sys.argv[2]):
    try:
        os.listdir(path) if os.path.isdir(path) else open(path, "rb").close()
        reached.append(path)
    except OSError:
        pass
open(os.path.join(sys.argv[1], "reached" if reached else "ok"), "w").write("\\n".join(reached))
"""
BASE_LAYERS = {
    NAMESPACES: (
        "bubblewrap: user, PID, mount, network, IPC and UTS namespaces, no capabilities",
        "read-only binds of the runtime and the job's files only",
    ),
    CONTAINER: (
        "a private folder and, as root, a uid of its own",
        "no_new_privs",
    ),
}
COMMON_LAYERS = (
    "rlimits",
    "watchdog: CPU time, memory, wall clock",
    "every process killed at the end",
)


def probe(mode: str, protected: tuple[Path, ...] = ()) -> Isolation:
    """Run a probe at ``mode``; the level it got, or ``SandboxUnavailable`` saying why not."""
    if mode == NAMESPACES:
        version = bwrap_version()
        if version < MIN_BWRAP:
            raise SandboxUnavailable(
                f"bubblewrap {'.'.join(map(str, version))} is too old: the sandbox needs "
                f"{'.'.join(map(str, MIN_BWRAP))} or newer (--disable-userns, --size)"
            )
    elif os.geteuid() != 0:
        raise SandboxUnavailable("container mode runs code as a uid of its own: it needs root")
    runtime = Runtime.current()
    files = [p for p in protected if p.exists()]
    files += [next((f for f in p.rglob("*") if f.is_file()), p) for p in files if p.is_dir()]
    with tempfile.TemporaryDirectory(prefix="cs336-probe-") as tmp:
        (Path(tmp) / "submission").mkdir()
        Path(tmp).chmod(0o755)
        job = Job(
            runtime.python,
            [runtime.python, "-S", "-c", PROBE, "/out", json.dumps(list(map(str, files)))],
            binds={},
            submission=Path(tmp) / "submission",
            env=runtime.env(),
            runtime=runtime.binds(),
            report_isolation=True,
        )
        out = Path(tmp) / "out"
        result = run_sandboxed(job, SandboxLimits(wall_s=120), out, Isolation(mode, ()))
        if result.output_files == ["isolation.json", "reached"]:
            raise SandboxUnavailable(
                f"{mode} mode would let student code read the instructor's files: "
                f"{(out / 'reached').read_text()!r}; make them readable by their owner only "
                "(chmod -R go-rwx), or grade where Landlock or namespaces are available"
            )
        if result.output_files != ["isolation.json", "ok"]:
            raise SandboxUnavailable(
                f"{mode} mode could not run a command here (exit status {result.returncode}):"
                f" {result.log.strip()[-600:]}"
            )
        report = json.loads((out / "isolation.json").read_text())
    enforced = [layer for layer in report if not layer.startswith("no ")]
    missing = [layer.removeprefix("no ") for layer in report if layer.startswith("no ")]
    return Isolation(mode, (*BASE_LAYERS[mode], *enforced, *COMMON_LAYERS), tuple(missing))


def _namespace_hint() -> str:
    switch = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if switch.is_file() and switch.read_text().strip() == "0":
        return " (unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1)"
    return ""


@cache
def isolation(protected: tuple[Path, ...] = ()) -> Isolation:
    """The best level that works here: namespaces, else container mode (both probed); the
    environment variable CS336_ISOLATION=namespaces|container insists on one.
    ``SandboxUnavailable`` says what was tried and what to do."""
    wanted = os.environ.get("CS336_ISOLATION", "")
    if wanted not in ("", NAMESPACES, CONTAINER):
        raise SandboxUnavailable(f"CS336_ISOLATION={wanted!r}: use {NAMESPACES} or {CONTAINER}")
    failures = []
    for mode in [wanted] if wanted else [NAMESPACES, CONTAINER]:
        try:
            level = probe(mode, protected)
        except SandboxUnavailable as error:
            failures.append(f"{mode}: {error}")
            continue
        return replace(level, missing=(*failures, *level.missing))
    hint = _namespace_hint() if not wanted or wanted == NAMESPACES else ""
    raise SandboxUnavailable("no sandbox works here" + hint + ":\n  " + "\n  ".join(failures))
