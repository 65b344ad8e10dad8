"""A run of the shipped suite ends with what counts: graded cases per component with their
points, then the advice, then a line on the graded cases alone (``tests/what_counts.py``); only
the graded cases make a run red."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course.handout.check_solutions import site_packages, stage_solution
from course.paths import REPO_ROOT, SOLUTIONS
from course.workspace import Edit, PytestRun, apply_edits, run_pytest


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_a_run_ends_with_graded_cases_and_points_then_advice() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    command += ["tests/test_cases.py", "tests/test_layers.py", "-k", "linear"]
    run = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    tail = run.stdout[run.stdout.index("what counts") :].splitlines()
    assert tail[2].split() == ["linear", "1/1", "passed", "1", "point"]
    advice = [line for line in tail if line.startswith("advice (not graded):")]
    assert advice and advice[0].endswith(", 0 did not pass")
    assert int(advice[0].split(": ")[1].split()[0]) > 0  # test_layers' linear tests are advice
    assert "graded: all 1 public case passed" in tail[-1]


def run_with_adapters(tmp_path, edit, *args: str) -> str:
    """pytest in a copy of the shipped tests whose adapters.py ``edit`` rewrote (the reference
    package, the fixtures and pyproject.toml as they are here)."""
    shutil.copytree(
        REPO_ROOT / "tests", tmp_path / "tests", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("fixtures", "pyproject.toml"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    adapters = tmp_path / "tests" / "adapters.py"
    adapters.write_text(edit(adapters.read_text(encoding="utf-8")), encoding="utf-8")
    # One process, as a handout's pyproject.toml runs it (the repository's starts workers).
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *args]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return run.stdout


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_an_adapters_file_that_does_not_import_fails_every_graded_case_with_its_error(tmp_path):
    out = run_with_adapters(
        tmp_path, lambda text: text + "\ndef broken(:\n", "tests", "-k", "linear"
    )
    failures = out[out.index("FAILURES") :]
    assert failures.splitlines()[2].startswith("tests/adapters.py failed to import (SyntaxError")
    counts = out[out.index("what counts") :].splitlines()
    assert counts[2].split()[:3] == ["linear", "0/1", "passed"]
    assert "advice tests did not run: tests/adapters.py does not import" in out


# What a student of the course has: the upstream-style solution, whose adapters.py holds the
# course's own adapters only (cut before the handout's extras), and which fails some advice.
EXTRAS = "# --- The handout's extra adapters"
SELECTION = ("tests", "-k", "linear or generate or accounting")


def upstream_student(root: Path, *edits: Edit, workers: str = "0") -> PytestRun:
    """pytest in a handout holding that solution, with ``edits`` made to it (in ``workers``
    worker processes: 0 as a handout runs, 2 as the repository's addopts do on 2 cores)."""
    stage_solution(SOLUTIONS / "upstream_style", root, set())
    adapters = root / "tests" / "adapters.py"
    text = adapters.read_text(encoding="utf-8")
    adapters.write_text(text[: text.index(EXTRAS)], encoding="utf-8")
    apply_edits(root, edits)
    args = ("-n", workers, *SELECTION)
    return run_pytest(root, args, python_flags=("-S",), path=(site_packages(),), capture=True)


def counts_line(output: str) -> str:
    """pytest's own last line ("3 passed, 2 advice in 1.0s")."""
    return next(line for line in output.splitlines()[::-1] if re.search(r" in [0-9.]+s\b", line))


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.parametrize("workers", ["0", "2"])
def test_only_advice_failing_is_a_green_run_that_shows_the_advice(tmp_path, workers):
    run = upstream_student(tmp_path, workers=workers)
    assert run.returncode == 0, run.output[-3000:]
    counts, last = counts_line(run.output), run.output.strip().splitlines()[-1]
    assert "failed" not in counts and "error" not in counts and " advice" in counts, counts
    assert "failed" not in last and "graded: all 1 public case passed" in last, last
    # A robustness check the solution does not meet: shown with its traceback, as advice.
    assert "ADVICE tests/test_layers.py::test_linear_bfloat16_in_bfloat16_out" in run.output
    assert "_ ADVICE test_linear_bfloat16_in_bfloat16_out _" in run.output
    # The adapters beyond the assignment that it lacks: one line, not a traceback per test.
    unwritten = [line for line in run.output.splitlines() if "adapters beyond the" in line]
    assert len(unwritten) == 1, unwritten
    assert "run_generate" in unwritten[0] and "get_transformer_lm" in unwritten[0]
    assert "cost no points" in unwritten[0]
    assert "has no get_transformer_lm()" not in run.output
    assert "ADVICE tests/test_generation.py" not in run.output


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_a_failed_graded_case_makes_the_run_red(tmp_path):
    path = "cs336_basics/model.py"
    before = 'return einsum(x, self.weight, "... d_in, d_out d_in -> ... d_out")'
    run = upstream_student(tmp_path, Edit(path, before, f"return 2 * {before[7:]}", "x2"))
    assert run.returncode == 1, run.output[-3000:]
    assert "1 failed" in counts_line(run.output)
    last = run.output.strip().splitlines()[-1]
    assert "graded: 0 of 1 public cases passed, 1 failed" in last, last
