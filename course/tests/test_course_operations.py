"""Course operations (course/grading/): visibility, submission policy, leaderboard, export.

results.json is checked against Gradescope's documented format (the autograder specification:
top-level and per-test fields, the four visibilities, test status, output formats, leaderboard
entries), written out here independently of the code under test.
"""

from __future__ import annotations

import json
import math
import shutil
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from course.grading.export import (
    class_summary,
    describe_changes,
    grade_changes,
    grades_rows,
    read_grades,
    write_csv,
)
from course.grading.grade import ComponentResult
from course.grading.leaderboard import LeaderboardSettings, ReportedField, reported_entries
from course.grading.policy import decide, load_policy, read_metadata
from course.grading.regrade import regrade
from course.grading.report import finish
from course.grading.settings import load_settings
from course.grading.visibility import load_visibility
from course.paths import REPO_ROOT, RUBRIC
from course.tests.test_grader_hostile import _sandbox_or_skip

# --- Gradescope's documented results.json format ------------------------------------------------

VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}
OUTPUT_FORMATS = {"text", "html", "simple_format", "md", "ansi"}
TOP_LEVEL = {
    "score": (int, float),
    "execution_time": (int, float),
    "output": str,
    "output_format": str,
    "test_output_format": str,
    "test_name_format": str,
    "visibility": str,
    "stdout_visibility": str,
    "extra_data": dict,
    "tests": list,
    "leaderboard": list,
}
PER_TEST = {
    "score": (int, float),
    "max_score": (int, float),
    "status": str,
    "name": str,
    "name_format": str,
    "number": str,
    "output": str,
    "output_format": str,
    "tags": list,
    "visibility": str,
    "extra_data": dict,
}


def check_gradescope_format(report: dict) -> None:
    """Fail unless ``report`` is a results.json Gradescope documents (and plain JSON)."""
    json.dumps(report, allow_nan=False)
    for key, value in report.items():
        assert key in TOP_LEVEL, f"not a Gradescope field: {key}"
        assert isinstance(value, TOP_LEVEL[key]), key
    assert "score" in report or all("score" in t for t in report.get("tests", []))
    for key in ("visibility", "stdout_visibility"):
        assert report.get(key, "visible") in VISIBILITIES
    assert report.get("output_format", "text") in OUTPUT_FORMATS
    for test in report.get("tests", []):
        for key, value in test.items():
            assert key in PER_TEST, f"not a Gradescope test field: {key}"
            assert isinstance(value, PER_TEST[key]), (key, test)
        assert test.get("visibility", "visible") in VISIBILITIES
        assert test.get("status", "passed") in ("passed", "failed")
        assert test.get("output_format", "text") in OUTPUT_FORMATS
        assert all(isinstance(tag, str) for tag in test.get("tags", []))
    for entry in report.get("leaderboard", []):
        assert set(entry) <= {"name", "value", "order"} and "name" in entry and "value" in entry
        assert isinstance(entry["value"], int | float | str)
        assert entry.get("order", "desc") in ("asc", "desc")


# --- Helpers ------------------------------------------------------------------------------------

BASE_RUBRIC = (
    '[[component]]\nname = "silu"\npoints = 1\n[[component]]\nname = "train_bpe"\npoints = 15\n'
)
DUE = datetime(2026, 4, 10, 23, 59, tzinfo=timezone(timedelta(hours=-7)))


def results(train_bpe_passed: int = 4, cpu: float = 12.5) -> list[ComponentResult]:
    silu = ComponentResult("silu", 1.0, 1.0, "all", 1.2, 2, 2, "2/2 hidden", "3/3 public", 3, 3)
    silu.cpu_seconds = 2.0
    bpe_score = 15.0 * train_bpe_passed / 4
    bpe = ComponentResult("train_bpe", bpe_score, 15.0, "x", 9.5, train_bpe_passed, 4)
    bpe.hidden_output, bpe.public_output = f"{train_bpe_passed}/4 hidden", "FAILED one public"
    bpe.public_passed, bpe.public_total, bpe.cpu_seconds = 1, 2, cpu
    return [silu, bpe]


def raw_report(results: list[ComponentResult]) -> dict:
    return {
        "score": sum(r.score for r in results),
        "execution_time": 3.0,
        "output": "Graded.",
        "tests": [],
        "extra_data": {"isolation": {"mode": "namespaces"}},
    }


