"""The judge: check a driver's outputs against expected values the sandbox never saw.

``judge_component(name, outputs_dir, expected_root)`` runs after the driver has exited, outside
the sandbox. The cases it judges are the instructor's (those with expected values under
``expected_root/<component>/``), never whatever the outputs folder happens to hold. Every output
file is untrusted: size caps, regular files only, well-formed JSON and safetensors, names,
dtypes and shapes are checked, and anything wrong fails that case with a message. The judge
raises only for instructor-side problems (unknown component, missing expected values).

Points come from the rubric (``course/grading/rubric.toml``) alone, and only hidden cases carry them:
each component's points are split between its hidden cases in proportion to per-case weights
(default 1). Every public case has hidden instances of the same kind (other seeds, shapes and
hyperparameters), so replaying the shipped snapshots earns nothing; public cases are feedback.

Feedback on a hidden case is a fixed text: passed, wrong outputs, no outputs, or the name of
the builtin exception it raised. Nothing the student's code wrote (an exception's message, a
class name of its own, printed text) and nothing of the case's inputs or expected values
reaches ``results.json`` through it.
"""

from __future__ import annotations

import builtins
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course.grading.driver import BLOCKED, IMPORT_FAILED
from course.paths import HIDDEN, RUBRIC
from tests.cases import CASES, Outputs, components, judge_case
from tests.cases.wire import Caps, WireError, read_bundle
from tests.hints import diagnosis_lines

HIDDEN_DIR = HIDDEN
EXPECTED_ROOT, INPUTS_ROOT = HIDDEN_DIR / "expected", HIDDEN_DIR / "inputs"
MESSAGE_LIMIT = 2000
LEFT_RUNNING = "it left processes running; stopped"  # a hidden case's note (the count varies)
OUTPUT_CAPS = Caps()
BUILTIN_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


# The start of the judge's message for a case the driver wrote no outputs for.
NO_OUTPUTS = "no outputs"


