"""The Gradescope autograder: ``make gradescope`` builds its zip; Gradescope runs it.

``python -m course.grading.gradescope build [--out ZIP]`` writes the zip Gradescope's "Configure
Autograder" page takes: ``setup.sh`` and ``run_autograder`` at the top, and the grader's files
(``course/``: grader, driver, judge, rubric, hidden inputs and expected values; the case
definitions under ``tests/``; ``fixtures/``; ``pyproject.toml`` and ``uv.lock``). The reference
solution is not in it: the machine that runs students' code never holds it.

On Gradescope, ``setup.sh`` (once, as root) installs bubblewrap and uv, creates the locked
environment under ``/opt/cs336`` (world-readable, so the sandbox's unprivileged uid can run it),
makes the grader's own files (``/autograder/source``: expected values, rubric, judge) and the
packages the rubric blocks readable by root only (``harden``), and checks which isolation level
works (``check``): inside Gradescope's ordinary Docker container no namespace can be made, so
it is container mode (``course/grading/sandbox.py``), and ``check`` says what it could not enable.
``run_autograder`` (per submission, as root) runs ``python -m course.grading.gradescope run``, which
packs ``/autograder/submission`` back into a zip (links, devices and FIFOs are kept as such,
so the strict unpacker refuses them with its usual message) and grades it with
``cs336-grade``'s code into ``/autograder/results/results.json``, which names the isolation
level in ``extra_data``. The driver runs as an unprivileged uid inside the sandbox; the judge
runs as root, outside.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from course.grading.grade import CASE_FILES, RUBRIC, Course, grade
from course.grading.unpack import ArchiveLimits
from course.paths import REPO_ROOT

OPT = "/opt/cs336"
BUNDLED = (
    "pyproject.toml",
    "uv.lock",
    "course/__init__.py",
    "course/paths.py",
    "course/workspace.py",
    "course/pytest_outcomes.py",
    "course/grading",
    "course/cases/hidden",
    "fixtures",
    *CASE_FILES,
)
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update
# python3: for pip, should uv's installer fail; where it is the grader's Python, uv uses it.
apt-get install -y --no-install-recommends bubblewrap curl ca-certificates python3 python3-venv
mkdir -p {opt}/bin
if ! curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR={opt}/bin UV_NO_MODIFY_PATH=1 sh; then
    python3 -m venv {opt}/uv-venv && {opt}/uv-venv/bin/pip install --quiet uv
    ln -sf {opt}/uv-venv/bin/uv {opt}/bin/uv
fi
cd /autograder/source
# The environment lives outside /root so the sandbox's unprivileged uid can read it. Its Python
# is the handout's (.python-version): uv downloads it where the image has none, or uses the
# interpreter CS336_GRADER_PYTHON names (make gradescope-docker lends the host's: no download).
UV_PYTHON_INSTALL_DIR={opt}/python UV_PROJECT_ENVIRONMENT={opt}/venv \\
    UV_PYTHON="${{CS336_GRADER_PYTHON:-{python}}}" \\
    {opt}/bin/uv sync --locked --no-install-project
chmod -R a+rX {opt}
# The grader's files and the blocked packages: root only. Then: which isolation works here.
{opt}/venv/bin/python -m course.grading.gradescope harden
{opt}/venv/bin/python -m course.grading.gradescope check
"""
RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission, as root.
cd /autograder/source
mkdir -p /autograder/results
chmod 700 /autograder/results
{OPT}/venv/bin/python -m course.grading.gradescope run /autograder/submission /autograder/results
if [ ! -s /autograder/results/results.json ]; then
    echo '{{"score": 0, "output": "grader error: the autograder stopped without a result; tell the course staff", "tests": []}}' \\
        > /autograder/results/results.json
fi
"""


def bundle_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files of the autograder zip, relative to ``root`` (no reference solution)."""
    files = []
    for rel in BUNDLED:
        path = root / rel
        if path.is_dir():
            files += [
                p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            ]
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(
                f"{path} is missing (run `make hidden-cases` / `make fixtures`?)"
            )
    return [p.relative_to(root) for p in files]


def setup_script(root: Path = REPO_ROOT) -> str:
    """``setup.sh`` for the checkout at ``root``: it installs the handout's Python minor."""
    from course.handout.build import grader_python  # in the checkout that builds, not in the bundle

    return SETUP_SH.format(opt=OPT, python=grader_python(root))