def rubric_with(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "rubric.toml"
    path.write_text(BASE_RUBRIC + extra)
    return path


def submission_zip(tmp_path: Path, leaderboard: object | None = None, name="leaderboard.json"):
    path = tmp_path / "submission.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("cs336_basics/__init__.py", "")
        if leaderboard is not None:
            text = leaderboard if isinstance(leaderboard, str) else json.dumps(leaderboard)
            archive.writestr(name, text)
    return path


def metadata_file(tmp_path: Path, created: datetime, previous=(), **assignment) -> Path:
    data = {
        "id": 1,
        "created_at": created.isoformat(),
        "assignment": {"due_date": DUE.isoformat(), "late_due_date": None, **assignment},
        "users": [{"email": "a@example.edu", "id": 7, "name": "A"}],
        "previous_submissions": list(previous),
    }
    path = tmp_path / "submission_metadata.json"
    path.write_text(json.dumps(data))
    return path


def previous(at: datetime, full_feedback: bool | None = True) -> dict:
    results = (
        {}
        if full_feedback is None
        else {"extra_data": {"policy": {"full_feedback": full_feedback}}}
    )
    return {"submission_time": at.isoformat(), "score": 3.0, "results": results}


# --- Visibility ---------------------------------------------------------------------------------


def test_course_visibility_splits_hidden_from_public_in_gradescope_format(tmp_path: Path) -> None:
    rubric = rubric_with(tmp_path, "[visibility]\n")
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path))
    check_gradescope_format(report)
    tests = {t["name"]: t for t in report["tests"]}
    hidden, public = (
        tests["train_bpe: hidden cases"],
        tests["train_bpe: public cases (feedback, no points)"],
    )
    assert hidden["visibility"] == "after_due_date" and hidden["score"] == 15.0
    assert hidden["output"] == "4/4 hidden" and hidden["status"] == "passed"
    assert public["visibility"] == "visible" and "score" not in public
    assert public["output"] == "FAILED one public" and public["status"] == "failed"
    assert hidden["tags"] == ["train_bpe", "hidden"] and public["tags"] == ["train_bpe", "public"]
    assert [t["number"] for t in report["tests"]] == ["1.1", "1.2", "2.1", "2.2"]
    assert report["stdout_visibility"] == "hidden" and report["visibility"] == "visible"
    assert report["score"] == 16.0


def test_settings_override_each_kind_of_result(tmp_path: Path) -> None:
    rubric = rubric_with(
        tmp_path,
        '[visibility]\nresults = "after_published"\npublic_feedback = "after_due_date"\n'
        'hidden_cases = "hidden"\nstdout = "visible"\n',
    )
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path))
    check_gradescope_format(report)
    assert report["visibility"] == "after_published" and report["stdout_visibility"] == "visible"
    kinds = {t["tags"][1]: t["visibility"] for t in report["tests"]}
    assert kinds == {"hidden": "hidden", "public": "after_due_date"}


