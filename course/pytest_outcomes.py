"""A pytest plugin that streams per-test outcomes to a JSON-lines file.

Used by every pytest run in a workspace (``course/workspace.py``: mutation testing, the check of
the independent solutions, the handout's verification): ``python -m pytest -p pytest_outcomes``
with ``CS336_OUTCOMES=<path>`` in the environment. Each line is flushed at once, so when the
interpreter is killed (a hang, a segfault, the memory limit) the file still says which tests
finished and which one was running. With ``CS336_NO_NETWORK=1`` every socket connection fails,
a fallback for machines where the grader cannot run tests in a network namespace.

Only the standard library and pytest: a workspace copies this file next to the code under test.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

MESSAGE_LIMIT = 4000


def _write(event: dict[str, Any]) -> None:
    path = os.environ.get("CS336_OUTCOMES")
    if path:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(event) + "\n")


def _exception_chain(error: BaseException | None) -> list[str]:
    names: list[str] = []
    while error is not None and len(names) < 10:
        names.append(type(error).__name__)
        error = error.__cause__ or error.__context__
    return names


def _block_network() -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OSError("network access is disabled while grading")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign]
    socket.create_connection = refuse  # type: ignore[assignment]
    socket.getaddrinfo = refuse  # type: ignore[assignment]


if os.environ.get("CS336_NO_NETWORK") == "1":
    _block_network()


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    _write({"event": "start", "nodeid": nodeid})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" or report.outcome != "passed":
        error = call.excinfo.value if call.excinfo is not None else None
        _write(
            {
                "event": "phase",
                "nodeid": item.nodeid,
                "when": report.when,
                "outcome": report.outcome,
                "exceptions": _exception_chain(error),
                "message": str(report.longreprtext)[-MESSAGE_LIMIT:] if report.failed else "",
            }
        )


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _write(
            {
                "event": "collect_error",
                "nodeid": report.nodeid,
                "message": str(report.longreprtext)[-MESSAGE_LIMIT:],
            }
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    _write({"event": "collected", "nodeids": [item.nodeid for item in session.items]})


def summarize(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Fold a JSON-lines file into ``{nodeid: {"outcome", "exceptions", "message"}}``.

    Outcomes: ``passed``, ``failed``, ``error`` (setup/teardown), ``skipped``, ``running``
    (started, never finished: the process died or was killed), ``not run`` (collected, never
    started), and ``collect_error`` entries keyed by the failing file.
    """
    results: dict[str, dict[str, Any]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return results
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        kind = event.get("event")
        if kind == "collected":
            for nodeid in event["nodeids"]:
                results.setdefault(nodeid, {"outcome": "not run", "exceptions": [], "message": ""})
        elif kind == "collect_error":
            results[event["nodeid"] or "<collection>"] = {
                "outcome": "collect_error",
                "exceptions": [],
                "message": event["message"],
            }
        elif kind == "start":
            results[event["nodeid"]] = {"outcome": "running", "exceptions": [], "message": ""}
        elif kind == "phase":
            entry = results.setdefault(
                event["nodeid"], {"outcome": "running", "exceptions": [], "message": ""}
            )
            if event["outcome"] == "failed":
                entry.update(
                    outcome="failed" if event["when"] == "call" else "error",
                    exceptions=event["exceptions"],
                    message=event["message"],
                )
            elif event["outcome"] == "skipped":
                entry["outcome"] = "skipped"
            elif event["when"] == "call" and entry["outcome"] == "running":
                entry["outcome"] = "passed"
    return results
