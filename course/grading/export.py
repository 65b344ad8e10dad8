"""Course-scale batches: ``grades.csv``, a regrade after a rubric change, a class summary.

``python -m course.grading.export summary grading/`` summarizes a graded folder (every
``<submission>/results.json`` under it): per component the share of submissions with full
points, mean hidden cases passed and the seconds its hidden cases took, slowest first.
A regrade after a rubric change is ``python -m course.grading.regrade`` (it grades, so it lives
apart: this module is the data side that ``course.grading.grade`` itself writes through).

``grades.csv`` (written by every ``cs336-grade --batch``): a header row, then one row per
submission: ``submission`` (the zip's file name, the key a gradebook matches), ``total``
(after the submission policy), one numeric column per component, and ``note`` (a grader error
or a refused zip; empty otherwise), so a gradebook imports it as it is.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

from tests.cases.wire import atomic_write

KEY, TOTAL, NOTE = "submission", "total", "note"


def component_scores(report: dict) -> dict[str, tuple[float, float]]:
    """Per component (score, max score) from a results.json: the tests that carry points."""
    scores = {}
    for test in report.get("tests", []):
        component = (test.get("extra_data") or {}).get("component")
        if component is None and "max_score" in test and "tags" not in test:
            component = test.get("name")  # an error result: one test per component, no extras
        if component is not None:
            scores[component] = (test.get("score", 0.0), test.get("max_score", 0.0))
    return scores


def note_of(report: dict) -> str:
    """What the instructor should see beside the scores: a grader error or a refused zip."""
    if "grader error" in report.get("output", ""):
        return report["output"]
    refused = [
        t["output"]
        for t in report.get("tests", [])
        if t.get("output", "").startswith("Submission refused")
    ]
    return refused[0] if refused else ""


def grades_rows(reports: dict[str, dict]) -> list[list]:
    """The rows of grades.csv for ``reports`` (submission name -> results.json)."""
    names = list(dict.fromkeys(c for r in reports.values() for c in component_scores(r)))
    rows: list[list] = [[KEY, TOTAL, *names, NOTE]]
    for submission, report in reports.items():
        scores = component_scores(report)
        rows.append(
            [
                submission,
                report["score"],
                *(scores.get(n, (0.0, 0.0))[0] for n in names),
                note_of(report),
            ]
        )
    return rows


def write_csv(path: Path, rows: list[list]) -> Path:
    """Write ``rows`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = io.StringIO(newline="")
    csv.writer(text).writerows(rows)
    atomic_write(path, text.getvalue().encode("utf-8"))
    return path


def read_grades(path: Path) -> dict[str, dict[str, str]]:
    """grades.csv as {submission: {column: value}}; ``ValueError`` naming what is wrong."""
    with path.open(newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    if rows and (KEY not in rows[0] or TOTAL not in rows[0]):
        raise ValueError(f"{path}: not a grades.csv (needs {KEY!r} and {TOTAL!r} columns)")
    return {row[KEY]: row for row in rows}


def grade_changes(old: dict[str, dict], new: dict[str, dict]) -> list[list]:
    """Per submission and column, what a regrade changed: [submission, column, old, new]."""
    changes: list[list] = []
    for submission in sorted(set(old) | set(new)):
        if submission not in new:
            changes.append([submission, "submission", "graded", "missing from the regrade"])
            continue
        if submission not in old:
            changes.append([submission, "submission", "not graded before", "graded"])
            continue
        before, after = old[submission], new[submission]
        for column in list(dict.fromkeys([*after, *before])):
            if column in (KEY, NOTE):
                continue
            was, now = before.get(column, "(no column)"), after.get(column, "(no column)")
            if not same_number(was, now):
                changes.append([submission, column, was, now])
    return changes


def same_number(a: str, b: str) -> bool:
    try:
        return abs(float(a) - float(b)) < 1e-9
    except ValueError:
        return a == b


def describe_changes(changes: list[list]) -> str:
    """One line per student: what changed, or that nothing did."""
    by_student: dict[str, list[str]] = {}
    for submission, column, was, now in changes:
        by_student.setdefault(submission, []).append(f"{column} {was} -> {now}")
    if not by_student:
        return "no grade changed"
    return "\n".join(f"{s}: {'; '.join(parts)}" for s, parts in by_student.items())


def load_reports(folder: Path) -> dict[str, dict]:
    """Every ``<submission>/results.json`` under ``folder``, by submission name."""
    reports = {}
    for path in sorted(folder.glob("*/results.json")):
        reports[path.parent.name] = json.loads(path.read_text(encoding="utf-8"))
    if not reports:
        raise FileNotFoundError(f"no */results.json under {folder}")
    return reports


def class_summary(reports: dict[str, dict]) -> str:
    """Per component: full-points rate, mean hidden cases passed, seconds; slowest first."""
    stats: dict[str, dict[str, list[float]]] = {}
    for report in reports.values():
        for test in report.get("tests", []):
            extra = test.get("extra_data") or {}
            if "component" not in extra:
                continue
            entry = stats.setdefault(extra["component"], {"full": [], "passed": [], "s": []})
            entry["full"].append(float(test["score"] >= test["max_score"]))
            total = extra.get("hidden_total") or 0
            entry["passed"].append(extra.get("hidden_passed", 0) / total if total else 0.0)
            entry["s"].append(extra.get("seconds", 0.0))
    if not stats:
        return f"{len(reports)} submissions; no component results (grader errors or refusals?)"
    width = max(len("component"), *map(len, stats))
    lines = [
        f"{len(reports)} submissions; components slowest first (mean seconds of hidden cases)",
        f"{'component':<{width}}  {'full points':>11}  {'cases passed':>12}  {'mean s':>7}  "
        f"{'max s':>7}",
    ]
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    for name, entry in sorted(stats.items(), key=lambda item: -mean(item[1]["s"])):
        lines.append(
            f"{name:<{width}}  {mean(entry['full']):>11.0%}  {mean(entry['passed']):>12.0%}  "
            f"{mean(entry['s']):>7.1f}  {max(entry['s']):>7.1f}"
        )
    return "\n".join(lines)


def write_batch_outputs(reports: dict[str, dict], out_dir: Path) -> Path:
    """grades.csv and summary.txt of a graded batch; returns grades.csv's path."""
    csv_path = write_csv(out_dir / "grades.csv", grades_rows(reports))
    atomic_write(out_dir / "summary.txt", (class_summary(reports) + "\n").encode("utf-8"))
    return csv_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="per-component pass rates and timings")
    summary.add_argument("graded", type=Path, help="a cs336-grade --batch output folder")
    args = parser.parse_args(argv)
    try:
        print(class_summary(load_reports(args.graded)))
    except (OSError, ValueError) as error:
        print(f"export: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
