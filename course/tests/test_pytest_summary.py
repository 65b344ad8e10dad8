"""A run of the shipped suite ends with what counts: graded cases per component with their
points, then the advice (``tests/conftest.py``)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from course.paths import REPO_ROOT


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
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
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


@pytest.mark.slow  # pytest in a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_a_missing_project_adapter_fails_only_the_advice_that_needs_it(tmp_path):
    # The course's own adapters.py has no run_generate or get_transformer_lm.
    def upstream(text: str) -> str:
        for name in ("get_transformer_lm", "run_generate"):
            text = text.replace(f"def {name}(", f"def _{name}_not_wired(")
        return text

    out = run_with_adapters(
        tmp_path,
        upstream,
        "tests/test_cases.py",
        "tests/test_generation.py",
        "-k",
        "linear or generate",
    )
    assert "tests/adapters.py has no get_transformer_lm()" in out
    counts = out[out.index("what counts") :].splitlines()
    assert counts[2].split()[:3] == ["linear", "1/1", "passed"]
    advice = next(line for line in counts if line.startswith("advice (not graded):"))
    assert not advice.endswith(", 0 failed")
