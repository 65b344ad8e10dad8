"""Run untrusted code in a bubblewrap sandbox and collect the files it writes.

``run_sandboxed(job, limits, out_dir)`` runs ``job.argv`` under ``bwrap`` with

* new user, PID, mount, network, IPC, UTS and cgroup namespaces (``--unshare-all``), no
  capabilities, no nested user namespaces (``--disable-userns``), its own session, and death
  with the grader (``--die-with-parent``); only a loopback network exists inside;
* a file system made of read-only binds of exactly ``job.binds`` (the Python runtime, the
  driver, the case definitions, the case inputs) plus ``/usr``; a synthetic ``/etc/passwd``;
  fresh ``/proc``, a minimal ``/dev``, and size-capped private tmpfs mounts for ``/work`` (the
  student's files are copied there before anything of theirs runs), ``/tmp``, ``/dev/shm``
  and ``/out`` (the driver's outputs);
* as an unprivileged user: when the grader runs as root, the sandbox runs as a dedicated uid
  (one per concurrent slot, so process counts of parallel runs never mix), and the grader's
  own files are reached through binds prepared in a private mount namespace;
* limits: ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_NPROC`` and no core dumps
  for every process; a watchdog that kills the whole tree at the wall-clock limit or when the
  resident memory of all its processes together passes ``memory_bytes``. Killing the sandbox's
  PID-namespace init takes every process inside with it, daemons included.

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
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

MIN_BWRAP = (0, 8, 0)
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`)"
SANDBOX_UID_BASE = 61000  # uids SANDBOX_UID_BASE + slot; no files or processes of their own
PAGE = os.sysconf("SC_PAGE_SIZE")
SAFE_NAME = re.compile(r"[A-Za-z0-9_.@+=-]{1,200}")
MAX_OUTPUT_FILES = 10_000
POLL_S = 0.2

# Runs inside the sandbox before anything of the student's: copy their files to the tmpfs, run
# the command, then stream /out to the channel. Stdlib only, started with `python -S`.
LAUNCHER = r"""
import json, os, shutil, subprocess, sys, tarfile
spec = json.loads(sys.argv[1])
shutil.copytree("/in/submission", "/work/submission")
os.makedirs("/work/home")
code = subprocess.call(spec["argv"], stdin=subprocess.DEVNULL, cwd="/work/submission")
with os.fdopen(spec["channel"], "wb") as channel, tarfile.open(fileobj=channel, mode="w|") as tar:
    tar.add("/out", arcname="out")
sys.exit(code if code >= 0 else 128 - code)
"""
# Runs on the host between fork and bwrap: set the limits, and, as root, expose the binds through
# a private mount namespace and become the sandbox's unprivileged uid. It stays as bwrap's parent
# and a child subreaper, so the processes bwrap leaves to be reaped are reaped here, and exits
# with bwrap's status. After setuid the stdlib may be unreadable: nothing is imported late.
PREPARE = r"""
import ctypes, json, os, resource, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        sys.exit(f"sandbox setup: {what}: {os.strerror(ctypes.get_errno())}")
for name, value in spec["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
if spec["uid"] is not None:
    CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x20000, 4096, 16384, 1 << 18
    check(libc.unshare(CLONE_NEWNS), "unshare")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private mounts")
    for source, target in spec["stage"]:
        check(libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), source)
    os.setgroups([])
    os.setgid(spec["uid"])
    os.setuid(spec["uid"])
