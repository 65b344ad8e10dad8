"""How a run of the suite ends: the graded cases decide its colour and exit status, and the
advice shows as advice.

Every shipped test is a graded case (``tests/test_cases.py``) or advice (``conftest.py`` marks
the rest ``advice``). A failed advice test counts in pytest's category ``advice`` (letter ``a``,
``ADVICE`` in a verbose run), not as failed, so a run whose graded cases all pass exits with
status 0 and pytest's last line does not say "failed"; the advice tracebacks are printed before
pytest's failures, which then hold only what counts. The run ends with "what counts": the graded
cases per component with the rubric's points, the advice that did not pass, once the adapters
beyond the assignment that are not written yet (the advice tests that need them fail, and no
graded case calls them), and a last line on the graded cases alone.
"""

from __future__ import annotations

import inspect
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from tests import adapter_signatures, lazy_adapters

TESTS = Path(__file__).resolve().parent
ADAPTERS_FILE = TESTS / "adapters.py"
# The grader's rubric: course/grading/rubric.toml here, shipped to students as tests/rubric.toml.
RUBRICS = (TESTS / "rubric.toml", TESTS.parent / "course" / "grading" / "rubric.toml")
GRADED_FILE = "tests/test_cases.py"
GRADED = f"{GRADED_FILE}::test_case["
ADVICE = "advice"  # the marker conftest.py sets and the category a failed advice test counts in
UNWRITTEN = "unwritten adapter"  # a report's property: the adapter its test needed and lacked


def is_failed_advice(report: pytest.TestReport | pytest.CollectReport) -> bool:
    # A collection report has no keywords: a file that cannot be collected is never advice
    # (it lacks one of the assignment's adapters, whose graded case fails too).
    return report.failed and ADVICE in getattr(report, "keywords", ())


def unwritten_adapter(excinfo: pytest.ExceptionInfo) -> str | None:
    """The adapter beyond the assignment that raised ``NotImplementedError`` when the test
    called it (absent from ``tests/adapters.py``, a stub, or wired to code not written yet)."""
    error = excinfo.value
    if isinstance(error, lazy_adapters.MissingAdapter):
        return error.name
    if not isinstance(error, NotImplementedError):
        return None
    # The outermost frame in adapters.py is the adapter the test called, whatever it calls.
    for entry in excinfo.traceback:
        if Path(entry.path).resolve() == ADAPTERS_FILE:
            return None if entry.name in lazy_adapters.ASSIGNMENT else entry.name
    return None


class WhatCounts:
    """The plugin (``conftest.py`` registers it)."""

    def __init__(self, adapters_import: bool) -> None:
        self.adapters_import = adapters_import  # whether tests/adapters.py imports
        self.unwritten: dict[str, str] = {}  # advice test -> the unwritten adapter it needed
        self.counted_failures = 0  # failed reports that are not advice: they make the run red

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        # On the report, not on this plugin: with worker processes (pytest-xdist) the report is
        # made in a worker and only the report reaches the process that prints the summary.
        report = yield
        if call.excinfo is not None and is_failed_advice(report):
            name = unwritten_adapter(call.excinfo)
            if name is not None:
                report.user_properties.append((UNWRITTEN, name))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport):
        if is_failed_advice(report):
            return ADVICE, "a", ("ADVICE", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed and not is_failed_advice(report):
            self.counted_failures += 1
        for key, value in report.user_properties:
            if key == UNWRITTEN:
                self.unwritten[report.nodeid] = value

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.counted_failures += 1

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config):
        # Before pytest's own sections, so the failures that count come last, nearest the end.
        if config.option.tbstyle != "no":
            write_advice_failures(terminalreporter, config, self.unwritten)
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int):
        if exitstatus == pytest.ExitCode.TESTS_FAILED and not self.counted_failures:
            session.exitstatus = pytest.ExitCode.OK  # only advice failed
        result = yield
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            write_what_counts(reporter, self.unwritten, self.adapters_import)
        return result


def write_advice_failures(reporter, config: pytest.Config, unwritten: dict[str, str]) -> None:
    """Each failed advice test's report, as pytest shows a failure; those that only needed an
    unwritten adapter are named once, in what counts."""
    reports = [r for r in reporter.stats.get(ADVICE, []) if r.nodeid not in unwritten]
    if not reports:
        return
    reporter.write_sep("=", "ADVICE (not graded)", yellow=True)
    writer = config.get_terminal_writer()
    for report in reports:
        phase = "" if report.when == "call" else f" (at {report.when})"
        reporter.write_sep("_", f"ADVICE {report.head_line}{phase}", yellow=True)
        report.toterminal(writer)
        if config.option.showcapture == "no":
            continue
        for title, content in report.sections:
            if config.option.showcapture in ("all", *title.split()):
                reporter.write_sep("-", title)
                reporter.write_line(content.rstrip("\n"))


