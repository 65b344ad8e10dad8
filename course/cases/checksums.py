"""The checksums of the pristine tests and fixtures: ``fixtures/MANIFEST.sha256``.

The file uses ``sha256sum``'s format, so ``sha256sum -c fixtures/MANIFEST.sha256`` works too.
``tests/adapters.py`` is left out: it is the one test file students are meant to edit.

    uv run python -m course.cases.checksums           # check: list modified, missing and extra files
    uv run python -m course.cases.checksums --write   # instructors, after `make fixtures`
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from course.paths import REPO_ROOT
from cs336_basics.atomic_write import atomic_writer

CHECKSUMS = Path("fixtures") / "MANIFEST.sha256"
COVERED = ("tests", "fixtures")
EXCLUDED = {Path("tests") / "adapters.py", CHECKSUMS}
IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis"}


def covered_files(root: Path) -> list[Path]:
    files = []
    for top in COVERED:
        for path in (root / top).rglob("*"):
            relative = path.relative_to(root)
            if (
                path.is_file()
                and relative not in EXCLUDED
                and not IGNORED_PARTS & set(relative.parts)
            ):
                files.append(relative)
    return sorted(files, key=lambda p: p.as_posix())


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_checksums(root: Path = REPO_ROOT) -> None:
    lines = "".join(f"{sha256(root / p)}  {p.as_posix()}\n" for p in covered_files(root))
    with atomic_writer(root / CHECKSUMS) as out:
        out.write(lines.encode())


def check_checksums(root: Path = REPO_ROOT) -> list[str]:
    """Problems found, one line each; empty when the tests and fixtures are pristine."""
    checksums = root / CHECKSUMS
    if not checksums.is_file():
        return [f"{CHECKSUMS} is missing"]
    recorded = dict(
        reversed(line.split("  ", 1)) for line in checksums.read_text().splitlines() if line
    )
    present = {p.as_posix() for p in covered_files(root)}
    problems = [f"missing:  {name}" for name in sorted(set(recorded) - present)]
    problems += [f"extra:    {name}" for name in sorted(present - set(recorded))]
    problems += [
        f"modified: {name}"
        for name in sorted(set(recorded) & present)
        if sha256(root / name) != recorded[name]
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the current files")
    parser.add_argument(
        "--root", type=Path, default=REPO_ROOT, help="checkout to check (default: this one)"
    )
    args = parser.parse_args(argv)
    if args.write:
        write_checksums(args.root)
        print(f"wrote {CHECKSUMS}")
        return 0
    problems = check_checksums(args.root)
    for line in problems:
        print(line)
    print(
        "tests and fixtures are pristine"
        if not problems
        else f"{len(problems)} file(s) differ from {CHECKSUMS}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
