"""The judge: check a driver's outputs against expected values the sandbox never saw.

``judge_component(name, outputs_dir, expected_root)`` runs after the driver has exited, outside
the sandbox. The cases it judges are the instructor's (those with expected values under
``expected_root/<component>/``), never whatever the outputs folder happens to hold. Every output
file is untrusted: size caps, regular files only, well-formed JSON and safetensors, names,
dtypes and shapes are checked, and anything wrong fails that case with a message. The judge
raises only for instructor-side problems (unknown component, missing expected values).

Points come from the rubric (``course/rubric.toml``) alone: each component's points are split
between its hidden cases (``hidden_share``, most of them) and its public ones, each side in
proportion to per-case weights (default 1).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cases import CASES, Outputs, components, judge_case
from tests.cases.wire import Caps, WireError, read_bundle

RUBRIC = Path(__file__).with_name("rubric.toml")
HIDDEN_DIR = Path(__file__).with_name("hidden")
EXPECTED_ROOT, INPUTS_ROOT = HIDDEN_DIR / "expected", HIDDEN_DIR / "inputs"
MESSAGE_LIMIT = 2000
DEFAULT_HIDDEN_SHARE = 0.75
OUTPUT_CAPS = Caps()


@dataclass(frozen=True)
class Component:
    name: str
    points: float
    hidden_share: float = DEFAULT_HIDDEN_SHARE
    weights: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Rubric:
    components: list[Component]
    limits: dict[str, Any]

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


def load_rubric(path: Path = RUBRIC) -> Rubric:
    """Read and validate the rubric; ``ValueError`` naming the problem otherwise."""
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    share = data.get("grading", {}).get("hidden_share", DEFAULT_HIDDEN_SHARE)
    entries = data.get("component", [])
    if not entries:
        raise ValueError(f"{path}: the rubric has no [[component]] entries")
    known = set(components())
    parsed = []
    for entry in entries:
        unknown_keys = set(entry) - {"name", "points", "hidden_share", "weights"}
        if unknown_keys or "name" not in entry or "points" not in entry:
            raise ValueError(
                f"{path}: component {entry} needs name and points (unknown: {unknown_keys})"
            )
        component = Component(
            entry["name"],
            float(entry["points"]),
            float(entry.get("hidden_share", share)),
            {str(k): float(v) for k, v in entry.get("weights", {}).items()},
        )
        if component.name not in known:
            raise ValueError(
                f"{path}: no cases for component {component.name!r}; known: {sorted(known)}"
            )
        if not (component.points >= 0 and 0 <= component.hidden_share <= 1):
            raise ValueError(f"{path}: {component.name}: points >= 0 and 0 <= hidden_share <= 1")
        if not all(w > 0 and math.isfinite(w) for w in component.weights.values()):
            raise ValueError(f"{path}: {component.name}: case weights must be positive")
        parsed.append(component)
    names = [c.name for c in parsed]
    if len(set(names)) != len(names):
        raise ValueError(f"{path}: component names repeat: {names}")
    return Rubric(parsed, dict(data.get("limits", {})))


def is_hidden(case_id: str) -> bool:
    return "-hidden-" in case_id


def case_points(component: Component, case_ids: list[str]) -> dict[str, float]:
    """Each case's share of the component's points."""
    hidden = [c for c in case_ids if is_hidden(c)]
    public = [c for c in case_ids if not is_hidden(c)]
    hidden_share = component.hidden_share if public else 1.0
    if not hidden:
        hidden_share = 0.0
    points = {}
    for side, share in ((hidden, hidden_share), (public, 1.0 - hidden_share)):
        total = sum(component.weights.get(c, 1.0) for c in side)
        for c in side:
            points[c] = component.points * share * component.weights.get(c, 1.0) / total
    return points


def load_outputs(outputs_dir: Path, case_id: str, caps: Caps) -> Outputs | str:
    """The case's outputs, or a message saying why there are none usable."""
    try:
        found = read_bundle(outputs_dir, case_id, caps)
    except WireError as error:
        return f"malformed outputs: {error}"
    except Exception as error:  # noqa: BLE001  (never let a student's file stop the judge)
        return f"unreadable outputs: {type(error).__name__}"
    if found is None:
        return "no outputs: the case did not finish (time limit, crash or exit?)"
    header, data = found
    status, error = header.get("status"), header.get("error")
    if header.get("case") != case_id or status not in ("ok", "raised"):
        return "malformed outputs: the header does not belong to this case"
    if status == "raised":
        return Outputs({}, str(error)[:MESSAGE_LIMIT])
    return Outputs(data)


def judge_component(
    name: str,
    outputs_dir: Path,
    expected_root: Path = EXPECTED_ROOT,
    *,
    rubric: Rubric | None = None,
    inputs_root: Path | None = None,
    caps: Caps = OUTPUT_CAPS,
) -> list[CaseResult]:
    """One result per instructor case of component ``name``, in case-id order."""
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
        header, expected = read_bundle(expected_dir, case_id)
        _, inputs = read_bundle(inputs_dir, case_id)
        case = CASES[(header["component"], header["kind"])]
        outputs = load_outputs(Path(outputs_dir), case_id, caps)
        message = (
            outputs if isinstance(outputs, str) else judge_case(case, outputs, expected, inputs)
        )
        passed = message is None
        results.append(
            CaseResult(
                case_id,
                passed,
                points[case_id] if passed else 0.0,
                points[case_id],
                "passed" if passed else message[:MESSAGE_LIMIT],
                is_hidden(case_id),
                case.doc.strip().split("\n")[0],
            )
        )
    return results
