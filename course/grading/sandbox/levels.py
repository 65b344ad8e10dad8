"""Which isolation level works here: each mode is probed with a real run (``programs/probe.py``)
that must work and must not reach the instructor's files; ``isolation()`` keeps the best."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import replace
from functools import cache
from pathlib import Path

from course.grading.sandbox.job import (
    CONTAINER,
    NAMESPACES,
    Isolation,
    Job,
    Runtime,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
)
from course.grading.sandbox.launch import program
from course.grading.sandbox.namespaces import MIN_BWRAP, bwrap_version
from course.grading.sandbox.run import run_in_mode

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


def run_sandboxed(
    job: Job,
    limits: SandboxLimits,
    out_dir: Path,
    level: Isolation | None = None,
    alone: bool = False,
) -> SandboxResult:
    """Run ``job`` in a fresh sandbox at ``level`` (default: the best this machine offers,
    ``isolation()``); see ``run.run_in_mode``."""
    return run_in_mode(job, limits, out_dir, (level or isolation()).mode, alone)


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
            [
                runtime.python,
                "-S",
                "-c",
                program("probe"),
                "/out",
                json.dumps(list(map(str, files))),
            ],
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
