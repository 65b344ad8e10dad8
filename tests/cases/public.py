"""The public instances of the cases: inputs from the shipped fixtures, expected values from
the snapshots or from the cases' own independent references."""

from __future__ import annotations

from tests.cases.compare import expect_snapshot
from tests.cases.core import Bundle, Case
from tests.cases.shipped import Shipped


def public_inputs(case: Case, shipped: Shipped) -> Bundle:
    if case.public_inputs is None:
        raise ValueError(f"case {case.component}/{case.name} has no public instance")
    return case.public_inputs(shipped)


def public_expected(case: Case, inputs: Bundle) -> Bundle:
    """The public instance's expected values; quoting them in messages is fine (``reveal``)."""
    if case.snapshot is not None:
        return expect_snapshot("out", case.snapshot) | {"reveal": True}
    if case.expected is None:
        raise ValueError(
            f"case {case.component}/{case.name} has neither a snapshot nor a reference"
        )
    return case.expected(inputs) | {"reveal": True}
