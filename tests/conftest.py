"""Test-suite setup: runtime shape checking, shared fixtures and the snapshot options."""

from __future__ import annotations

import json
from pathlib import Path

import jaxtyping
import numpy as np
import pytest
import torch

# Installed before anything imports cs336_basics, so every annotated function and module in it
# checks its arguments' shapes at call time: a wrong shape fails naming the dimension.
import tests.typecheck  # noqa: E402,F401  (the hook below resolves the checker by this path)

jaxtyping.install_import_hook("cs336_basics", "tests.typecheck.typechecker")

from safetensors.torch import load_file  # noqa: E402

from tests.snapshots import SnapshotChecker  # noqa: E402

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
