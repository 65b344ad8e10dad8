"""The rubric's course-operations tables: ``[visibility]``, ``[policy]`` and ``[leaderboard]``.

``load_settings(rubric_path)`` reads them next to the judge's ``[grading]``, ``[limits]`` and
``[[component]]`` (``course/grading/judge.py``), and raises ``ValueError`` naming the rubric, the table
and the problem for anything it does not understand.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from course.grading.leaderboard import LeaderboardSettings, load_leaderboard
from course.grading.policy import PolicySettings, load_policy
from course.grading.visibility import VisibilitySettings, load_visibility


@dataclass(frozen=True)
class CourseSettings:
    visibility: VisibilitySettings | None  # None: no [visibility] table, one visible entry each
    policy: PolicySettings
    leaderboard: LeaderboardSettings


def load_settings(rubric: Path) -> CourseSettings:
    data = tomllib.loads(Path(rubric).read_text(encoding="utf-8"))
    try:
        visibility = load_visibility(data["visibility"]) if "visibility" in data else None
        return CourseSettings(
            visibility,
            load_policy(data.get("policy", {})),
            load_leaderboard(data.get("leaderboard", {})),
        )
    except ValueError as error:
        raise ValueError(f"{rubric}: {error}") from None
