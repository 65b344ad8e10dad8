"""``python -m course.handout ci`` (``make ci-course``): the steps it runs and the table it prints,
with the commands replaced by stand-ins (the real run is CI's ``make ci-course``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from course.handout import ci


def test_every_submission_is_packed_then_graded_with_its_expectation(tmp_path: Path) -> None:
    plan = ci.steps(tmp_path)
    commands = [" ".join(step.argv[1:]) for step in plan]
    assert commands[:3] == [
        "-m course.handout verify",
        "-m course.handout verify --extensions",
        f"-m course.handout build --out {tmp_path}",
    ]
    solutions = ci.graded_solutions()
    assert solutions == ["own_names", "single_module", "upstream_style"]
    expected = {"reference": "full", "bare-handout": "zero"}
    expected.update({name.replace("_", "-"): "full" for name in solutions})
    for name, expect in expected.items():
        zip_path = tmp_path / f"{name}.zip"
        packs = [c for c in commands if c.startswith("-m course.handout submission")]
        assert sum(c.endswith(f"--out {zip_path}") for c in packs) == 1
        grade = f"-m course.grading grade {zip_path} --out {tmp_path / 'grading' / name}"
        assert commands.count(f"{grade} --expect {expect}") == 1
    assert f"--root {tmp_path / 'handout'} --out {tmp_path / 'bare-handout.zip'}" in " | ".join(
        commands
    )
    # a zip is graded only after it was packed, and the bare handout after the handout was built
    last_pack = max(i for i, c in enumerate(commands) if " submission " in c)
    first_grade = min(i for i, c in enumerate(commands) if " grade " in c)
    assert commands.index(f"-m course.handout build --out {tmp_path}") < last_pack < first_grade


def test_the_table_shows_scores_and_the_run_fails_when_one_step_does(tmp_path: Path) -> None:
    plan = ci.steps(tmp_path)
    graded = [step for step in plan if step.results is not None]
    stale = graded[1].results
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({"score": 99, "tests": [{"max_score": 99}]}))

    def runner(argv, cwd):
        step = next(step for step in plan if step.argv == tuple(argv))
        if step is graded[0]:  # a grade that writes its results and passes
            step.results.parent.mkdir(parents=True, exist_ok=True)
            tests = [{"max_score": 40}, {"max_score": 60}]
            step.results.write_text(json.dumps({"score": 100, "tests": tests}))
        failing = step is graded[1]  # one that fails before writing any
        return subprocess.CompletedProcess(argv, 1 if failing else 0)

    outcomes = ci.run(plan, runner)
    assert [outcome.step for outcome in outcomes] == plan  # every step ran, also after a failure
    rows = ci.table(outcomes).splitlines()
    assert len(rows) == len(plan) + 1
    assert graded[0].name in rows[plan.index(graded[0]) + 1]
    assert "ok" in rows[plan.index(graded[0]) + 1] and "100/100" in rows[plan.index(graded[0]) + 1]
    failed_row = rows[plan.index(graded[1]) + 1]
    assert "FAIL 1" in failed_row and "99/99" not in failed_row  # not the last run's score
    assert sum("FAIL" in row for row in rows) == 1


def test_main_exits_1_naming_the_failed_steps(tmp_path: Path, monkeypatch, capsys) -> None:
    failing = "verify extension handout"
    plan = {step.argv: step.name for step in ci.steps(tmp_path)}

    def runner(argv, cwd):
        return subprocess.CompletedProcess(argv, 3 if plan[tuple(argv)] == failing else 0)

    monkeypatch.setattr(ci.subprocess, "run", runner)
    assert ci.main(["--out", str(tmp_path)]) == 1
    assert f"1 step(s) failed: {failing}" in capsys.readouterr().err
    failing = "no step"  # now every step passes
    assert ci.main(["--out", str(tmp_path)]) == 0
