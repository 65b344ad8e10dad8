"""Test-suite setup: shape checks at the adapter boundary, shared fixtures, the snapshot options,
which tests are advice, where an error your code raised came from (``raised_in.py``), and the
plugin that ends a run with what counts (``what_counts.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

# HF tokenizers (used by some tests) starts a thread pool on first use; a process forked after
# that (the encoder's workers) can inherit a lock held by one of its threads and hang.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tests import adapter_signatures
from tests.raised_in import diagnosis_notes
from tests.snapshots import SnapshotChecker
from tests.typecheck import check_adapter_boundary
from tests.what_counts import ADVICE, GRADED, WhatCounts

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
    # A test file that cannot be collected (it imports one of the assignment's adapters that your
    # adapters.py lacks, so that adapter's graded case fails too) must not stop the run before
    # the graded cases.
    config.option.continue_on_collection_errors = True
    config.pluginmanager.register(WhatCounts(adapters is not None), "what_counts")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With an adapters.py that does not import, only the graded cases are collected: each
    fails with the import error, which is then the first thing the run shows."""
    if adapters is not None or collection_path.suffix != ".py":
        return None
    advice = collection_path.parent == TESTS and collection_path.name != "test_cases.py"
    return True if advice and collection_path.name.startswith("test_") else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Before pytest writes a failure up: an error that came out of your code gets lines saying
    where (the end of a long traceback is what you read first)."""
    error = call.excinfo.value if call.excinfo is not None else None
    for line in diagnosis_notes(error) if error is not None else []:
        if line not in getattr(error, "__notes__", []):  # a fixture's error, raised again
            error.add_note(line)
    return (yield)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/ is a graded case (``test_case[...]``) or advice."""
    for item in items:
        if item.path.is_relative_to(TESTS) and not item.nodeid.startswith(GRADED):
            item.add_marker(ADVICE)
