"""Run the shipped test suite against the independent solutions in ``course/handout/solutions/``.

``python -m course.handout check-solutions`` (``make check-solutions``) stages, for each
solution, a temporary workspace (``course/workspace.py``) holding this repository's shipped tests
and fixtures with the solution's ``cs336_basics/`` and ``tests/adapters.py`` in place of ours
(exactly what a student's zip holds), and runs pytest there with an interpreter that cannot see the reference package:
``python -S`` skips the ``.pth`` files (among them the editable install of the reference) and
``PYTHONPATH`` lists the temporary tree, then the environment's site-packages.

Every graded case must pass. ``single_module`` and ``own_names`` wire every adapter (the
components beyond the assignment's too), so every shipped test not marked ``robustness`` must
pass for them; ``upstream_style`` wires the assignment's adapters only, as a student of the
course would, so the graded cases are what it must pass. The rest of the advice runs too and is
reported, not required. The solutions are written in styles unlike the reference (one module
without annotations; its own module names, exceptions and vocabulary ids; the course's own
layout and habits), so a pass shows that the suite grades the assignment's contract and not our
implementation's choices.

An *alternative* (``course/handout/solutions/<name>/alternative.toml``) is another solution with
choices the handout leaves open made the other way: ``base`` names the solution it starts from,
and each ``[[edit]]`` replaces the one occurrence of ``before`` in ``path`` by ``after`` (``why``
says which choice it makes; the same edits as the mutation catalogue's bugs,
``course.workspace.Edit``), so the suite is checked on that choice too.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from course.handout.build import is_instructor_test, student_pyproject
from course.paths import REPO_ROOT, SOLUTIONS
from course.workspace import Edit, PytestRun, apply_edits, edits_from_toml, run_pytest, stage

# Solutions that wire only the assignment's adapters: required to pass the graded cases alone.
GRADED_ONLY = {"upstream_style"}
# Shipped only in the extension handout, with adapters the base assignment does not ask for.
EXTENSION_TESTS = "variants"
# The file that makes a folder of solutions/ an alternative of another solution.
ALTERNATIVE = "alternative.toml"


@dataclass
class Outcome:
    solution: str
    graded_ok: bool
    graded_summary: str
    robustness_summary: str
    robustness_failures: list[str]


def shipped_test_files(ignore: set[str]) -> list[Path]:
    """Files of ``tests/`` that ship in the base handout (relative paths)."""
    tests = REPO_ROOT / "tests"
    files = []
    for path in sorted(tests.rglob("*")):
        relative = path.relative_to(REPO_ROOT)
        if not path.is_file() or "__pycache__" in relative.parts or relative.name == "adapters.py":
            continue
        if relative.parts[1] == EXTENSION_TESTS or relative.as_posix() in ignore:
            continue
        if is_instructor_test(path):
            continue
        files.append(relative)
    return files


def stage_solution(solution: Path, root: Path, ignore: set[str]) -> None:
    """At ``root``, what a student's zip of ``solution`` makes of the handout: the shipped tests,
    fixtures and project file (the handout's: one pytest process, no instructor package) with the
    solution's package and adapters (an alternative's: its base's, with its edits made)."""
    stage(root, [*shipped_test_files(ignore), "fixtures"])
    project = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (root / "pyproject.toml").write_text(student_pyproject(project), encoding="utf-8")
    alternative = solution / ALTERNATIVE
    base, edits = read_alternative(alternative) if alternative.is_file() else (solution, [])
    stage(root, ["cs336_basics", "tests/adapters.py"], source=base)
    apply_edits(root, edits)


def read_alternative(path: Path) -> tuple[Path, list[Edit]]:
    """The solution an alternative starts from and its edits."""
    with path.open("rb") as file:
        alternative = tomllib.load(file)
    unknown = sorted(set(alternative) - {"base", "edit"})
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown} (an alternative has base and [[edit]])")
    base = SOLUTIONS / str(alternative.get("base"))
    if not (base / "cs336_basics").is_dir():
        raise ValueError(f"{path}: base {alternative.get('base')!r} is not a solution")
    return base, edits_from_toml(alternative.get("edit", []), str(path))


def site_packages() -> Path:
    # Where torch is installed is this environment's site-packages (also when this script
    # itself runs under ``python -S``, where sysconfig would name the base interpreter's).
    return Path(importlib.util.find_spec("torch").origin).parents[1]


def isolated_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{site_packages()}"}


def check_isolation(root: Path) -> None:
    """``cs336_basics`` must resolve to the solution, and ``course`` must not resolve at all."""
    probe = (
        "import importlib.util, cs336_basics; print(cs336_basics.__file__); "
        "print(importlib.util.find_spec('course'))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        cwd=root,
        env=isolated_env(root),
        capture_output=True,
        text=True,
        check=True,
    )
    module_file, course_spec = result.stdout.split()[:2]
    if not Path(module_file).resolve().is_relative_to(root.resolve()) or course_spec != "None":
        raise RuntimeError(
            f"the interpreter sees the reference: cs336_basics from {module_file}, course {course_spec}"
        )


def run_suite(root: Path, marker: str, extra: list[str], label: str) -> PytestRun:
    """The shipped tests of ``marker`` in ``root``, under ``python -S`` (``check_isolation``)."""
    return run_pytest(
        root,
        ["tests", "-rf", "-m", marker, *extra],
        label,
        python_flags=("-S",),
        path=(site_packages(),),
        capture=True,
    )


def last_line(output: str) -> str:
    """pytest's count line ("3 passed, 1 advice in 2.0s"), which the suite's own summary of
    what counts follows; the last line when there is none."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    counts = [
        line
        for line in lines
        if re.search(r"(passed|failed|error|advice|no tests ran).* in [0-9.]+s", line)
    ]
    return (counts or lines or ["(no output)"])[-1]


def check(solution: Path, ignore: set[str], extra: list[str]) -> Outcome:
    with tempfile.TemporaryDirectory(prefix=f"check-{solution.name}-") as tmp:
        root = Path(tmp)
        stage_solution(solution, root, ignore)
        check_isolation(root)
        required = "not advice" if solution.name in GRADED_ONLY else "not robustness"
        graded = run_suite(root, required, extra, "graded")
        robustness = run_suite(root, f"not ({required})", extra, "robustness")
    if graded.returncode != 0:
        print(graded.output[-8000:])
    failures = [n for n, r in robustness.outcomes.items() if r["outcome"] == "failed"]
    return Outcome(
        solution.name,
        graded.returncode == 0,
        last_line(graded.output),
        last_line(robustness.output),
        failures,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "solutions", nargs="*", help="solution names under course/handout/solutions/ (default: all)"
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="PATH",
        help="a shipped test file to leave out (repository-relative), e.g. while it is moving",
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    args = parser.parse_args(argv)
    names = args.solutions or sorted(p.name for p in SOLUTIONS.iterdir() if p.is_dir())
    extra = [a for a in args.pytest_args if a != "--"]
    outcomes = [check(SOLUTIONS / name, set(args.ignore), extra) for name in names]
    for outcome in outcomes:
        status = "PASS" if outcome.graded_ok else "FAIL"
        print(f"{status} {outcome.solution}: required tests: {outcome.graded_summary}")
        print(f"     the other advice (not required): {outcome.robustness_summary}")
        for nodeid in outcome.robustness_failures:
            print(f"       advice: {nodeid}")
    return 0 if all(o.graded_ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
