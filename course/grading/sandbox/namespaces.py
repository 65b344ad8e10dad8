"""Namespaces mode: bubblewrap (``bwrap``) gives the run new user, PID, mount, network, IPC, UTS
and cgroup namespaces and a file system of read-only binds of exactly the job's files; as root,
the binds are first staged where the sandbox's uid can reach them, under overlays that keep the
originals' host paths out of the run's mount table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from course.grading.sandbox.job import Job, SandboxLimits, SandboxUnavailable, sandbox_env
from course.grading.sandbox.launch import Launch, launcher_argv

MIN_BWRAP = (0, 8, 0)


INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`)"


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


def namespaces_launch(
    job: Job, limits: SandboxLimits, scratch: Path, uid: int | None, channel: int
) -> Launch:
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
    return Launch(argv, {"PATH": "/usr/bin:/bin"}, stage, (channel, passwd_r, options_fd))


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
