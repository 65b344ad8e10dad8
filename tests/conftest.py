"""Test-suite setup: shape checks at the adapter boundary, shared fixtures, the snapshot options
and the robustness report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests import adapter_signatures
from tests.snapshots import SnapshotChecker
from tests.typecheck import check_adapter_boundary

try:
    from tests import adapters
except Exception:  # noqa: BLE001  (each test that imports the adapters reports the error itself)
    adapters = None
if adapters is not None:
    # Before any test module imports an adapter: each call is checked against its documented
    # signature (shapes, dtypes, types), whatever annotations adapters.py carries.
    check_adapter_boundary(adapters, adapter_signatures)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

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
    return json.loads((FIXTURES / "model" / "config.json").read_text())


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


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """List failed ``robustness`` tests apart: they are advice (clear errors, dtype handling,
    defaults), not part of the grade."""
    failed = [
        report
        for report in terminalreporter.stats.get("failed", [])
        if "robustness" in report.keywords
    ]
    if failed:
        terminalreporter.section("robustness advice (not graded)")
        for report in failed:
            terminalreporter.write_line(f"ADVICE {report.nodeid}")
