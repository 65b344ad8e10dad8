"""Leaderboard entries: the rubric's ``[leaderboard]`` table, as Gradescope's ``leaderboard``.

Two kinds, neither ever touching the score:

- ``[[leaderboard.measured]]``: the CPU seconds of a component's hidden-case sandbox (all its
  processes, as the grader's watchdog counts them from outside), entered only when every
  hidden case of the component passed; e.g. BPE training on the hidden corpora.
- ``[[leaderboard.reported]]``: a field of an optional ``leaderboard.json`` at the top of the
  submission (``make submission`` packs it), checked against its declared ``type`` (``number``,
  ``integer``, ``url`` or ``text``) and range; each bad field gets one error and is left out.
"""

from __future__ import annotations

import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from course.grading.tables import choice, reject_unknown

REPORTED_FILE = "leaderboard.json"
REPORTED_LIMIT = 16 * 2**10  # bytes of leaderboard.json
TEXT_LIMIT = 200  # characters of a text or url value
ORDERS = ("asc", "desc")
TYPES = ("number", "integer", "url", "text")


@dataclass(frozen=True)
class MeasuredEntry:
    name: str
    component: str
    order: str = "asc"


@dataclass(frozen=True)
class ReportedField:
    key: str  # in leaderboard.json
    name: str  # on the leaderboard
    type: str
    order: str = "desc"
    minimum: float | None = None
    maximum: float | None = None


@dataclass(frozen=True)
class LeaderboardSettings:
    measured: tuple[MeasuredEntry, ...] = ()
    reported: tuple[ReportedField, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.measured or self.reported)


def load_leaderboard(table: dict[str, Any]) -> LeaderboardSettings:
    from tests.cases import components

    reject_unknown("leaderboard", table, {"measured", "reported"})
    measured = []
    for entry in table.get("measured", []):
        reject_unknown("leaderboard.measured", entry, {"name", "component", "order"})
        component = entry.get("component")
        if component not in components():
            raise ValueError(f"[[leaderboard.measured]] component = {component!r}: no such cases")
        order = choice("leaderboard.measured", "order", entry.get("order", "asc"), ORDERS)
        measured.append(MeasuredEntry(str(entry.get("name") or component), component, order))
    reported = [reported_field(entry) for entry in table.get("reported", [])]
    names = [e.name for e in measured] + [f.name for f in reported]
    if len(set(names)) != len(names):
        raise ValueError(f"[leaderboard]: entry names repeat: {names}")
    return LeaderboardSettings(tuple(measured), tuple(reported))


def reported_field(entry: dict[str, Any]) -> ReportedField:
    table = "leaderboard.reported"
    reject_unknown(table, entry, {"key", "name", "type", "order", "minimum", "maximum"})
    key = entry.get("key")
    if not isinstance(key, str) or not key:
        raise ValueError(f"[[{table}]] {entry}: needs a key (the field of {REPORTED_FILE})")
    bounds = {k: entry[k] for k in ("minimum", "maximum") if k in entry}
    for name, bound in bounds.items():
        if isinstance(bound, bool) or not isinstance(bound, int | float):
            raise ValueError(f"[[{table}]] {key}: {name} = {bound!r} must be a number")
    return ReportedField(
        key,
        str(entry.get("name", key)),
        choice(table, "type", entry.get("type"), TYPES),
        choice(table, "order", entry.get("order", "desc"), ORDERS),
        **bounds,
    )


def measured_entries(settings: LeaderboardSettings, results: list) -> tuple[list[dict], list[str]]:
    """Entries from the grader's measurements of ``results`` (``ComponentResult``s)."""
    by_name = {r.name: r for r in results}
    entries, lines = [], []
    for entry in settings.measured:
        result = by_name.get(entry.component)
        if result is None or result.total == 0 or result.passed < result.total:
            lines.append(
                f"{entry.name}: not entered (not every hidden case of {entry.component} passed)"
            )
        elif result.cpu_seconds <= 0:
            lines.append(f"{entry.name}: not entered (not measured: graded without a sandbox)")
        else:
            value = round(result.cpu_seconds, 2)
            entries.append({"name": entry.name, "value": value, "order": entry.order})
            lines.append(f"{entry.name}: {value:g} CPU seconds (measured by the grader)")
    return entries, lines


