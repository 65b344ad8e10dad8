"""The first-failure judge (course/mutation/judge_first.py): which failure a student reads first,
whether it names the mistake, and what the report counts. Outcomes are written as
course/pytest_outcomes.py's summarize leaves them: in pytest's order."""

from __future__ import annotations

import re

import pytest

from course.mutation.blind import BLIND
from course.mutation.catalogue import BUGS, Bug
from course.mutation.judge_first import (
    COMPONENT_FILES,
    WAYS,
    FirstFailure,
    Run,
    first_failure,
    report,
)
from course.mutation.judge_tests import SELECT, keyword_match
from course.paths import REPO_ROOT

HINTED = "E       AssertionError: got 0.779, expected 1.891\nE         hint: the bias corrections"
BARE = "E       AssertionError: Tensor-likes are not close!"


def outcome(kind: str, message: str = "") -> dict:
    return {"outcome": kind, "exceptions": [], "message": message}


def test_the_first_failure_is_the_first_in_pytest_order_not_the_first_with_a_hint():
    outcomes = {
        "tests/test_cases.py::test_case[adamw-public-basic]": outcome("passed"),
        "tests/test_optimizer.py::test_adamw_matches_torch": outcome("failed", BARE),
        "tests/test_optimizer.py::test_adamw_first_step": outcome("failed", HINTED),
        "tests/test_optimizer.py::test_adamw_later": outcome("not run"),
    }
    first = first_failure(outcomes)
    assert first.nodeid == "tests/test_optimizer.py::test_adamw_matches_torch"
    assert first.hints == ()


def test_a_file_that_cannot_be_collected_is_the_first_failure():
    outcomes = {
        "tests/test_optimizer.py": outcome("collect_error", "E   ImportError: no adamw"),
        "tests/test_cases.py::test_case[adamw-public-basic]": outcome("failed", HINTED),
    }
    assert first_failure(outcomes).nodeid == "tests/test_optimizer.py"


def test_hints_come_from_the_first_failures_error_lines_only():
    source_line = "    assert ok, 'hint: never printed'\n"
    first = first_failure(
        {"t::a": outcome("skipped"), "t::b": outcome("error", source_line + HINTED)}
    )
    assert first == FirstFailure("t::b", source_line + HINTED, ("the bias corrections",))
    assert first_failure({"t::a": outcome("passed"), "t::b": outcome("not run")}) == FirstFailure()


ADAMW = Bug("adamw_lr", "adamw", "cs336_basics/adamw.py", (("a", "b"),), "lr from the defaults")


@pytest.mark.parametrize(
    ("how", "outcomes", "caught", "named"),
    [
        # Only an advice test failed: pytest ends 0, the student still reads a failure.
        ("pytest exit 0, advice failed", {"t::a": outcome("failed", HINTED)}, True, True),
        ("pytest exit 0", {"t::a": outcome("failed", BARE)}, True, False),
        # The status says failed, the outcomes show none: nothing for the student to read.
        ("pytest exit 1", {"t::a": outcome("passed")}, False, False),
        # Stopped at the time limit: the student sees the run hang in that test.
        ("hung past 300 s", {"t::a": outcome("running")}, True, False),
        ("STALE: bug adamw_lr: 'a' occurs 0 times", {}, False, False),
    ],
)
def test_caught_and_named_are_read_from_the_outcomes_not_the_exit_status(
    how, outcomes, caught, named
):
    run = Run(ADAMW, "-k", 'pytest -x -k "adamw"', first_failure(outcomes), how)
    assert (run.caught, run.named) == (caught, named)


def test_each_components_file_holds_tests_its_selection_picks():
    """The file a student runs alone must hold the component's own tests (found by name here,
    without collecting the suite)."""
    selections = dict(SELECT) | {b.component: b.select for b in BUGS + BLIND if b.select}
    assert set(selections) <= set(COMPONENT_FILES)
    for component, file in COMPONENT_FILES.items():
        names = re.findall(r"^def (test_\w+)", (REPO_ROOT / file).read_text(), re.MULTILINE)
        picked = [n for n in names if keyword_match(selections[component], f"{file}::{n}")]
        assert picked, f"{file} holds no test that -k {selections[component]!r} picks"


def test_the_report_counts_per_component_and_way_and_lists_the_unnamed():
    bare, hinted = (
        first_failure({"t::a": outcome("failed", BARE)}),
        first_failure({"t::b": outcome("failed", HINTED)}),
    )
    other = Bug("clip_sum", "gradient_clipping", "cs336_basics/c.py", (("a", "b"),), "sum")
    runs = [
        Run(ADAMW, "-k", "", hinted, "pytest exit 1"),
        Run(ADAMW, "file", "", bare, "pytest exit 1"),
        Run(other, "-k", "", hinted, "pytest exit 1"),
        Run(other, "file", "", FirstFailure(), "pytest exit 0"),
    ]
    text = report(runs, [], "blind")
    assert re.search(r"^adamw +1 +1/1 +0/1$", text, re.MULTILINE)
    assert re.search(r"^gradient_clipping +1 +1/1 +0/1$", text, re.MULTILINE)
    assert "  adamw_lr (file): t::a: E       AssertionError: Tensor-likes are not close!" in text
    assert "  clip_sum (file): -: pytest exit 0" in text
    assert text.endswith(
        "blind, -k run: caught 2/2; first failure names it: 2/2\n"
        "blind, file run: caught 1/2; first failure names it: 0/2"
    )
    assert WAYS == ("-k", "file")
