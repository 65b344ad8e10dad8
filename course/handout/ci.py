"""The course toolchain's CI check (``make ci-course``), end to end, with a short table at the end.

``python -m course.handout ci`` verifies both handouts, builds the base handout, packs the
reference, the bare handout and the independent solutions of ``course/handout/solutions/`` as
submission zips, and grades each in the sandbox with ``cs336-grade``: the reference and the
solutions must get full marks, the bare handout zero. Each step runs as its own command (the
command a person would type, in a fresh process), all steps run even when one fails, and the
exit status is 1 when any did.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from course.paths import DIST, REPO_ROOT, SOLUTIONS


def graded_solutions() -> list[str]:
    """The independent solutions graded here: the folders of ``course/handout/solutions/`` with
    their own ``tests/adapters.py`` (open_choices/ holds alternatives applied on top of one of
    them by `make check-solutions`, not a submission of its own)."""
    return sorted(p.name for p in SOLUTIONS.iterdir() if (p / "tests" / "adapters.py").is_file())


@dataclass(frozen=True)
class Step:
    """One command of the check; ``results`` is the grade's results.json for a grading step."""

    name: str
    argv: tuple[str, ...]
    results: Path | None = None


@dataclass(frozen=True)
class Outcome:
    step: Step
    returncode: int
    seconds: float
    score: str


def module(name: str, *args: str | Path) -> tuple[str, ...]:
    return (sys.executable, "-m", name, *map(str, args))


def steps(dist: Path) -> list[Step]:
    """The check's commands, in order: verify, build, pack, then grade with an expectation."""
    plan = [
        Step("verify base handout", module("course.handout", "verify")),
        Step("verify extension handout", module("course.handout", "verify", "--extensions")),
        Step("build base handout", module("course.handout", "build", "--out", dist)),
    ]
    submissions = {"reference": (REPO_ROOT, "full")}
    for solution in graded_solutions():
        submissions[solution.replace("_", "-")] = (SOLUTIONS / solution, "full")
    submissions["bare-handout"] = (dist / "handout", "zero")
    for name, (root, _) in submissions.items():
        pack = module("course.handout", "submission", "--root", root, "--out", dist / f"{name}.zip")
        plan.append(Step(f"pack {name}", pack))
    for name, (_, expect) in submissions.items():
        out = dist / "grading" / name
        grade = module("course.grading", "grade", dist / f"{name}.zip", "--out", out)
        plan.append(
            Step(
                f"grade {name} (expect {expect})",
                (*grade, "--expect", expect),
                out / "results.json",
            )
        )
    return plan


def score_of(results: Path | None) -> str:
    """``score/maximum`` from a grade's results.json, ``-`` for other steps or when it is missing."""
    if results is None or not results.is_file():
        return "-"
    report = json.loads(results.read_text(encoding="utf-8"))
    maximum = sum(test.get("max_score", 0) for test in report.get("tests", []))
    return f"{report.get('score', 0):g}/{maximum:g}"


def run(plan: list[Step], runner: Callable[..., subprocess.CompletedProcess]) -> list[Outcome]:
    outcomes = []
    for step in plan:
        print(f"\n=== {step.name}: {' '.join(step.argv[1:])}", flush=True)
        if step.results is not None:  # a grade that fails early must not show the last run's score
            step.results.unlink(missing_ok=True)
        started = time.monotonic()
        returncode = runner(step.argv, cwd=REPO_ROOT).returncode
        seconds = time.monotonic() - started
        outcomes.append(Outcome(step, returncode, seconds, score_of(step.results)))
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    width = max(len(outcome.step.name) for outcome in outcomes)
    lines = [f"{'step':<{width}}  result  score      seconds"]
    for outcome in outcomes:
        result = "ok" if outcome.returncode == 0 else f"FAIL {outcome.returncode}"
        lines.append(
            f"{outcome.step.name:<{width}}  {result:<6}  {outcome.score:<9}  {outcome.seconds:7.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DIST,
        help="where the handout, the zips and the grades go (default: dist/)",
    )
    args = parser.parse_args(argv)
    outcomes = run(steps(args.out.resolve()), subprocess.run)
    print("\n" + table(outcomes))
    failed = [outcome.step.name for outcome in outcomes if outcome.returncode != 0]
    if failed:
        print(f"ci-course: {len(failed)} step(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
