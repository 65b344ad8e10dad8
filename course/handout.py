"""Build the student handout from the reference solution.

``python -m course.handout`` (``make handout``) writes ``dist/handout/`` and
``dist/cs336-basics-handout-<version>.zip``:

- every ``# BEGIN SOLUTION`` .. ``# END SOLUTION`` region (a pair of comment lines at the same
  indentation, inside a function body) becomes ``raise NotImplementedError`` at that
  indentation; signatures, docstrings, type hints and code outside regions stay;
- instructor-only paths are left out: ``course/``, ``benchmarks/``, ``.ci/`` and every test file
  that imports ``course`` (those test the toolchain, not the student's code);
- the README, Makefile and a ``HANDOUT_VERSION`` stamp are written for students, and
  ``course/submission.py`` ships as ``make_submission.py`` so ``make submission`` works there.

The build is deterministic: the same commit gives a byte-identical zip.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from course.manifest import write_manifest

REPO_ROOT = Path(__file__).resolve().parent.parent
COURSE_DIR = REPO_ROOT / "course"
BEGIN_MARKER = "# BEGIN SOLUTION"
END_MARKER = "# END SOLUTION"
STUB = "raise NotImplementedError"

# Top-level paths that never ship. README.md and Makefile are replaced by student versions.
INSTRUCTOR_ONLY = ("course", "benchmarks", ".ci", "dist", "runs", "README.md", "Makefile")
SKIPPED_PARTS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}
IMPORTS_COURSE = re.compile(r"^(from\s+course[\s.]|import\s+course\b)", re.MULTILINE)
INSTRUCTOR_MARK = re.compile(r"^pytestmark = pytest\.mark\.instructor\b", re.MULTILINE)
# A fixed timestamp (the earliest a zip can hold) keeps the archive byte-identical across builds.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class MarkerError(ValueError):
    """A solution region is malformed (unmatched, nested, or misindented markers)."""


def strip_solutions(source: str, path: str = "<source>") -> tuple[str, int]:
    """Replace each solution region of ``source`` by ``raise NotImplementedError``.

    Returns the new source and the number of regions. Marker lines must hold nothing but the
    marker; ``END`` must sit at the indentation of its ``BEGIN``.
    """
    out: list[str] = []
    regions = 0
    open_at: tuple[int, str] | None = None  # (line number, indentation) of the open region
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == BEGIN_MARKER:
            if open_at is not None:
                raise MarkerError(
                    f"{path}:{number}: nested {BEGIN_MARKER} (open since line {open_at[0]})"
                )
            open_at = (number, indent)
            out.append(f"{indent}{STUB}\n")
            regions += 1
        elif stripped == END_MARKER:
            if open_at is None:
                raise MarkerError(
                    f"{path}:{number}: {END_MARKER} without a matching {BEGIN_MARKER}"
                )
            if indent != open_at[1]:
                raise MarkerError(
                    f"{path}:{number}: {END_MARKER} is indented differently from its "
                    f"{BEGIN_MARKER} on line {open_at[0]}"
                )
            open_at = None
        elif open_at is None:
            out.append(line)
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at[0]}: {BEGIN_MARKER} is never closed")
    return "".join(out), regions


def check_stub_syntax(stubbed: str, path: str) -> None:
    """A region that is not a run of whole statements leaves invalid Python behind."""
    try:
        ast.parse(stubbed, filename=path)
    except SyntaxError as error:
        raise MarkerError(
            f"{path}:{error.lineno}: stripping solution regions leaves invalid Python near that line ({error.msg}); "
            "a region must hold whole statements of a function body"
        ) from None


def is_instructor_test(path: Path) -> bool:
    """Instructor-only test files: those importing ``course`` at module level test the toolchain,
    and those marked ``pytestmark = pytest.mark.instructor`` test code that ships as it is (the
    config, the snapshot plugin); both would pass without any student code."""
    if path.suffix != ".py":
        return False
    text = path.read_text(encoding="utf-8")
    return bool(IMPORTS_COURSE.search(text) or INSTRUCTOR_MARK.search(text))


def source_files(root: Path = REPO_ROOT) -> list[Path]:
    """Repository files (relative paths) a handout may draw from: tracked plus untracked-but-not-
    ignored files when ``root`` is a git checkout, else every file outside caches."""
    try:
        listed = (
            subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                cwd=root,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        candidates = [Path(p) for p in listed if p]
    except (OSError, subprocess.CalledProcessError):
        candidates = [p.relative_to(root) for p in root.rglob("*")]
    return sorted(
        {p for p in candidates if (root / p).is_file() and not SKIPPED_PARTS & set(p.parts)}
    )


def shipped_files(root: Path = REPO_ROOT) -> list[Path]:
    """The subset of ``source_files`` that goes to students (before stripping)."""
    return [
        p
        for p in source_files(root)
        if p.parts[0] not in INSTRUCTOR_ONLY
        and not (p.parts[0] == "tests" and is_instructor_test(root / p))
    ]


def project_version(root: Path = REPO_ROOT) -> str:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]


def git_stamp(root: Path = REPO_ROOT) -> tuple[str, str]:
    """``(short commit, commit date)`` of HEAD, ``("unknown", "unknown")`` outside git."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h %cs"],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        ).stdout.split()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return out[0] + ("+dirty" if dirty else ""), out[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown", "unknown"


def changelog(root: Path = REPO_ROOT) -> str:
    """The body of ``course/CHANGELOG.md`` (its first heading dropped)."""
    path = root / "course" / "CHANGELOG.md"
    if not path.is_file():
        return "No changes yet.\n"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "".join(lines).strip() + "\n"


def student_pyproject(text: str) -> str:
    """The reference ``pyproject.toml`` minus what only makes sense with ``course/`` present."""
    text = re.sub(r"^cs336-grade\s*=.*\n", "", text, flags=re.MULTILINE)
    return re.sub(r"packages\s*=\s*\[[^\]]*\]", 'packages = ["cs336_basics"]', text)


@dataclass
class Handout:
    directory: Path
    zip_path: Path
    version: str
    regions: int
    files: int


def build(
    out_dir: Path = REPO_ROOT / "dist",
    root: Path = REPO_ROOT,
    zip_name: str | None = None,
) -> Handout:
    """Write ``out_dir/handout/`` and the handout zip; return what was built."""
    version = project_version(root)
    commit, date = git_stamp(root)
    handout_dir = out_dir / "handout"
    staging = Path(tempfile.mkdtemp(prefix=".handout-", dir=_ensure(out_dir)))
    regions = 0
    try:
        for rel in shipped_files(root):
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if rel.suffix == ".py":
                text, count = strip_solutions((root / rel).read_text(encoding="utf-8"), str(rel))
                check_stub_syntax(text, str(rel))
                target.write_text(text, encoding="utf-8")
                regions += count
            elif rel.name == "pyproject.toml" and len(rel.parts) == 1:
                target.write_text(student_pyproject((root / rel).read_text()), encoding="utf-8")
            else:
                shutil.copyfile(root / rel, target)
        shutil.copyfile(COURSE_DIR / "submission.py", staging / "make_submission.py")
        write_manifest(staging)  # the handout's own tests and fixtures
        stamp = f"{version} (commit {commit}, {date})"
        (staging / "HANDOUT_VERSION").write_text(stamp + "\n")
        template = (COURSE_DIR / "handout_readme.md").read_text(encoding="utf-8")
        (staging / "README.md").write_text(
            template.replace("{version}", stamp).replace("{changelog}", changelog(root)),
            encoding="utf-8",
        )
        shutil.copyfile(COURSE_DIR / "handout_makefile", staging / "Makefile")
        if handout_dir.exists():
            shutil.rmtree(handout_dir)
        os.replace(staging, handout_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = sorted(p for p in handout_dir.rglob("*") if p.is_file())
    zip_path = out_dir / (zip_name or f"cs336-basics-handout-{version}.zip")
    write_zip(zip_path, handout_dir, files, prefix="cs336-basics/")
    return Handout(handout_dir, zip_path, stamp, regions, len(files))


def write_zip(zip_path: Path, base: Path, files: list[Path], prefix: str = "") -> None:
    """Deterministic zip (sorted entries, fixed timestamps), written atomically."""
    partial = zip_path.with_name(zip_path.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            info = zipfile.ZipInfo(prefix + path.relative_to(base).as_posix(), date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    os.replace(partial, zip_path)


def _ensure(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "dist", help="output folder (default: dist/)"
    )
    args = parser.parse_args(argv)
    try:
        handout = build(args.out)
    except MarkerError as error:
        print(f"handout: {error}", file=sys.stderr)
        return 1
    print(
        f"handout {handout.version}: {handout.files} files, {handout.regions} solution regions stripped\n"
        f"  folder: {handout.directory}\n  zip:    {handout.zip_path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
