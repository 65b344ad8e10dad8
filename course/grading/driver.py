"""The grading driver: run one component's cases on a student's code and write outputs only.

    python driver.py --cases-root DIR --submission DIR --inputs DIR --component NAME --out DIR

A small fixed script, not pytest and no file of the student's: it runs inside the grader's
sandbox, imports the pristine case definitions (``<cases-root>/tests/cases``) first, then the
student's ``cs336_basics`` and ``tests/adapters.py``, runs each case of the component and
writes the case's outputs to ``<out>/<case id>.{safetensors,json}`` as soon as it finishes.
It never sees a hidden case's expected values: the judge (``course/grading/judge.py``) compares
outside, afterwards. In the public run it judges a public case with its shipped expected values only
to add pytest's diagnosis lines to a failure (``public_explainer``).
Whatever the student's code does (raise, exit, print, hang past the soft per-case alarm),
the case records it and the driver goes on; the grader's watchdog is the hard limit. The alarm
counts CPU time (a busy neighbour on the machine does not make a case time out), with a wall
clock bound four times as long for code that sleeps. Packages the rubric blocks (``--blocked``)
cannot be imported by the student's code: the import fails with a message naming the policy.
See course/GRADING_INTERFACE.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from pathlib import Path

EXIT_BAD_ARGUMENTS = 2
IMPORT_FAILED = "importing your tests/adapters.py failed: "  # course/grading/judge.py reads it back
BLOCKED = "blocked while grading"  # in the message for a package the rubric blocks
CASE_TIMEOUT_S = 60.0


class CaseTimeout(BaseException):
    """Raised by the soft per-case alarm (a BaseException, so ``except Exception`` misses it)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases-root", type=Path, required=True, help="holds pristine tests/cases")
    parser.add_argument(
        "--submission", type=Path, required=True, help="holds cs336_basics/ and tests/adapters.py"
    )
    parser.add_argument(
        "--inputs", type=Path, required=True, help="case inputs: <component>/<case id>.*"
    )
    parser.add_argument("--component", required=True, help="a component, or several: a,b")
    parser.add_argument("--out", type=Path, required=True, help="an empty writable folder")
    parser.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    parser.add_argument(
        "--case-timeout",
        type=float,
        default=CASE_TIMEOUT_S,
        help="soft CPU-time alarm per case (and for importing the adapters); 0: none",
    )
    parser.add_argument("--blocked", default="", help="comma-separated packages to refuse")
    return parser.parse_args(argv)


def isolate_paths(cases_root: Path) -> None:
    """The pristine cases first; never this script's folder or the working directory."""
    here = str(Path(__file__).resolve().parent)
    rest = [p for p in sys.path if p not in ("", ".", here)]
    sys.path[:] = [str(cases_root), *rest]


def load_student_adapters(submission: Path):
    """The student's ``tests/adapters.py`` as ``tests.adapters`` beside the pristine cases."""
    path = submission / "tests" / "adapters.py"
    spec = importlib.util.spec_from_file_location("tests.adapters", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests.adapters"] = module
    spec.loader.exec_module(module)
    return module


WALL_FACTOR = 4  # the wall-clock alarm, for code that sleeps: this many times the CPU alarm


def alarm(seconds: float) -> None:
    """Arm (or, with 0, disarm) the per-case alarms: CPU time, and a longer wall clock."""
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR)


def on_alarm(signum, frame) -> None:
    raise CaseTimeout("the case ran past the driver's per-case time limit")


IMPORT_REPORT = "import.json"  # in --out: whether importing the adapters ended in time


def report_import(out: Path, error: BaseException | None) -> None:
    """Say in ``out`` whether importing the adapters ended before the per-case alarm (the
    grader starts the hidden runs only if it did). The student's code runs in this process and
    could write the same file: a forgery only costs its own submission time."""
    with contextlib.suppress(BaseException), open(out / IMPORT_REPORT, "w") as stream:
        stream.write(json.dumps({"ended": not isinstance(error, CaseTimeout)}))


