"""The submission policy: the rubric's ``[policy]`` table applied to Gradescope's
``/autograder/submission_metadata.json``.

Two rules, each optional:

- ``[policy.rate_limit]``: ``submissions`` with full feedback per rolling ``window_hours``. A
  submission beyond it is still graded and its score recorded, but its tests are withheld
  (``[visibility] rate_limited``) and the student is told when full feedback returns: when the
  oldest full-feedback submission in the window leaves it. Earlier submissions count when their
  results say they had full feedback (``extra_data.policy.full_feedback``), or say nothing.
- ``[policy.late]``: ``penalty`` (a fraction of the score) per started ``per`` (``"hour"`` or
  ``"day"``) after the due date, and nothing after the late due date. A user's own dates
  (an extension, ``users[].assignment``) win over the assignment's.

The output always says which policy applied and how; grading without the metadata (locally,
in a batch) applies none and says so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from course.grading.tables import choice, positive_number, reject_unknown

METADATA_LIMIT = 4 * 2**20  # bytes; Gradescope's file holds every earlier result
UNITS = {"hour": 3600.0, "day": 86400.0}


@dataclass(frozen=True)
class RateLimit:
    submissions: int
    window_hours: float


@dataclass(frozen=True)
class LatePolicy:
    per: str  # "hour" or "day"
    penalty: float  # fraction of the score lost per started hour or day


@dataclass(frozen=True)
class PolicySettings:
    rate_limit: RateLimit | None = None
    late: LatePolicy | None = None


@dataclass
class PolicyOutcome:
    """What the policy did to one submission."""

    full_feedback: bool = True
    multiplier: float = 1.0  # of the score
    lines: list[str] = field(default_factory=list)  # what the student is told
    record: dict[str, Any] = field(default_factory=dict)  # results.json's extra_data.policy


def load_policy(table: dict[str, Any]) -> PolicySettings:
    reject_unknown("policy", table, {"rate_limit", "late"})
    rate_limit = late = None
    if "rate_limit" in table:
        entry = table["rate_limit"]
        reject_unknown("policy.rate_limit", entry, {"submissions", "window_hours"})
        count = entry.get("submissions")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"[policy.rate_limit] submissions = {count!r}: a whole number >= 1")
        hours = positive_number("policy.rate_limit", "window_hours", entry.get("window_hours"))
        rate_limit = RateLimit(count, hours)
    if "late" in table:
        entry = table["late"]
        reject_unknown("policy.late", entry, {"per", "penalty"})
        per = choice("policy.late", "per", entry.get("per"), tuple(UNITS))
        penalty = entry.get("penalty")
        if isinstance(penalty, bool) or not isinstance(penalty, int | float):
            raise ValueError(f"[policy.late] penalty = {penalty!r}: a fraction from 0 to 1")
        if not 0 <= penalty <= 1:
            raise ValueError(f"[policy.late] penalty = {penalty!r}: a fraction from 0 to 1")
        late = LatePolicy(per, float(penalty))
    return PolicySettings(rate_limit, late)


def read_metadata(path: Path | None) -> tuple[dict | None, str]:
    """The metadata, or None and why there is none."""
    if path is None or not path.is_file():
        return None, "no submission_metadata.json (graded outside Gradescope)"
    try:
        if path.stat().st_size > METADATA_LIMIT:
            raise ValueError(f"over {METADATA_LIMIT} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        timestamp(data, "created_at")
    except (OSError, ValueError) as error:
        return None, f"{path.name} unusable ({error})"
    return data, ""


def timestamp(entry: Any, key: str) -> datetime | None:
    """``entry[key]`` as an aware datetime; None when absent or null; ``ValueError`` if bad."""
    value = entry.get(key) if isinstance(entry, dict) else None
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} = {value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise ValueError(f"{key} = {value!r} has no time zone")
    return moment


def decide(settings: PolicySettings, metadata: dict | None, why_none: str = "") -> PolicyOutcome:
    """Apply ``settings`` to the submission ``metadata`` describes; never raises for bad
    metadata (it applies no policy and says so)."""
    outcome = PolicyOutcome()
    if metadata is None:
        outcome.lines.append(f"Submission policy: none applied: {why_none or 'no metadata'}.")
        outcome.record = {"applied": "none", "reason": why_none, "full_feedback": True}
        return outcome
    outcome.record = {"applied": "rubric"}
    try:
        created = timestamp(metadata, "created_at")
        rate_limit(settings.rate_limit, metadata, created, outcome)
        late_penalty(settings.late, metadata, created, outcome)
    except (ValueError, TypeError, AttributeError) as error:
        outcome = PolicyOutcome()
        outcome.lines.append(f"Submission policy: none applied: bad metadata ({error}).")
        outcome.record = {"applied": "none", "reason": f"bad metadata: {error}"}
    outcome.record["full_feedback"] = outcome.full_feedback
    outcome.record["score_multiplier"] = outcome.multiplier
    return outcome


def had_full_feedback(previous: dict) -> bool:
    record = (previous.get("results") or {}).get("extra_data", {}).get("policy", {})
    return record.get("full_feedback", True) is not False


def rate_limit(
    rule: RateLimit | None, metadata: dict, created: datetime, outcome: PolicyOutcome
) -> None:
    if rule is None:
        outcome.lines.append("Rate limit: none set.")
        return
    window = timedelta(hours=rule.window_hours)
    times = sorted(
        moment
        for previous in metadata.get("previous_submissions") or []
        if (moment := timestamp(previous, "submission_time")) is not None
        and created - window < moment <= created
        and had_full_feedback(previous)
    )
    per = f"{rule.submissions} submissions with full feedback per {rule.window_hours:g} hours"
    outcome.record["rate_limit"] = {"limit": rule.submissions, "in_window": len(times)}
    if len(times) < rule.submissions:
        outcome.lines.append(f"Rate limit: {per}; this is number {len(times) + 1}.")
        return
    returns = times[len(times) - rule.submissions] + window
    outcome.full_feedback = False
    outcome.record["rate_limit"]["full_feedback_returns"] = returns.isoformat()
    outcome.lines.append(
        f"Rate limit: {per}; you had {len(times)} in the last {rule.window_hours:g} hours, so "
        "this submission is graded and its score recorded, but its test results are held back. "
        f"Full feedback returns at {returns.isoformat(timespec='minutes')}."
    )


def own_date(metadata: dict, key: str) -> datetime | None:
    """The assignment's ``key`` date, or the latest of the users' own (extensions)."""
    users = [timestamp(u.get("assignment"), key) for u in metadata.get("users") or []]
    users = [moment for moment in users if moment is not None]
    return max(users) if users else timestamp(metadata.get("assignment"), key)


def late_penalty(
    rule: LatePolicy | None, metadata: dict, created: datetime, outcome: PolicyOutcome
) -> None:
    if rule is None:
        outcome.lines.append("Late policy: none set.")
        return
    due, late_due = own_date(metadata, "due_date"), own_date(metadata, "late_due_date")
    if due is None or created <= due:
        outcome.lines.append("Late policy: on time, no penalty.")
        outcome.record["late"] = {"units": 0, "penalty": 0.0}
        return
    if late_due is not None and created > late_due:
        outcome.multiplier = 0.0
        outcome.record["late"] = {"after_late_due_date": True, "penalty": 1.0}
        outcome.lines.append(
            f"Late policy: submitted after the late due date ({late_due.isoformat()}): no points."
        )
        return
    units = math.ceil((created - due).total_seconds() / UNITS[rule.per])
    penalty = min(1.0, units * rule.penalty)
    outcome.multiplier = 1.0 - penalty
    outcome.record["late"] = {"units": units, "per": rule.per, "penalty": round(penalty, 6)}
    outcome.lines.append(
        f"Late policy: {units} started {rule.per}(s) after the due date at "
        f"{rule.penalty:.0%} each: the score is cut by {penalty:.0%}."
    )