def rubric_points() -> dict[str, float]:
    path = next((p for p in RUBRICS if p.is_file()), None)
    if path is None:
        return {}
    with path.open("rb") as file:
        return {c["name"]: c["points"] for c in tomllib.load(file).get("component", [])}


def outcomes(reporter) -> dict[str, str]:
    """Each test's outcome under tests/: "passed", "failed" (in any phase, advice or not) or
    "skipped"."""
    found: dict[str, str] = {}
    for kind in ("passed", "failed", "error", ADVICE, "skipped"):
        for report in reporter.stats.get(kind, []):
            if not hasattr(report, "nodeid") or not report.nodeid.startswith("tests/"):
                continue
            if kind in ("failed", "error", ADVICE):
                found[report.nodeid] = "failed"
            elif kind == "skipped":
                found.setdefault(report.nodeid, "skipped")
            elif report.when == "call":
                found.setdefault(report.nodeid, "passed")
    return found


def write_what_counts(reporter, unwritten: dict[str, str], adapters_import: bool) -> None:
    """After pytest's own summary: graded cases per component (public ones; the grader runs them
    and hidden ones on other inputs), then the advice, which is never graded, then the verdict."""
    found = outcomes(reporter)
    if not found:
        return
    # A collection error of tests/test_cases.py itself is the graded cases failing, not advice.
    graded = {n: o for n, o in found.items() if n.startswith(GRADED) or n == GRADED_FILE}
    advice = {n: o for n, o in found.items() if n not in graded}
    reporter.write_sep("=", "what counts")
    if GRADED_FILE in graded:
        reporter.write_line(f"graded cases: NOT RUN, {GRADED_FILE} could not be collected")
    write_graded(reporter, graded)
    write_advice(reporter, advice, unwritten, adapters_import)
    write_verdict(reporter, graded)


def write_graded(reporter, graded: dict[str, str]) -> None:
    points, passed, total = rubric_points(), Counter(), Counter()
    for nodeid, outcome in graded.items():
        if nodeid == GRADED_FILE:
            continue
        component = nodeid[len(GRADED) :].split("-public-")[0]
        total[component] += 1
        passed[component] += outcome == "passed"
    if not total:
        return
    reporter.write_line("graded cases (public; hidden cases of the same kinds decide most points):")
    for component in sorted(total):
        worth = points.get(component)
        reporter.write_line(
            f"  {component:<30} {passed[component]:>2}/{total[component]:<2} passed"
            + (f"   {worth:g} point{'s' * (worth != 1)}" if worth is not None else "")
        )


def write_advice(
    reporter, advice: dict[str, str], unwritten: dict[str, str], adapters_import: bool
) -> None:
    """The advice that did not pass, listed, except what only needed an unwritten adapter beyond
    the assignment: those adapters are named once, with what they cost (nothing graded)."""
    failed = sorted(n for n, o in advice.items() if o == "failed")
    reporter.write_line(
        f"advice (not graded): {len(advice)} tests, {len(failed)} did not pass"
        + (":" if failed else "")
    )
    for nodeid in failed:
        if nodeid not in unwritten:
            reporter.write_line(f"  ADVICE {nodeid}")
    needing = [n for n in failed if n in unwritten]
    if needing:
        names = ", ".join(sorted({unwritten[n] for n in needing} | absent_adapters()))
        reporter.write_line(
            f"  {len(needing)} of them only need adapters beyond the assignment's that are not "
            f"written (no graded case calls them, so they cost no points): {names}"
        )
    if not adapters_import:
        reporter.write_line("  (the advice tests did not run: tests/adapters.py does not import)")


def absent_adapters() -> set[str]:
    """The documented adapters beyond the assignment's that ``tests/adapters.py`` lacks."""
    adapters = sys.modules.get("tests.adapters")
    documented = {n for n, f in vars(adapter_signatures).items() if inspect.isfunction(f)}
    beyond = documented - lazy_adapters.ASSIGNMENT
    return {name for name in beyond if not callable(getattr(adapters, name, None))}


def write_verdict(reporter, graded: dict[str, str]) -> None:
    """The last line: the graded cases alone (pytest's line above counts every test)."""
    cases = [o for n, o in graded.items() if n != GRADED_FILE]
    failed = sum(o == "failed" for o in cases)
    if GRADED_FILE in graded:
        reporter.write_sep("=", f"graded: {GRADED_FILE} could not be collected", red=True)
    elif failed:
        text = f"graded: {len(cases) - failed} of {len(cases)} public cases passed, {failed} failed"
        reporter.write_sep("=", text, red=True, bold=True)
    elif cases:
        text = f"graded: all {len(cases)} public case{'s' * (len(cases) != 1)} passed"
        reporter.write_sep("=", text, green=True, bold=True)
    else:
        reporter.write_sep("=", "graded: no graded case in this run", yellow=True)