class BlockedPackages:
    """A meta-path finder that refuses the packages the grading policy blocks (first on
    ``sys.meta_path``). The sandbox also hides their files where it can; this gives the
    student a message that names the policy instead of a bare "No module named"."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"{fullname} is {BLOCKED}: the course's grading policy does not "
                f"allow packages that implement graded parts ({', '.join(self.names)})",
                name=fullname,
            )
        return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    if not out.is_dir() or not args.inputs.is_dir():
        print(f"driver: --out {out} and --inputs {args.inputs} must be folders", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    # The student's prints go to stderr; stdout carries nothing the grader trusts anyway.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    isolate_paths(args.cases_root.resolve())

    import torch

    from tests.cases.core import describe_exception

    torch.set_num_threads(1)
    selected = {c for c in args.cases.split(",") if c}
    instances = load_instances(args.inputs, args.component.split(","), selected)
    if not instances:
        print(f"driver: no case inputs for {args.component!r} in {args.inputs}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    run_cases = case_runner()
    # Only now may the student's files shadow module names: everything the driver itself needs
    # (torch, numpy, safetensors, the cases and their `tests` package) is imported already.
    # First on the path, so their cs336_basics wins over any other copy (the cases root, an
    # editable install of the reference in an unsandboxed run).
    sys.path.insert(0, str(args.submission.resolve()))
    blocked = [name for name in args.blocked.split(",") if name]
    sys.meta_path.insert(0, BlockedPackages(blocked))
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGPROF, on_alarm)
    adapters, import_error, failure = None, None, None
    try:
        alarm(args.case_timeout)
        adapters = load_student_adapters(args.submission.resolve())
    except BaseException as error:  # noqa: BLE001  (syntax errors, exits, anything)
        import_error = IMPORT_FAILED + describe_exception(error)
        failure = error
    finally:
        alarm(0)
    report_import(out, failure)
    run_cases(instances, adapters, import_error, out, args.case_timeout)
    with contextlib.suppress(BaseException):  # the student may have closed or replaced stderr
        sys.stderr.flush()
    # Skip the student's atexit handlers and wait for none of their threads.
    os._exit(0)


def load_instances(inputs: Path, component_names: list[str], selected: set[str]) -> list:
    """``(case id, case, inputs)`` for every case of the components with inputs present."""
    from tests.cases import CASES
    from tests.cases.wire import read_bundle

    instances = []
    for component in component_names:
        folder = inputs / component
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            header, bundle = read_bundle(folder, path.stem)
            if not selected or header["case"] in selected:
                case = CASES[(header["component"], header["kind"])]
                instances.append((header["case"], case, bundle))
    return instances


# Failures where the grader's versions are the likely cause: code that parses or imports on the
# student's Python and libraries but not on the grader's.
VERSION_SENSITIVE = frozenset(
    ("SyntaxError", "IndentationError", "TabError", "ImportError", "ModuleNotFoundError")
)


def grader_versions() -> str:
    """One line naming the grader's Python and the libraries students' code imports most."""
    import numpy
    import torch

    python = ".".join(map(str, sys.version_info[:3]))
    return f"graded with Python {python}, torch {torch.__version__}, numpy {numpy.__version__}"


def with_versions(message: str, versions: str) -> str:
    """``message`` (``"Name: text"``, perhaps after the import prefix), with the grader's
    versions appended when it is a parse or import failure the versions may explain (not a
    blocked package, nor a name missing from the student's own package)."""
    name = message.removeprefix(IMPORT_FAILED).split(":", 1)[0]
    if name not in VERSION_SENSITIVE or BLOCKED in message or "'cs336_basics" in message:
        return message
    return f"{message} ({versions}; code must parse and import there)"


def case_runner():
    """``run_cases(instances, adapters, import_error, out, timeout)``, with what it calls bound
    now, before any student code runs: whatever that code later does to ``sys.modules`` or
    ``sys.path``, the driver keeps its own functions and goes on writing outputs."""
    from tests.cases import Outputs, run_case
    from tests.cases.core import describe_exception
    from tests.cases.wire import write_bundle

    clock, noted, versions = time.perf_counter, with_versions, grader_versions()
    explain = public_explainer()

    def run_cases(instances: list, adapters, import_error: str | None, out: Path, timeout: float):
        """Run each case and write its outputs the moment it finishes."""
        for case_id, case, inputs in instances:
            start = clock()
            if import_error is not None:
                outputs = Outputs({}, import_error)
            else:
                try:
                    alarm(timeout)
                    outputs = run_case(case, adapters, inputs)
                except CaseTimeout as error:  # the alarm fired outside the case's own try
                    outputs = Outputs({}, describe_exception(error))
                finally:
                    alarm(0)
            if outputs.raised is not None:
                outputs = Outputs(outputs.data, noted(outputs.raised, versions))
            header = {"case": case_id, "seconds": round(clock() - start, 3)}
            header |= explain(case_id, case, adapters, inputs, outputs, timeout)
            try:
                write_bundle(out, case_id, outputs.data, header | status_of(outputs))
            except BaseException as error:  # noqa: BLE001  (unsavable outputs)
                problem = f"the outputs could not be saved: {describe_exception(error)}"
                write_bundle(out, case_id, {}, header | status_of(Outputs({}, problem)))

    return run_cases


# --- Public feedback: what pytest prints under a failed public case -----------------------------

# CPU seconds a public case's diagnosis may take (it runs the student's code again, on simpler
# inputs): the public run's share of the time budget is spent on cases first.
DIAGNOSIS_TIMEOUT_S = 20.0


def public_explainer():
    """``explain(case_id, case, adapters, inputs, outputs, timeout)``: for a public case that
    fails, the header entry ``{"diagnosis": [lines]}`` with the lines pytest prints under it
    (``tests.localize.public_diagnosis``: judged with the shipped expected values, then measured
    with the student's code again, under the alarm); ``{}`` otherwise. Only the public sandbox
    holds what that reads (grade.DIAGNOSIS_FILES: the shipped fixtures, tests/localize,
    tests/measure.py), so in a hidden run the import fails and nothing is diagnosed. Bound
    before any student code runs, as ``run_cases`` is."""
    try:
        from tests.localize import public_diagnosis
    except ImportError:
        return lambda *args: {}

    def explain(case_id: str, case, adapters, inputs, outputs, timeout: float) -> dict:
        stopped = str(outputs.raised).startswith(CaseTimeout.__name__)
        if "-public-" not in case_id or adapters is None or stopped:
            return {}
        try:
            alarm(min(timeout, DIAGNOSIS_TIMEOUT_S))
            lines = [str(line) for line in public_diagnosis(case, adapters, inputs, outputs)]
        except BaseException:  # noqa: BLE001  (the alarm, or whatever the student's code does)
            return {}
        finally:
            alarm(0)
        return {"diagnosis": lines} if lines else {}

    return explain


def status_of(outputs) -> dict:
    if outputs.raised is None:
        return {"status": "ok", "error": None}
    return {"status": "raised", "error": outputs.raised}


if __name__ == "__main__":
    raise SystemExit(main())