def test_without_a_visibility_table_each_component_is_one_visible_test(tmp_path: Path) -> None:
    report = finish(
        raw_report(results()), results(), rubric_with(tmp_path, ""), submission_zip(tmp_path)
    )
    check_gradescope_format(report)
    assert [(t["name"], t["visibility"]) for t in report["tests"]] == [
        ("silu", "visible"),
        ("train_bpe", "visible"),
    ]
    assert report["tests"][0]["output"] == "all"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"hidden_case": "hidden"}, "unknown keys ['hidden_case']"),
        ({"hidden_cases": "later"}, "hidden_cases = 'later': must be one of"),
    ],
)
def test_bad_visibility_settings_are_named(table: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_visibility(table)


def test_the_course_rubric_loads_with_course_defaults() -> None:
    settings = load_settings(RUBRIC)
    assert settings.visibility is not None
    assert settings.visibility.hidden_cases == "after_due_date"
    assert settings.visibility.public_feedback == "visible"
    assert settings.leaderboard.measured and settings.leaderboard.reported


# --- Submission policy --------------------------------------------------------------------------

POLICY = {
    "rate_limit": {"submissions": 2, "window_hours": 24},
    "late": {"per": "day", "penalty": 0.1},
}


def test_no_metadata_applies_no_policy_and_says_so(tmp_path: Path) -> None:
    data, why = read_metadata(tmp_path / "missing.json")
    outcome = decide(load_policy(POLICY), data, why)
    assert outcome.multiplier == 1.0 and outcome.full_feedback
    assert outcome.lines == [
        "Submission policy: none applied: no submission_metadata.json (graded outside Gradescope)."
    ]


def test_on_time_within_the_rate_limit(tmp_path: Path) -> None:
    created = DUE - timedelta(hours=3)
    path = metadata_file(tmp_path, created, [previous(created - timedelta(hours=30))])
    outcome = decide(load_policy(POLICY), *read_metadata(path))
    assert outcome.multiplier == 1.0 and outcome.full_feedback
    assert "this is number 1" in outcome.lines[0]
    assert outcome.lines[1] == "Late policy: on time, no penalty."


@pytest.mark.parametrize(
    ("late_by", "per", "penalty", "multiplier"),
    [
        (timedelta(minutes=1), "day", 0.1, 0.9),  # a started day counts whole
        (timedelta(hours=26), "day", 0.1, 0.8),
        (timedelta(hours=26), "hour", 0.01, 0.74),
        (timedelta(days=30), "day", 0.1, 0.0),  # the penalty stops at the whole score
    ],
)
def test_late_penalty_per_started_hour_or_day(
    tmp_path: Path, late_by: timedelta, per: str, penalty: float, multiplier: float
) -> None:
    path = metadata_file(tmp_path, DUE + late_by)
    outcome = decide(load_policy({"late": {"per": per, "penalty": penalty}}), *read_metadata(path))
    assert outcome.multiplier == pytest.approx(multiplier)
    assert outcome.lines[0] == "Rate limit: none set."
    assert outcome.lines[1].startswith("Late policy:") and "after the due date" in outcome.lines[1]


def test_nothing_after_the_late_due_date_and_extensions_count(tmp_path: Path) -> None:
    late_due = DUE + timedelta(days=2)
    path = metadata_file(
        tmp_path, late_due + timedelta(hours=1), late_due_date=late_due.isoformat()
    )
    outcome = decide(load_policy(POLICY), *read_metadata(path))
    assert outcome.multiplier == 0.0 and "after the late due date" in outcome.lines[1]
    data = json.loads(path.read_text())
    extended = (DUE + timedelta(days=5)).isoformat()
    data["users"][0]["assignment"] = {"due_date": extended, "late_due_date": extended}
    path.write_text(json.dumps(data))
    outcome = decide(load_policy(POLICY), *read_metadata(path))
    assert outcome.multiplier == 1.0 and outcome.lines[1] == "Late policy: on time, no penalty."


def test_over_the_rate_limit_is_graded_but_held_back_until_a_slot_frees(tmp_path: Path) -> None:
    created = DUE - timedelta(hours=10)
    oldest, newer = created - timedelta(hours=20), created - timedelta(hours=2)
    earlier = [
        previous(created - timedelta(hours=30)),  # outside the window
        previous(oldest),
        previous(created - timedelta(hours=5), full_feedback=False),  # was held back itself
        previous(newer, full_feedback=None),  # says nothing: counts
    ]
    path = metadata_file(tmp_path, created, earlier)
    rubric = rubric_with(
        tmp_path, "[visibility]\n[policy.rate_limit]\nsubmissions = 2\nwindow_hours = 24\n"
    )
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path), path)
    check_gradescope_format(report)
    assert report["score"] == 16.0  # graded and recorded
    assert {t["visibility"] for t in report["tests"]} == {"after_due_date"}
    returns = oldest + timedelta(hours=24)  # the oldest counted one leaves the window
    assert f"Full feedback returns at {returns.isoformat(timespec='minutes')}." in report["output"]
    policy = report["extra_data"]["policy"]
    assert policy["full_feedback"] is False and policy["rate_limit"]["in_window"] == 2


def test_a_late_submission_scores_less_and_says_which_policy(tmp_path: Path) -> None:
    path = metadata_file(tmp_path, DUE + timedelta(hours=30))
    rubric = rubric_with(tmp_path, '[policy.late]\nper = "day"\npenalty = 0.25\n')
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path), path)
    assert report["score"] == 8.0 and report["extra_data"]["policy"]["score_before_policy"] == 16.0
    assert "Late policy: 2 started day(s) after the due date at 25% each" in report["output"]


