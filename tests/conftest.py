"""Test-suite setup: shape checks at the adapter boundary, shared fixtures, the snapshot options,
and the summary that ends a run: graded cases per component with their points, then advice."""

from __future__ import annotations

import json
import os
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

# HF tokenizers (used by some tests) starts a thread pool on first use; a process forked after
# that (the encoder's workers) can inherit a lock held by one of its threads and hang.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests import adapter_signatures
from tests.snapshots import SnapshotChecker
from tests.typecheck import check_adapter_boundary

try:
    from tests import adapters
except (Exception, SystemExit):  # noqa: BLE001  (the graded cases report the error themselves)
    adapters = None
if adapters is not None:
    # Before any test module imports an adapter: each call is checked against its documented
    # signature (shapes, dtypes, types), whatever annotations adapters.py carries.
    check_adapter_boundary(adapters, adapter_signatures)

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS.parent / "fixtures"
# The grader's rubric: course/grading/rubric.toml here, shipped to students as tests/rubric.toml.
RUBRICS = (TESTS / "rubric.toml", TESTS.parent / "course" / "grading" / "rubric.toml")
GRADED_FILE = "tests/test_cases.py"
GRADED = f"{GRADED_FILE}::test_case["

# The tests' tensors are tiny: one intra-op thread avoids thread start-up and contention that
# otherwise dominate (the suite runs several times faster on 2 cores), and results do not
# depend on it.
torch.set_num_threads(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("snapshot")
    group.addoption(
        "--snapshot-update",
        action="store_true",
        help="(instructors) regenerate each snapshot a test uses from the reference solution",
    )
    group.addoption(
        "--snapshot-exact",
        action="store_true",
        help="require outputs bit-identical to the reference's float32 output",
    )


@pytest.fixture
def snapshot(request: pytest.FixtureRequest) -> SnapshotChecker:
    return SnapshotChecker(
        update=request.config.getoption("--snapshot-update"),
        exact=request.config.getoption("--snapshot-exact"),
    )


@pytest.fixture(scope="session")
def model_config() -> dict:
    """The small reference model's hyperparameters (``fixtures/model/config.json``)."""
    return json.loads((FIXTURES / "model" / "config.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def _state_dict() -> dict[str, torch.Tensor]:
    return load_file(FIXTURES / "model" / "weights.safetensors")


@pytest.fixture
def state_dict(_state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The reference model's weights, freshly copied so a test may modify them."""
    return {name: tensor.clone() for name, tensor in _state_dict.items()}


@pytest.fixture(scope="session")
def _inputs() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "inputs.npz", allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


@pytest.fixture
def inputs(_inputs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """Shared test inputs (``fixtures/inputs.npz``) as fresh tensors."""
    return {name: torch.from_numpy(array.copy()) for name, array in _inputs.items()}


def pytest_configure(config: pytest.Config) -> None:
    # A test file that cannot be collected (it imports an adapter your adapters.py lacks) is
    # one advice failure; it must not stop the run before the graded cases.
    config.option.continue_on_collection_errors = True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With an adapters.py that does not import, only the graded cases are collected: each
    fails with the import error, which is then the first thing the run shows."""
    if adapters is not None or collection_path.suffix != ".py":
        return None
    advice = collection_path.parent == TESTS and collection_path.name != "test_cases.py"
    return True if advice and collection_path.name.startswith("test_") else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/ is a graded case (``test_case[...]``) or advice."""
    for item in items:
        if item.path.is_relative_to(TESTS) and not item.nodeid.startswith(GRADED):
            item.add_marker(pytest.mark.advice)


def rubric_points() -> dict[str, float]:
    path = next((p for p in RUBRICS if p.is_file()), None)
    if path is None:
        return {}
    with path.open("rb") as file:
        return {c["name"]: c["points"] for c in tomllib.load(file).get("component", [])}


def outcomes(terminalreporter) -> dict[str, str]:
    """Each test's outcome: "passed", "failed" (in any phase) or "skipped"."""
    found: dict[str, str] = {}
    for kind in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(kind, []):
            if not hasattr(report, "nodeid") or not report.nodeid.startswith("tests/"):
                continue
            if kind in ("failed", "error"):
                found[report.nodeid] = "failed"
            elif kind == "skipped":
                found.setdefault(report.nodeid, "skipped")
            elif report.when == "call":
                found.setdefault(report.nodeid, "passed")
    return found


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    """After pytest's own summary: what counts. Graded cases per component (public ones; the
    grader runs them and hidden ones on other inputs), then the advice, which is never graded."""
    yield
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    found = outcomes(reporter) if reporter is not None else {}
    if not found:
        return
    # A collection error of tests/test_cases.py itself is the graded cases failing, not advice.
    graded = {n: o for n, o in found.items() if n.startswith(GRADED) or n == GRADED_FILE}
    advice = {n: o for n, o in found.items() if n not in graded}
    reporter.write_sep("=", "what counts")
    if GRADED_FILE in graded:
        reporter.write_line(f"graded cases: NOT RUN, {GRADED_FILE} could not be collected")
    if graded.keys() - {GRADED_FILE}:
        points, passed, total = rubric_points(), Counter(), Counter()
        for nodeid, outcome in graded.items():
            if nodeid == GRADED_FILE:
                continue
            component = nodeid[len(GRADED) :].split("-public-")[0]
            total[component] += 1
            passed[component] += outcome == "passed"
        reporter.write_line(
            "graded cases (public; hidden cases of the same kinds decide most points):"
        )
        for component in sorted(total):
            worth = points.get(component)
            reporter.write_line(
                f"  {component:<30} {passed[component]:>2}/{total[component]:<2} passed"
                + (f"   {worth:g} point{'s' * (worth != 1)}" if worth is not None else "")
            )
    failed = sorted(n for n, o in advice.items() if o == "failed")
    reporter.write_line(
        f"advice (not graded): {len(advice)} tests, {len(failed)} failed" + (":" if failed else "")
    )
    for nodeid in failed:
        reporter.write_line(f"  ADVICE {nodeid}")
    if adapters is None:
        reporter.write_line("  (the advice tests did not run: tests/adapters.py does not import)")
