"""The grader as the judge of hand-written bugs: does grading catch them? (``make case-mutants``).

For each bug (``course/mutation/catalogue.py``, or the blind set), a workspace copy of the
reference's ``cs336_basics/`` and ``tests/adapters.py`` gets the bug, the grading driver
(``course/grading/driver.py``, no sandbox: the code is ours) runs the bug's component on every
case, public and hidden, and the judge scores it. A bug is *caught* when the component loses
points; the report says how many, and whether hidden cases alone would have caught it (the
points a student who memorised the public snapshots still loses). Run through ``python -m
course.mutation --source catalogue --judge grader``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from course.grading.grade import CASE_FILES, DIAGNOSIS_FILES
from course.grading.judge import (
    EXPECTED_ROOT,
    INPUTS_ROOT,
    is_hidden,
    judge_component,
    load_rubric,
)
from course.mutation.catalogue import Bug
from course.paths import DRIVER
from course.workspace import apply_edits, stage

SUBMISSION_FILES = ("cs336_basics", "tests/adapters.py")


@dataclass(frozen=True)
class CaughtBy:
    bug: Bug
    lost: float  # points of the component the bug loses
    hidden_failed: int
    public_failed: int
    note: str = ""
    failed_hidden: tuple[str, ...] = ()  # the ids of the hidden cases that lost the points


def grade_bug(bug: Bug, cases_root: Path, timeout: float) -> CaughtBy:
    with tempfile.TemporaryDirectory(prefix=f"cs336-{bug.name}-") as scratch:
        submission = stage(Path(scratch) / "submission", SUBMISSION_FILES)
        try:
            apply_edits(submission, bug.edits)
        except ValueError as error:
            return CaughtBy(bug, 0.0, 0, 0, f"STALE: {error}")
        out = Path(scratch) / "out"
        out.mkdir()
        command = [sys.executable, str(DRIVER), "--cases-root", str(cases_root)]
        command += ["--submission", str(submission), "--inputs", str(INPUTS_ROOT)]
        command += ["--component", bug.component, "--out", str(out)]
        try:
            subprocess.run(command, capture_output=True, timeout=timeout, cwd=scratch)
            note = ""
        except subprocess.TimeoutExpired:
            note = "driver timed out"
        results = judge_component(bug.component, out)
    lost = sum(r.max_points - r.points for r in results)
    failed = tuple(r.case for r in results if r.hidden and not r.passed)
    public = sum(not r.passed for r in results if not r.hidden)
    return CaughtBy(bug, lost, len(failed), public, note, failed)


def hidden_case_ids(component: str) -> list[str]:
    return sorted(p.stem for p in (EXPECTED_ROOT / component).glob("*.json") if is_hidden(p.stem))


def grade_all(bugs: list[Bug], jobs: int, timeout: float) -> list[CaughtBy]:
    """Grade every bug, ``jobs`` at a time, against one staged copy of the case files."""
    with tempfile.TemporaryDirectory(prefix="cs336-cases-") as scratch:
        cases_root = stage(Path(scratch), (*CASE_FILES, *DIAGNOSIS_FILES))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lambda b: progress(grade_bug(b, cases_root, timeout)), bugs))


def progress(result: CaughtBy) -> CaughtBy:
    """Print one line per graded bug as it ends (a long run shows how far it got)."""
    failed = ", ".join(result.failed_hidden) or "no hidden case"
    print(f"  graded   {result.bug.name}: {result.lost:.2f} points lost; {failed}", flush=True)
    return result


def report(results: list[CaughtBy]) -> str:
    width = max(len(r.bug.name) for r in results)
    lines = [f"{'bug':<{width}}  {'component':<28}  points lost  failed hidden/public"]
    for r in results:
        points = load_rubric().component(r.bug.component).points
        lines.append(
            f"{r.bug.name:<{width}}  {r.bug.component:<28}  {r.lost:5.2f}/{points:<5g}"
            f"  {r.hidden_failed}/{r.public_failed} {r.note}"
        )
    caught = sum(r.lost > 0 for r in results)
    by_hidden = sum(r.hidden_failed > 0 for r in results)
    lines.append(
        f"caught: {caught}/{len(results)} bugs lose points; {by_hidden} fail a hidden case"
    )
    return "\n".join(lines)