def test_unusable_metadata_applies_no_policy(tmp_path: Path) -> None:
    path = tmp_path / "submission_metadata.json"
    path.write_text('{"created_at": "yesterday"}')
    outcome = decide(load_policy(POLICY), *read_metadata(path))
    assert outcome.multiplier == 1.0
    assert "none applied" in outcome.lines[0] and "not an ISO 8601 time" in outcome.lines[0]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"rate_limit": {"submissions": 0, "window_hours": 1}}, "whole number >= 1"),
        ({"rate_limit": {"submissions": 2, "window_hours": -1}}, "window_hours = -1"),
        ({"late": {"per": "week", "penalty": 0.1}}, "per = 'week'"),
        ({"late": {"per": "day", "penalty": 10}}, "penalty = 10"),
        ({"grace": {}}, "unknown keys"),
    ],
)
def test_bad_policy_settings_are_named(table: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_policy(table)


# --- Leaderboard --------------------------------------------------------------------------------

LEADERBOARD = """
[[leaderboard.measured]]
name = "BPE training (CPU s)"
component = "train_bpe"
[[leaderboard.reported]]
key = "validation_loss"
name = "Validation loss"
type = "number"
minimum = 0
order = "asc"
[[leaderboard.reported]]
key = "tokens"
type = "integer"
minimum = 1
[[leaderboard.reported]]
key = "run"
type = "url"
"""


def test_measured_and_reported_entries_never_touch_the_score(tmp_path: Path) -> None:
    rubric = rubric_with(tmp_path, "[visibility]\n" + LEADERBOARD)
    good = {"validation_loss": 1.42, "tokens": 327680000, "run": "https://wandb.ai/me/run"}
    with_file = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path, good))
    check_gradescope_format(with_file)
    assert with_file["leaderboard"] == [
        {"name": "BPE training (CPU s)", "value": 12.5, "order": "asc"},
        {"name": "Validation loss", "value": 1.42, "order": "asc"},
        {"name": "tokens", "value": 327680000, "order": "desc"},
        {"name": "run", "value": "https://wandb.ai/me/run", "order": "desc"},
    ]
    (tmp_path / "submission.zip").unlink()
    without = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path))
    assert with_file["score"] == without["score"] == 16.0
    board = [t for t in without["tests"] if t["name"] == "leaderboard"][0]
    assert "no leaderboard.json in the submission" in board["output"] and "score" not in board


def test_measured_entry_only_when_every_hidden_case_passed(tmp_path: Path) -> None:
    rubric = rubric_with(tmp_path, LEADERBOARD)
    failing = results(train_bpe_passed=3)
    report = finish(raw_report(failing), failing, rubric, submission_zip(tmp_path))
    assert "leaderboard" not in report
    board = [t for t in report["tests"] if t["name"] == "leaderboard"][0]
    assert "not entered (not every hidden case of train_bpe passed)" in board["output"]
    unmeasured = results(cpu=0.0)
    report = finish(raw_report(unmeasured), unmeasured, rubric, submission_zip(tmp_path))
    assert "not measured" in [t for t in report["tests"] if t["name"] == "leaderboard"][0]["output"]


def test_each_bad_reported_field_gets_one_clear_error() -> None:
    fields = (
        ReportedField("loss", "Loss", "number", "asc", minimum=0.0, maximum=20.0),
        ReportedField("tokens", "Tokens", "integer"),
        ReportedField("run", "Run", "url"),
        ReportedField("team", "Team", "text"),
    )
    data = {
        "loss": math.nan,
        "tokens": 1.5,
        "run": "javascript:alert(1)",
        "team": "x" * 500,
        "score": 100,
    }
    entries, errors = reported_entries(LeaderboardSettings(reported=fields), data)
    assert entries == []
    assert errors == [
        "leaderboard.json: 'score': not a leaderboard field (known: ['loss', 'run', 'team', 'tokens'])",
        "leaderboard.json: 'loss': must be finite",
        "leaderboard.json: 'tokens': must be an integer",
        "leaderboard.json: 'run': must be an http:// or https:// link",
        "leaderboard.json: 'team': must be text of 1 to 200 characters",
    ]
    entries, errors = reported_entries(
        LeaderboardSettings(reported=fields), {"loss": 25, "tokens": True}
    )
    assert errors == [
        "leaderboard.json: 'loss': must be at most 20",
        "leaderboard.json: 'tokens': must be an integer",
    ]
    assert reported_entries(LeaderboardSettings(reported=fields), [1, 2]) == (
        [],
        ["leaderboard.json must hold a JSON object of fields"],
    )


