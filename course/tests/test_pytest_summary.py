"""A run of the shipped suite ends with what counts: graded cases per component with their
points, then the advice (``tests/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from course.handout import REPO_ROOT


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_a_run_ends_with_graded_cases_and_points_then_advice() -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["tests/test_cases.py", "tests/test_layers.py", "-k", "linear"]
    run = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:]
    tail = run.stdout[run.stdout.index("what counts") :].splitlines()
    assert tail[2].split() == ["linear", "1/1", "passed", "1", "point"]
    advice = [line for line in tail if line.startswith("advice (not graded):")]
    assert advice and advice[0].endswith(", 0 failed")
    assert int(advice[0].split(": ")[1].split()[0]) > 0  # test_layers' linear tests are advice
