"""One submission's ``results.json``, finished with the course's settings: Gradescope's test
fields and visibility, the submission policy and the leaderboard (``course.grading.grade`` calls it)."""

from __future__ import annotations

from pathlib import Path

from course.grading.leaderboard import leaderboard
from course.grading.policy import decide, read_metadata
from course.grading.settings import load_settings
from course.grading.visibility import (
    VisibilitySettings,
    component_tests,
    gradescope_test,
    top_level,
    withhold,
)


def finish(
    report: dict, results: list, rubric: Path, zip_path: Path, metadata: Path | None = None
) -> dict:
    """``report`` (``course.grading.grade.gradescope_results``) with the rubric's course settings
    applied to ``results`` (``ComponentResult``s); ``metadata``: Gradescope's
    submission_metadata.json, None outside Gradescope."""
    settings = load_settings(rubric)
    shown = settings.visibility or VisibilitySettings()  # the defaults, for what has no test
    tests = component_tests(results, settings.visibility)
    entries, told = leaderboard(settings.leaderboard, results, zip_path)
    if told:
        number = str(len(results) + 1)
        tests.append(gradescope_test("leaderboard", number, told, True, shown.leaderboard))
    data, why_none = read_metadata(metadata)
    outcome = decide(settings.policy, data, why_none)
    if not outcome.full_feedback:
        withhold(tests, shown.rate_limited)
    raw = report["score"]
    finished = {
        **report,
        **top_level(shown),
        "score": round(raw * outcome.multiplier, 4),
        "output": "\n".join([report["output"], *outcome.lines]),
        "tests": tests,
    }
    extra = finished["extra_data"] = dict(report.get("extra_data", {}))
    extra["policy"] = {**outcome.record, "score_before_policy": raw}
    if entries:
        extra["leaderboard"] = entries
        if shown.leaderboard != "hidden":
            finished["leaderboard"] = entries
    return finished