def read_reported(zip_path: Path) -> tuple[Any, str | None]:
    """The parsed ``leaderboard.json`` of the submission zip (top level or one folder down),
    None when there is none, or an error saying why it cannot be used."""
    try:
        with zipfile.ZipFile(zip_path) as archive:
            members = [
                info
                for info in archive.infolist()
                if PurePosixPath(info.filename).name == REPORTED_FILE
                and len(PurePosixPath(info.filename).parts) <= 2
            ]
            if not members:
                return None, None
            if members[0].file_size > REPORTED_LIMIT:
                return None, f"{REPORTED_FILE} is over {REPORTED_LIMIT} bytes"
            with archive.open(members[0]) as stream:
                raw = stream.read(REPORTED_LIMIT + 1)
        return json.loads(raw.decode("utf-8")), None
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError, RuntimeError) as error:
        return None, f"{REPORTED_FILE} unreadable: {type(error).__name__}"


def check_value(field: ReportedField, value: Any) -> tuple[Any, str | None]:
    """The value to enter for ``field``, or the one error that keeps it out."""
    if field.type in ("number", "integer"):
        wanted = int if field.type == "integer" else int | float
        if isinstance(value, bool) or not isinstance(value, wanted):
            return None, f"must be {'an integer' if field.type == 'integer' else 'a number'}"
        if not math.isfinite(value):
            return None, "must be finite"
        if field.minimum is not None and value < field.minimum:
            return None, f"must be at least {field.minimum:g}"
        if field.maximum is not None and value > field.maximum:
            return None, f"must be at most {field.maximum:g}"
        return value, None
    if not isinstance(value, str) or not value or len(value) > TEXT_LIMIT:
        return None, f"must be text of 1 to {TEXT_LIMIT} characters"
    if not value.isprintable():
        return None, "must be printable text on one line"
    if field.type == "url":
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return None, "must be an http:// or https:// link"
    return value, None


def reported_entries(settings: LeaderboardSettings, data: Any) -> tuple[list[dict], list[str]]:
    """Entries from the student's ``leaderboard.json`` and one error per bad field."""
    if not isinstance(data, dict):
        return [], [f"{REPORTED_FILE} must hold a JSON object of fields"]
    fields = {f.key: f for f in settings.reported}
    entries, errors = [], []
    for key in data:
        if key not in fields:
            errors.append(
                f"{REPORTED_FILE}: {key!r}: not a leaderboard field (known: {sorted(fields)})"
            )
    for key, field in fields.items():
        if key not in data:
            continue
        value, error = check_value(field, data[key])
        if error:
            errors.append(f"{REPORTED_FILE}: {key!r}: {error}")
        else:
            entries.append({"name": field.name, "value": value, "order": field.order})
    return entries, errors


def leaderboard(
    settings: LeaderboardSettings, results: list, zip_path: Path
) -> tuple[list[dict], str]:
    """The entries and what the student is told about them (nothing if none is configured)."""
    if not settings.configured:
        return [], ""
    entries, lines = measured_entries(settings, results)
    if settings.reported:
        data, problem = read_reported(zip_path)
        if problem:
            lines.append(problem)
        elif data is None:
            lines.append(f"no {REPORTED_FILE} in the submission: no self-reported entries")
        else:
            more, errors = reported_entries(settings, data)
            entries += more
            lines += [f"{e['name']}: {e['value']} (self-reported)" for e in more] + errors
    lines.append("Leaderboard entries never change the score.")
    return entries, "\n".join(lines)