@dataclass(frozen=True)
class Component:
    name: str
    points: float
    weights: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Rubric:
    components: list[Component]
    limits: dict[str, Any]
    blocked_packages: tuple[str, ...] = ()

    def component(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(f"the rubric has no component {name!r}")

    @property
    def total(self) -> float:
        return sum(c.points for c in self.components)


@dataclass(frozen=True)
class CaseResult:
    case: str
    passed: bool
    points: float
    max_points: float
    message: str
    hidden: bool
    description: str = ""  # what the case does (the first line of its docstring)
    note: str = ""  # what the driver noted beside the outcome (processes left running)


def load_rubric(path: Path = RUBRIC) -> Rubric:
    """Read and validate the rubric; ``ValueError`` naming the problem otherwise."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    grading = data.get("grading", {})
    if set(grading) - {"blocked_packages"}:
        raise ValueError(
            f"{path}: unknown [grading] keys: {sorted(set(grading) - {'blocked_packages'})}"
        )
    blocked = grading.get("blocked_packages", [])
    if not all(isinstance(n, str) and n.isidentifier() for n in blocked):
        raise ValueError(f"{path}: [grading] blocked_packages must be module names: {blocked}")
    entries = data.get("component", [])
    if not entries:
        raise ValueError(f"{path}: the rubric has no [[component]] entries")
    known = set(components())
    parsed = []
    for entry in entries:
        unknown_keys = set(entry) - {"name", "points", "weights"}
        if unknown_keys or "name" not in entry or "points" not in entry:
            raise ValueError(
                f"{path}: component {entry} needs name and points (unknown: {unknown_keys})"
            )
        component = Component(
            entry["name"],
            float(entry["points"]),
            {str(k): float(v) for k, v in entry.get("weights", {}).items()},
        )
        if component.name not in known:
            raise ValueError(
                f"{path}: no cases for component {component.name!r}; known: {sorted(known)}"
            )
        if not component.points >= 0:
            raise ValueError(f"{path}: {component.name}: points must be >= 0")
        if not all(w > 0 and math.isfinite(w) for w in component.weights.values()):
            raise ValueError(f"{path}: {component.name}: case weights must be positive")
        parsed.append(component)
    names = [c.name for c in parsed]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: component names repeat: {names}")
    return Rubric(parsed, dict(data.get("limits", {})), tuple(blocked))


def is_hidden(case_id: str) -> bool:
    return "-hidden-" in case_id


def case_points(component: Component, case_ids: list[str]) -> dict[str, float]:
    """Each case's share of the component's points: hidden cases by weight, public ones 0."""
    hidden = [c for c in case_ids if is_hidden(c)]
    total = sum(component.weights.get(c, 1.0) for c in hidden)
    return {
        c: component.points * component.weights.get(c, 1.0) / total if is_hidden(c) else 0.0
        for c in case_ids
    }


def hidden_feedback(outcome: Outputs | str | None) -> str:
    """The fixed text a failed hidden case shows for ``outcome`` (the judge's message about
    its outputs, or the outputs of a case that raised)."""
    if isinstance(outcome, Outputs):
        raised = str(outcome.raised)
        where = (
            "importing your tests/adapters.py failed: " if raised.startswith(IMPORT_FAILED) else ""
        )
        name = raised.removeprefix(IMPORT_FAILED).split(":", 1)[0].strip()
        if BLOCKED in raised and name == "ModuleNotFoundError":
            return where + "imported a package the grading policy blocks"
        if name == "CaseTimeout":
            return "ran past its time limit"
        if name == "CaseEnded":
            return "ended its process before writing its outputs (an exit or a crash)"
        shown = name if name in BUILTIN_EXCEPTIONS else "an exception of a class of your own"
        return f"{where}raised {shown}"
    if isinstance(outcome, str) and outcome.startswith(NO_OUTPUTS):
        return outcome
    if isinstance(outcome, str) and outcome.startswith(("malformed", "unreadable")):
        return "its outputs were malformed"
    return "wrong outputs"


def load_outputs(outputs_dir: Path, case_id: str, caps: Caps) -> tuple[Outputs | str, str, str]:
    """The case's outputs, or a message saying why there are none usable; the diagnosis lines
    the driver measured for it (public cases), formatted; and the driver's note beside them,
    if any (processes the case left running, which the driver stopped)."""
    try:
        found = read_bundle(outputs_dir, case_id, caps)
    except WireError as error:
        return f"malformed outputs: {error}", "", ""
    except Exception as error:  # noqa: BLE001  (never let a student's file stop the judge)
        return f"unreadable outputs: {type(error).__name__}", "", ""
    if found is None:
        return f"{NO_OUTPUTS}: the case did not finish (time limit, crash or exit?)", "", ""
    header, data = found
    status, error = header.get("status"), header.get("error")
    if header.get("case") != case_id or status not in ("ok", "raised"):
        return "malformed outputs: the header does not belong to this case", "", ""
    measured = measured_lines(header.get("diagnosis"))
    note = str(header.get("note") or "")[:MESSAGE_LIMIT]
    if status == "raised":
        return Outputs({}, str(error)[:MESSAGE_LIMIT]), measured, note
    return Outputs(data), measured, note


# How much of the driver's diagnosis lines a failed public case's message shows: lines, and
# characters per line and in all (pytest's lines for one case are one to three, each < 400).
DIAGNOSIS_LINES, DIAGNOSIS_LINE_LIMIT, DIAGNOSIS_LIMIT = 6, 500, 2000


def measured_lines(lines: object) -> str:
    """The ``diagnosis:`` lines the public run measured with the student's code, as pytest
    prints them (``tests.localize.diagnose``), capped. The student's code runs in that process
    and could write other lines: they reach only that student's own public feedback, never
    points or a hidden case's text."""
    if not isinstance(lines, list):
        return ""
    kept = [line[:DIAGNOSIS_LINE_LIMIT] for line in lines if isinstance(line, str)]
    return diagnosis_lines(kept[:DIAGNOSIS_LINES], "  ")[:DIAGNOSIS_LIMIT]


def judge_component(
    name: str,
    outputs_dir: Path,
    expected_root: Path = EXPECTED_ROOT,
    *,
    rubric: Rubric | None = None,
    inputs_root: Path | None = None,
    caps: Caps = OUTPUT_CAPS,
    hidden: bool | None = None,
) -> list[CaseResult]:
    """One result per instructor case of component ``name`` (only the hidden or only the public
    ones if ``hidden`` says so), in case-id order."""
    component = (rubric or load_rubric()).component(name)
    expected_dir = Path(expected_root) / name
    inputs_dir = Path(inputs_root or Path(expected_root).parent / "inputs") / name
    case_ids = sorted(p.stem for p in expected_dir.glob("*.json"))
    if not case_ids:
        raise FileNotFoundError(
            f"no expected values for {name!r} in {expected_dir} (make hidden-cases)"
        )
    points = case_points(component, case_ids)
    results = []
    for case_id in case_ids:
        if hidden is not None and is_hidden(case_id) != hidden:
            continue
        header, expected = read_bundle(expected_dir, case_id)
        _, inputs = read_bundle(inputs_dir, case_id)
        case = CASES[(header["component"], header["kind"])]
        outputs, measured, note = load_outputs(Path(outputs_dir), case_id, caps)
        if note and is_hidden(case_id):
            note = LEFT_RUNNING
        message = (
            outputs if isinstance(outputs, str) else judge_case(case, outputs, expected, inputs)
        )
        if message is not None and is_hidden(case_id):
            message = hidden_feedback(
                outputs if isinstance(outputs, str) or outputs.raised else None
            )
        elif message is not None:
            message = message[:MESSAGE_LIMIT] + measured
        passed = message is None
        results.append(
            CaseResult(
                case_id,
                passed,
                points[case_id] if passed else 0.0,
                points[case_id],
                "passed" if passed else message[: MESSAGE_LIMIT + DIAGNOSIS_LIMIT],
                is_hidden(case_id),
                case.doc.strip().split("\n")[0],
                note,
            )
        )
    return results