def build(out: Path, root: Path = REPO_ROOT) -> Path:
    """Write the Gradescope autograder zip to ``out`` atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", setup_script(root)), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)
        for rel in bundle_files(root):
            info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (root / rel).read_bytes())
    os.replace(partial, out)
    return out


def pack_folder(folder: Path, out: Path, limits: ArchiveLimits | None = None) -> Path:
    """Zip what Gradescope unpacked into ``folder`` without following links; links, FIFOs and
    devices become entries of their own type, which the strict unpacker then refuses. An
    uploaded zip that Gradescope kept as it is (the only file) is used directly."""
    limits = limits or ArchiveLimits()
    entries = []
    for top, dirs, files in os.walk(folder):  # never follows links
        entries += [Path(top) / name for name in sorted(dirs) + sorted(files)]
    zips = [p for p in entries if p.suffix == ".zip" and p.is_file() and not p.is_symlink()]
    if len(zips) == 1 and not any(p.name == "cs336_basics" for p in entries):
        return zips[0]
    budget = limits.max_bytes + 1  # one byte over is enough for the unpacker to refuse
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in entries[: limits.max_members + 1]:  # one entry over is enough, too
            mode = path.lstat().st_mode
            name = path.relative_to(folder).as_posix()
            info = zipfile.ZipInfo(name + "/" if stat.S_ISDIR(mode) else name)
            info.external_attr = mode << 16
            data = b""
            if stat.S_ISREG(mode):
                with open(path, "rb") as stream:
                    data = stream.read(budget)
                budget = max(budget - len(data), 0)
            archive.writestr(info, data)
    return out


def run(
    submission: Path, results: Path, rubric: Path = RUBRIC, course: Course | None = None
) -> dict:
    """Grade Gradescope's submission folder into ``results/results.json``."""
    with tempfile.TemporaryDirectory(prefix="cs336-gradescope-") as tmp:
        zip_path = pack_folder(submission, Path(tmp) / "submission.zip")
        jobs = os.cpu_count() or 2
        # Gradescope puts the submission's metadata beside the submission folder.
        metadata = submission.parent / "submission_metadata.json"
        return grade(
            zip_path,
            results,
            rubric=rubric,
            course=course or Course(),
            jobs=jobs,
            metadata=metadata,
        )


def harden(
    source: Path = Path("/autograder/source"), rubric: Path = RUBRIC, site: Path | None = None
) -> list[Path]:
    """Make the grader's files (expected values, rubric, judge, bundle) and the packages the
    rubric blocks (in ``site``, default: this environment's) readable by their owner (root)
    only: where Landlock is missing, ownership is what keeps the sandbox's uid out of them.
    Returns what it closed."""
    from course.grading.judge import load_rubric
    from course.grading.sandbox import Runtime

    site = site or Runtime.current().site_packages
    blocked = [site / name for name in load_rubric(rubric).blocked_packages]
    closed = [source, *(p for p in blocked if p.exists())]
    for top in closed:
        for path in [top, *top.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode & 0o700)
    return closed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="write the autograder zip")
    build_cmd.add_argument(
        "--out", type=Path, default=REPO_ROOT / "dist" / "gradescope-autograder.zip"
    )
    run_cmd = commands.add_parser("run", help="grade a submission folder (run_autograder)")
    run_cmd.add_argument("submission", type=Path)
    run_cmd.add_argument("results", type=Path)
    commands.add_parser("harden", help="grader files and blocked packages: root only (setup.sh)")
    commands.add_parser("check", help="print the isolation level; fail if none works (setup.sh)")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(f"wrote {build(args.out)}")
    elif args.command == "run":
        report = run(args.submission, args.results)
        print(json.dumps({"score": report["score"], "output": report["output"]}))
    elif args.command == "harden":
        for path in harden():
            print(f"readable by root only: {path}")
    else:
        from course.grading.grade import protected_paths
        from course.grading.sandbox import SandboxUnavailable, isolation

        try:
            level = isolation(protected_paths(Course()))
        except SandboxUnavailable as error:
            print(f"no sandbox works here: {error}", file=sys.stderr)
            return 1
        print(f"sandbox ok: {level.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
