"""When each kind of result shows: the rubric's ``[visibility]`` table, as Gradescope's fields.

Gradescope reads a ``visibility`` per test and for the whole result (``hidden``: never shown to
students; ``after_due_date``: once the due date, or the late due date, has passed;
``after_published``: once the instructor publishes the grades; ``visible``: at once), and a
``stdout_visibility`` for what ``run_autograder`` printed. With a ``[visibility]`` table each
component becomes two tests: its hidden cases (they carry the points; pass/fail only) and its
public cases (the handout's, with the full diagnosis; no points), each shown when the table
says. Without the table each component stays one test with everything in it, visible.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from course.grading.tables import choice, reject_unknown

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
# How much each setting keeps back, so a rate-limited submission never shows more than usual.
RESTRICTION = {"visible": 0, "after_due_date": 1, "after_published": 2, "hidden": 3}
OUTPUT_FORMAT = "text"  # every output here is plain text (no Markdown, HTML or ANSI colours)


@dataclass(frozen=True)
class VisibilitySettings:
    results: str = "visible"  # the whole result: score, output and every test
    public_feedback: str = "visible"  # each component's public cases and their diagnoses
    hidden_cases: str = "after_due_date"  # each component's hidden cases: pass/fail and points
    leaderboard: str = "visible"  # the leaderboard test; "hidden" keeps the entries off it too
    stdout: str = "hidden"  # what run_autograder printed (its points table names hidden counts)
    rate_limited: str = "after_due_date"  # every test of a submission beyond the rate limit


def load_visibility(table: dict[str, Any]) -> VisibilitySettings:
    known = {f.name for f in fields(VisibilitySettings)}
    reject_unknown("visibility", table, known)
    return VisibilitySettings(
        **{key: choice("visibility", key, value, VISIBILITIES) for key, value in table.items()}
    )


def gradescope_test(name: str, number: str, output: str, passed: bool, visibility: str) -> dict:
    """One Gradescope test without points (the caller adds them where it has some)."""
    return {
        "name": name,
        "number": number,
        "status": "passed" if passed else "failed",
        "output": output,
        "output_format": OUTPUT_FORMAT,
        "visibility": visibility,
    }


def component_tests(results: list, settings: VisibilitySettings | None) -> list[dict]:
    """Gradescope's tests for the components' results (``course.grading.grade.ComponentResult``)."""
    tests = []
    for index, result in enumerate(results, start=1):
        record = {
            "component": result.name,
            "hidden_passed": result.passed,
            "hidden_total": result.total,
            "seconds": round(result.seconds, 2),
        }
        points = {"score": result.score, "max_score": result.max_score}
        full = result.score >= result.max_score
        if settings is None:
            entry = gradescope_test(result.name, str(index), result.output, full, "visible")
            tests.append({**entry, **points, "tags": [result.name], "extra_data": record})
            continue
        hidden = gradescope_test(
            f"{result.name}: hidden cases",
            f"{index}.1",
            result.hidden_output or result.output,
            full,
            settings.hidden_cases,
        )
        tests.append({**hidden, **points, "tags": [result.name, "hidden"], "extra_data": record})
        public = gradescope_test(
            f"{result.name}: public cases (feedback, no points)",
            f"{index}.2",
            result.public_output or result.output,
            result.public_passed == result.public_total,
            settings.public_feedback,
        )
        tests.append({**public, "tags": [result.name, "public"]})
    return tests


def withhold(tests: list[dict], visibility: str) -> None:
    """Show nothing of ``tests`` sooner than ``visibility`` would (a rate-limited submission)."""
    for test in tests:
        if RESTRICTION[test["visibility"]] < RESTRICTION[visibility]:
            test["visibility"] = visibility


def top_level(settings: VisibilitySettings) -> dict[str, str]:
    """The whole result's visibility fields."""
    return {
        "visibility": settings.results,
        "stdout_visibility": settings.stdout,
        "output_format": OUTPUT_FORMAT,
    }
