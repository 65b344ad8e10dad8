"""Container mode (an ordinary Docker container, where no namespace can be made): the run gets a
private folder ("box") that only its uid may enter, with copies of the job's files, and names
only box paths; Landlock, where the kernel offers it, holds it to its box and the system's
read-only folders (``course/grading/confine.py``, applied by the launcher)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from course.grading.sandbox.job import Job, SandboxLimits, SandboxUnavailable, sandbox_env
from course.grading.sandbox.launch import Launch, launcher_argv

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


def container_launch(
    job: Job, limits: SandboxLimits, scratch: Path, uid: int | None, channel: int
) -> Launch:
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
    return Launch(launcher_argv(_translate(job.python, places), spec), env, [], (channel,), box)


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
