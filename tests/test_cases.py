"""Every public graded case, run through the same call and check code as the grader.

``uv run pytest -k rope`` selects a component's cases (ids like ``rope-public-basic``). The
grader runs the same cases, plus hidden ones on other inputs, in a sandbox; see tests/cases.
"""

from __future__ import annotations

import importlib
import traceback

import pytest

from tests.cases import CASES, Outputs, judge_case
from tests.cases.core import normalize
from tests.cases.public import public_expected, public_inputs
from tests.cases.shipped import Shipped
from tests.cpu_limit import case_cpu_limit
from tests.hints import diagnosis_lines
from tests.localize import RAISED, diagnose, diagnosed_if_raised

PUBLIC = sorted(
    (c for c in CASES.values() if c.public_inputs is not None), key=lambda c: c.public_id
)
SHIPPED = Shipped()


def import_adapters():
    """``tests.adapters``; when it does not import, every graded case fails with that error
    first (the suite still runs: one broken file must not hide the cases as a collection error)."""
    try:
        return importlib.import_module("tests.adapters")
    except (Exception, SystemExit) as error:  # noqa: BLE001  (whatever the file raises)
        problem = error
    if isinstance(problem, SyntaxError):
        where = f"{problem.filename}:{problem.lineno}"
    else:
        frame = traceback.extract_tb(problem.__traceback__)[-1]
        where = f"{frame.filename}:{frame.lineno}"
    pytest.fail(
        f"tests/adapters.py failed to import ({type(problem).__name__}: {problem}, at {where}), "
        "so this graded case could not run",
        pytrace=False,
    )


@pytest.mark.parametrize("case", PUBLIC, ids=[c.public_id for c in PUBLIC])
def test_case(case):
    inputs = public_inputs(case, SHIPPED)
    # Exceptions propagate, so a failing case shows its traceback (NotImplementedError, ...),
    # with what a probe of the component measured, if anything.
    adapters = import_adapters()
    expected = public_expected(case)
    # The grader's public run shows the same lines (tests.localize.diagnose) in results.json.
    # Under the grader's CPU limit per case: a case too slow to grade fails here too.
    with (
        case_cpu_limit(case.public_id),
        diagnosed_if_raised(lambda: diagnose(case, adapters, inputs, RAISED, expected)),
    ):
        outputs = Outputs(normalize(case.call(adapters, inputs)))
    message = judge_case(case, outputs, expected, inputs)
    if message is not None:
        message += diagnosis_lines(diagnose(case, adapters, inputs, outputs, expected), "  ")
    assert message is None, message
