"""The Gradescope autograder: ``make gradescope`` builds its zip; Gradescope runs it.

``python -m course.grading.gradescope build [--out ZIP]`` writes the zip Gradescope's "Configure
Autograder" page takes: ``setup.sh`` and ``run_autograder`` at the top (from
``course/grading/programs/``), the grading package as a whole (``course/grading/``: grader,
driver, judge, sandbox and its programs, rubric) with every shared module of ``course/``, the
hidden inputs and expected values, the case definitions under ``tests/``, ``fixtures/``,
``pyproject.toml`` and ``uv.lock``. The reference solution is not in it: the machine that runs
students' code never holds it.

On Gradescope, ``setup.sh`` (once, as root) installs bubblewrap and uv, creates the locked
environment under ``/opt/cs336`` (world-readable, so the sandbox's unprivileged uid can run it),
makes the grader's own files (``/autograder/source``: expected values, rubric, judge) and the
packages the rubric blocks readable by root only (``harden``), and checks which isolation level
works (``check``): inside Gradescope's ordinary Docker container no namespace can be made, so
it is container mode (``course/grading/sandbox/``), and ``check`` says what it could not enable.
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

from course.grading.grade import CASE_FILES, DIAGNOSIS_FILES, Course, grade
from course.grading.unpack import ArchiveLimits
from course.paths import DIST, REPO_ROOT, RUBRIC
from course.project import grader_python

PROGRAMS = Path(__file__).with_name("programs")
# The setup's one value from the checkout that builds the bundle (its scripts are files there).
PYTHON_SLOT = "@GRADER_PYTHON@"
# Beside the grading package (which goes whole) and the shared modules (every course/*.py).
BUNDLED = ("pyproject.toml", "uv.lock", "course/grading", "course/cases/hidden", "fixtures")


def bundled_paths(root: Path = REPO_ROOT) -> list[str]:
    """What the bundle holds, relative to ``root``: the grading package as a whole, every
    shared module of ``course/`` (grading imports nothing else of it), the hidden cases, the
    fixtures, the pristine case files (and the public run's diagnoses) and the lock."""
    shared = sorted(p.relative_to(root).as_posix() for p in (root / "course").glob("*.py"))
    diagnoses = [rel for rel in DIAGNOSIS_FILES if rel not in BUNDLED]
    return [*BUNDLED, *shared, *CASE_FILES, *diagnoses]


def bundle_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files of the autograder zip, relative to ``root`` (no reference solution)."""
    files = []
    for rel in bundled_paths(root):
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
    """``programs/setup.sh`` for the checkout at ``root``: it installs the handout's Python
    minor."""
    template = (PROGRAMS / "setup.sh").read_text(encoding="utf-8")
    if PYTHON_SLOT not in template:
        raise ValueError(f"{PROGRAMS / 'setup.sh'} has no {PYTHON_SLOT} for the Python minor")
    return template.replace(PYTHON_SLOT, grader_python(root))


def build(out: Path, root: Path = REPO_ROOT) -> Path:
    """Write the Gradescope autograder zip to ``out`` atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        scripts = {
            "setup.sh": setup_script(root),
            "run_autograder": (PROGRAMS / "run_autograder").read_text(encoding="utf-8"),
        }
        for name, text in scripts.items():
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
    build_cmd.add_argument("--out", type=Path, default=DIST / "gradescope-autograder.zip")
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
