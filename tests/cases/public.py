"""The public instances of the cases: inputs from the shipped fixtures, expected values from the
snapshots or from the shipped expected bundles (``fixtures/expected``)."""

from __future__ import annotations

from tests.cases.compare import expect_snapshot
from tests.cases.core import Bundle, Case
from tests.cases.shipped import FIXTURES, Shipped
from tests.cases.wire import read_bundle

EXPECTED = FIXTURES / "expected"


def public_inputs(case: Case, shipped: Shipped) -> Bundle:
    if case.public_inputs is None:
        raise ValueError(f"case {case.component}/{case.name} has no public instance")
    return case.public_inputs(shipped)


def public_expected(case: Case) -> Bundle:
    """The public instance's expected values; quoting them in messages is fine (``reveal``)."""
    if case.snapshot is not None:
        return expect_snapshot("out", case.snapshot) | {"reveal": True}
    found = read_bundle(EXPECTED / case.component, case.public_id)
    if found is None:
        raise FileNotFoundError(
            f"{EXPECTED / case.component / case.public_id}.json is missing: the expected values "
            "of a public case ship with the fixtures (restore fixtures/ from the handout)"
        )
    return found[1] | {"reveal": True}
