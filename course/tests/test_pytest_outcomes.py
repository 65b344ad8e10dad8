"""The outcomes plugin's reader (course/pytest_outcomes.py): what a JSON-lines file left by a
run, whole or cut short, says about each test."""

from __future__ import annotations

import json

from course.pytest_outcomes import summarize


def lines(*events: dict) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


def phase(nodeid: str, when: str, outcome: str, message: str = "") -> dict:
    return {
        "event": "phase",
        "nodeid": nodeid,
        "when": when,
        "outcome": outcome,
        "exceptions": ["AssertionError"] if outcome == "failed" else [],
        "message": message,
    }


def test_a_run_killed_mid_test_says_which_ran_which_never_started(tmp_path):
    ids = ["t.py::passes", "t.py::fails", "t.py::setup_breaks", "t.py::skips", "t.py::hangs"]
    text = lines(
        {"event": "collected", "nodeids": [*ids, "t.py::never"]},
        {"event": "start", "nodeid": ids[0]},
        phase(ids[0], "call", "passed"),
        {"event": "start", "nodeid": ids[1]},
        phase(ids[1], "call", "failed", "E   assert 1 == 2"),
        {"event": "start", "nodeid": ids[2]},
        phase(ids[2], "setup", "failed", "fixture broke"),
        {"event": "start", "nodeid": ids[3]},
        phase(ids[3], "setup", "skipped"),
        {"event": "start", "nodeid": ids[4]},
    )
    path = tmp_path / "run.jsonl"
    path.write_text(text + '{"event": "pha', encoding="utf-8")  # the kill cut the last line
    results = summarize(path)
    assert {k: v["outcome"] for k, v in results.items()} == {
        "t.py::passes": "passed",
        "t.py::fails": "failed",
        "t.py::setup_breaks": "error",
        "t.py::skips": "skipped",
        "t.py::hangs": "running",
        "t.py::never": "not run",
    }
    assert results["t.py::fails"]["message"] == "E   assert 1 == 2"
    assert results["t.py::fails"]["exceptions"] == ["AssertionError"]


def test_a_file_that_does_not_import_is_a_collect_error_and_no_file_is_no_outcome(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text(
        lines({"event": "collect_error", "nodeid": "tests/t.py", "message": "SyntaxError"}),
        encoding="utf-8",
    )
    assert summarize(path) == {
        "tests/t.py": {"outcome": "collect_error", "exceptions": [], "message": "SyntaxError"}
    }
    assert summarize(tmp_path / "missing.jsonl") == {}