def test_unreadable_or_oversized_leaderboard_json_is_reported(tmp_path: Path) -> None:
    rubric = rubric_with(tmp_path, LEADERBOARD)
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path, "{not json"))
    board = [t for t in report["tests"] if t["name"] == "leaderboard"][0]
    assert "leaderboard.json unreadable: JSONDecodeError" in board["output"]
    (tmp_path / "submission.zip").unlink()
    huge = {"validation_loss": 1.0, "padding": "x" * 20000}
    report = finish(raw_report(results()), results(), rubric, submission_zip(tmp_path, huge))
    board = [t for t in report["tests"] if t["name"] == "leaderboard"][0]
    assert "leaderboard.json is over 16384 bytes" in board["output"]


def test_leaderboard_settings_are_checked(tmp_path: Path) -> None:
    bad = '[[leaderboard.measured]]\ncomponent = "nonexistent"\n'
    with pytest.raises(ValueError, match="component = 'nonexistent': no such cases"):
        load_settings(rubric_with(tmp_path, bad))
    bad = '[[leaderboard.reported]]\nkey = "x"\ntype = "float"\n'
    with pytest.raises(ValueError, match="type = 'float'"):
        load_settings(rubric_with(tmp_path, bad))


# --- Export -------------------------------------------------------------------------------------


def report_for(scores: dict[str, float], total: float, output: str = "Graded.") -> dict:
    tests = [
        {
            "name": f"{c}: hidden cases",
            "score": s,
            "max_score": 2.0,
            "tags": [c, "hidden"],
            "extra_data": {
                "component": c,
                "hidden_passed": int(s),
                "hidden_total": 2,
                "seconds": 3.0 * (i + 1),
            },
        }
        for i, (c, s) in enumerate(scores.items())
    ]
    tests.append({"name": "silu: public cases", "output": "x", "tags": ["silu", "public"]})
    return {"score": total, "output": output, "tests": tests}


def test_grades_csv_has_a_column_per_component_and_a_total(tmp_path: Path) -> None:
    reports = {
        "alice.zip": report_for({"silu": 2.0, "rope": 1.0}, 2.7),
        "bob.zip": report_for({"silu": 0.0, "rope": 2.0}, 2.0),
        "carol.zip": {
            "score": 0,
            "output": "grader error: boom",
            "tests": [
                {"name": "silu", "score": 0.0, "max_score": 2.0, "output": "grader error: boom"}
            ],
        },
    }
    path = write_csv(tmp_path / "grades.csv", grades_rows(reports))
    assert path.read_text().splitlines() == [
        "submission,total,silu,rope,note",
        "alice.zip,2.7,2.0,1.0,",
        "bob.zip,2.0,0.0,2.0,",
        "carol.zip,0,0.0,0.0,grader error: boom",
    ]
    assert read_grades(path)["alice.zip"]["rope"] == "1.0"


def test_regrade_diff_says_what_changed_per_student() -> None:
    old = {
        "alice.zip": {"submission": "alice.zip", "total": "3.0", "silu": "1.0", "rope": "2.0"},
        "bob.zip": {"submission": "bob.zip", "total": "1.0", "silu": "1.0", "rope": "0.0"},
        "dan.zip": {"submission": "dan.zip", "total": "0.0", "silu": "0.0", "rope": "0.0"},
    }
    new = {
        "alice.zip": {"submission": "alice.zip", "total": "5.0", "silu": "3.0", "rope": "2"},
        "bob.zip": {"submission": "bob.zip", "total": "1", "silu": "1.0", "rope": "0.0"},
        "erin.zip": {"submission": "erin.zip", "total": "1.0", "silu": "1.0", "rope": "0.0"},
    }
    changes = grade_changes(old, new)
    assert changes == [
        ["alice.zip", "total", "3.0", "5.0"],
        ["alice.zip", "silu", "1.0", "3.0"],
        ["dan.zip", "submission", "graded", "missing from the regrade"],
        ["erin.zip", "submission", "not graded before", "graded"],
    ]
    assert (
        describe_changes(changes).splitlines()[0] == "alice.zip: total 3.0 -> 5.0; silu 1.0 -> 3.0"
    )
    assert describe_changes([]) == "no grade changed"


