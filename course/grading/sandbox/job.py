"""What a sandboxed run is: the job (named by sandbox paths), its limits, its result, the Python
runtime it runs, and the isolation level it runs at."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

NAMESPACES, CONTAINER = "namespaces", "container"


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