check(libc.prctl(36, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")
# Die with the grader (bwrap's --die-with-parent then ends the sandbox). Set after setuid,
# which clears it; a grader already gone is seen as a changed parent.
check(libc.prctl(1, 9, 0, 0, 0), "PR_SET_PDEATHSIG")
if os.getppid() != spec["parent"]:
    os._exit(1)
child = os.fork()
if child == 0:
    os.execv(spec["argv"][0], spec["argv"])  # no PATH search: the stdlib may be out of reach
status = 0
while True:
    try:
        pid, code = os.wait()
    except ChildProcessError:
        break
    if pid == child:
        status = os.waitstatus_to_exitcode(code)
os._exit(status if status >= 0 else 128 - status)
"""


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here."""


@dataclass(frozen=True)
class SandboxLimits:
    wall_s: float = 300
    cpu_s: int = 600  # per process (RLIMIT_CPU)
    memory_bytes: int = 8 * 2**30  # resident memory of the whole tree (the watchdog)
    address_space_bytes: int = 16 * 2**30  # per process; torch maps far more than it touches
    processes: int = 256  # processes and threads (RLIMIT_NPROC)
    file_size_bytes: int = 64 * 2**20  # largest file (RLIMIT_FSIZE)
    work_bytes: int = 64 * 2**20  # tmpfs /work (the student's copy, HOME) and /tmp each
    out_bytes: int = 64 * 2**20  # tmpfs /out, and what the grader reads back
    shm_bytes: int = 512 * 2**20  # tmpfs /dev/shm
    log_bytes: int = 32 * 2**10  # kept of stdout+stderr (head and tail)


@dataclass(frozen=True)
class Job:
    """What to run. ``binds`` maps sandbox paths to host files or folders (read-only);
    ``submission`` (host folder) is copied to ``/work/submission``, the working directory."""

    python: str  # the interpreter (sandbox path) that runs the launcher
    argv: list[str]
    binds: dict[str, Path]
    submission: Path
    env: dict[str, str] = field(default_factory=dict)
    masks: dict[str, bool] = field(default_factory=dict)  # hidden sandbox path -> is a folder


@dataclass
class SandboxResult:
    returncode: int | None
    seconds: float
    log: str
    timed_out: bool = False
    killed_for: str | None = None  # "memory" when the watchdog killed the tree for it
    output_error: str | None = None
    output_files: list[str] = field(default_factory=list)


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

    def masks(self) -> dict[str, bool]:
        """Sandbox paths of editable installs (path ``.pth`` files and their dist-info), hidden
        although inert, so nothing in the sandbox even names the instructor's checkout."""
        hidden = {}  # sandbox path -> is a folder
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
    """Small integers unique among the sandboxes running at once on this machine, also across
    grader processes (a lock file per slot): each slot is its own sandbox uid."""

    def __init__(self, count: int = 256) -> None:
        self.count = count
        self._held: dict[int, int] = {}  # slot -> fd of its lock file
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
            for slot in range(self.count):
                if slot in self._held:
                    continue
                fd = os.open(folder / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[slot] = fd
                return slot
        raise RuntimeError(f"all {self.count} sandbox slots are busy")

    def give(self, slot: int) -> None:
        with self._lock:
            os.close(self._held.pop(slot))  # closing releases the lock


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
    job: Job, limits: SandboxLimits, sources: dict[str, str], channel: int, passwd_fd: int
) -> list[str]:
    """The ``bwrap`` argument list; ``sources`` maps sandbox paths to host paths bwrap can read."""
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
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/work/home",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        **job.env,
    }
    for key, value in sorted(env.items()):
        args += ["--setenv", key, value]
    spec = json.dumps({"argv": job.argv, "channel": channel})
    return [*args, "--", job.python, "-S", "-c", LAUNCHER, spec]


# --- Running ------------------------------------------------------------------------------------


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


def _resident_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    return total


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


def _watch(process: subprocess.Popen, limits: SandboxLimits) -> tuple[bool, str | None]:
    """Wait for ``process``; kill its tree on the wall-clock or memory limit."""
    deadline = time.monotonic() + limits.wall_s
    while True:
        try:
            process.wait(timeout=POLL_S)
            return False, None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > deadline:
            kill_tree(process)
            return True, None
        if _resident_bytes(process_tree(process.pid)) > limits.memory_bytes:
            kill_tree(process)
            return False, "memory"


def _rlimits(limits: SandboxLimits, uid: int | None) -> dict[str, int]:
    # RLIMIT_NPROC counts every process of the uid; a dedicated uid starts near zero, the
    # instructor's own (not root) already has some.
    own = 0 if uid is not None else _process_count(os.getuid())
    return {
        "RLIMIT_AS": limits.address_space_bytes,
        "RLIMIT_CPU": limits.cpu_s,
        "RLIMIT_FSIZE": limits.file_size_bytes,
        "RLIMIT_NPROC": own + limits.processes,
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 4096,
    }


def _process_count(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        with suppress(OSError):
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid:
                count += len(os.listdir(f"/proc/{entry}/task"))
    return count


def _stage(binds: dict[str, Path], staging: Path, as_root: bool) -> tuple[dict[str, str], list]:
    """Host paths bwrap binds from, and (as root) the bind mounts that expose them to the
    sandbox uid, which may not be able to walk to the originals (e.g. under /root)."""
    if not as_root:
        return {target: str(source) for target, source in binds.items()}, []
    sources, mounts = {}, []
    for i, (target, source) in enumerate(sorted(binds.items())):
        point = staging / f"bind{i}"
        if source.is_dir():
            point.mkdir(mode=0o755)
        else:
            point.touch(mode=0o644)
        sources[target] = str(point)
        mounts.append((str(source), str(point)))
    return sources, mounts


def run_sandboxed(job: Job, limits: SandboxLimits, out_dir: Path) -> SandboxResult:
    """Run ``job`` in a fresh sandbox; write its ``/out`` files into ``out_dir`` (created).
    As root, the sandbox gets a uid of its own (a free slot) for as long as it runs."""
    if not shutil.which("bwrap"):
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
    if os.geteuid() != 0:
        return _run(job, limits, out_dir, uid=None)
    slot = SLOTS.take()
    try:
        return _run(job, limits, out_dir, uid=SANDBOX_UID_BASE + slot)
    finally:
        SLOTS.give(slot)


def _run(job: Job, limits: SandboxLimits, out_dir: Path, uid: int | None) -> SandboxResult:
    as_root = uid is not None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cs336-sandbox-") as tmp:
        staging = Path(tmp)
        staging.chmod(0o711)
        sources, mounts = _stage({**job.binds, "/in/submission": job.submission}, staging, as_root)
        channel_r, channel_w = os.pipe()
        log_r, log_w = os.pipe()
        passwd_r, passwd_w = os.pipe()
        os.write(passwd_w, _passwd(uid if uid is not None else os.getuid()).encode())
        os.close(passwd_w)
        command = bwrap_command(job, limits, sources, channel_w, passwd_r)
        prepare = {
            "rlimits": _rlimits(limits, uid),
            "uid": uid,
            "stage": mounts,
            "argv": command,
            "parent": os.getpid(),
        }
        outputs = _CappedReader(channel_r, limits.out_bytes + 2**20, keep_tail=False)
        log = _CappedReader(log_r, limits.log_bytes // 2, keep_tail=True)
        try:
            process = subprocess.Popen(
                [sys.executable, "-S", "-c", PREPARE, json.dumps(prepare)],
                stdin=subprocess.DEVNULL,
                stdout=log_w,
                stderr=log_w,
                env={"PATH": "/usr/bin:/bin"},  # the sandbox's init keeps this; it can read it
                pass_fds=(channel_w, passwd_r),
                start_new_session=True,
            )
        finally:
            for fd in (channel_w, log_w, passwd_r):
                os.close(fd)
        outputs.start()
        log.start()
        try:
            timed_out, killed_for = _watch(process, limits)
        finally:
            if process.returncode is None:  # never signal a reaped pid: it may be reused
                kill_tree(process)
        outputs.join(timeout=30)
        log.join(timeout=30)
    result = SandboxResult(
        process.returncode, time.monotonic() - started, log.text(), timed_out, killed_for
    )
    _collect_outputs(result, outputs, out_dir, limits.out_bytes)
    return result


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


def check_sandbox() -> None:
    """Raise ``SandboxUnavailable`` (with what to do) unless bwrap works here."""
    version = bwrap_version()
    if version < MIN_BWRAP:
        raise SandboxUnavailable(
            f"bubblewrap {'.'.join(map(str, version))} is too old: the sandbox needs "
            f"{'.'.join(map(str, MIN_BWRAP))} or newer (--disable-userns, --size)"
        )
    runtime = Runtime.current()
    with tempfile.TemporaryDirectory(prefix="cs336-probe-") as tmp:
        probe = Path(tmp) / "probe"
        (probe / "submission").mkdir(parents=True)
        probe.chmod(0o755)
        job = Job(
            python=runtime.python,
            argv=[runtime.python, "-S", "-c", "open('/out/ok', 'w').write('ok')"],
            binds=runtime.binds(),
            submission=probe / "submission",
            env=runtime.env(),
        )
        result = run_sandboxed(job, SandboxLimits(wall_s=60), Path(tmp) / "out")
        if result.output_files != ["ok"]:
            raise SandboxUnavailable(
                f"bubblewrap could not run a sandbox here (exit status {result.returncode}):\n"
                f"{result.log.strip()[-800:]}\nIt needs unprivileged user namespaces "
                f"(sysctl kernel.unprivileged_userns_clone=1); {INSTALL_HINT}."
            )