def test_grades_csv_that_is_not_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("name,points\nalice,3\n")
    with pytest.raises(ValueError, match="not a grades.csv"):
        read_grades(path)


def test_class_summary_gives_pass_rates_and_slowest_components() -> None:
    reports = {
        "a": report_for({"silu": 2.0, "rope": 2.0}, 4.0),
        "b": report_for({"silu": 2.0, "rope": 1.0}, 3.0),
    }
    lines = class_summary(reports).splitlines()
    assert lines[0].startswith("2 submissions")
    # rope took 6 s a submission, silu 3 s: rope first; rope passed fully once of twice.
    assert lines[2].split() == ["rope", "50%", "75%", "6.0", "6.0"]
    assert lines[3].split() == ["silu", "100%", "100%", "3.0", "3.0"]


# --- End to end (subprocess sandboxes: slow) ----------------------------------------------------


@pytest.mark.slow
def test_gradescope_run_reads_the_metadata_beside_the_submission(tmp_path: Path) -> None:
    """As run_autograder does: /autograder/submission plus /autograder/submission_metadata.json."""
    from course.grading.gradescope import run

    _sandbox_or_skip()
    rubric = rubric_with(
        tmp_path,
        '[visibility]\n[policy.late]\nper = "day"\npenalty = 0.5\n'
        '[[leaderboard.measured]]\nname = "silu CPU s"\ncomponent = "silu"\n',
    )
    rubric.write_text(
        rubric.read_text().replace(
            'name = "train_bpe"\npoints = 15', 'name = "softmax"\npoints = 1'
        )
    )
    autograder = tmp_path / "autograder"
    submission = autograder / "submission"
    shutil.copytree(
        REPO_ROOT / "cs336_basics",
        submission / "cs336_basics",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (submission / "tests").mkdir()
    shutil.copyfile(REPO_ROOT / "tests" / "adapters.py", submission / "tests" / "adapters.py")
    metadata_file(autograder, DUE + timedelta(hours=2))
    report = run(submission, autograder / "results", rubric=rubric)
    check_gradescope_format(report)
    assert json.loads((autograder / "results" / "results.json").read_text()) == report
    assert report["extra_data"]["policy"]["score_before_policy"] == 2.0
    assert report["score"] == 1.0  # one started day late at 50%
    assert (
        report["leaderboard"][0]["name"] == "silu CPU s" and report["leaderboard"][0]["value"] > 0
    )


@pytest.mark.slow
def test_regrade_after_a_rubric_change_reports_the_changes(tmp_path: Path) -> None:
    from course.handout.submission import pack

    zips = tmp_path / "zips"
    zips.mkdir()
    pack(REPO_ROOT, zips / "alice.zip")
    (zips / "bob.zip").write_bytes(b"not a zip")
    first = tmp_path / "first.toml"
    first.write_text('[visibility]\n[[component]]\nname = "silu"\npoints = 1\n')
    second = tmp_path / "second.toml"
    second.write_text('[visibility]\n[[component]]\nname = "silu"\npoints = 3\n')
    grade_options = {"sandbox": False, "jobs": 1}
    from course.grading.grade import grade_batch

    grade_batch(zips, tmp_path / "before", rubric=first, **grade_options)
    told = regrade(zips, tmp_path / "before", tmp_path / "after", rubric=second, **grade_options)
    assert told == "alice.zip: total 1.0 -> 3.0; silu 1.0 -> 3.0"
    assert (tmp_path / "after" / "changes.csv").read_text().splitlines() == [
        "submission,column,before,after",
        "alice.zip,total,1.0,3.0",
        "alice.zip,silu,1.0,3.0",
    ]
    summary = (tmp_path / "after" / "summary.txt").read_text()
    assert "2 submissions" in summary and "silu" in summary
