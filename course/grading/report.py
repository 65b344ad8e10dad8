"""One submission's ``results.json``, finished with the course's settings: Gradescope's test
fields and visibility, the submission policy and the leaderboard (``course.grade`` calls it)."""

from __future__ import annotations

from pathlib import Path

from course.grading.leaderboard import leaderboard
from course.grading.policy import decide, read_metadata
from course.grading.settings import load_settings
from course.grading.visibility import component_tests, gradescope_test, top_level, withhold


def finish(
    report: dict, results: list, rubric: Path, zip_path: Path, metadata: Path | None = None
) -> dict:
    """``report`` (``course.grade.gradescope_results``) with the rubric's course settings
    applied to ``results`` (``ComponentResult``s); ``metadata``: Gradescope's
    submission_metadata.json, None outside Gradescope."""
    settings = load_settings(rubric)
    tests = component_tests(results, settings.visibility)
    entries, told = leaderboard(settings.leaderboard, results, zip_path)
    if told:
        shown = settings.visibility.leaderboard if settings.visibility else "visible"
        tests.append(gradescope_test("leaderboard", str(len(results) + 1), told, True, shown))
    data, why_none = read_metadata(metadata)
    outcome = decide(settings.policy, data, why_none)
    if not outcome.full_feedback:
        withhold(tests, settings.visibility.rate_limited if settings.visibility else "hidden")
    raw = report["score"]
    finished = {
        **report,
        **top_level(settings.visibility),
        "score": round(raw * outcome.multiplier, 4),
        "output": "\n".join([report["output"], *outcome.lines]),
        "tests": tests,
    }
    extra = finished["extra_data"] = dict(report.get("extra_data", {}))
    extra["policy"] = {**outcome.record, "score_before_policy": raw}
    if entries:
        extra["leaderboard"] = entries
        if not settings.visibility or settings.visibility.leaderboard != "hidden":
            finished["leaderboard"] = entries
    return finished
