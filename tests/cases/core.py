"""What a graded case is, and the registry of them.

A *case* is one adapter call (or a short script of calls) on inputs fixed by the instructor,
turned into named *outputs*: tensors, and JSON values (numbers, strings, lists). A *check*
compares outputs with *expected* values, or checks a property over several outputs of one case
(causality, prefix logits = full logits, a resumed run = a continued run). The expected values
are the instructor's, computed independently of the code under test and shipped as data (the
snapshots, ``fixtures/expected``): nothing here computes a graded quantity.

The same case runs in two places, so the two never drift:

- ``tests/test_cases.py`` runs every *public* case in-process on the shipped fixtures, with
  hints when a failure matches a known mistake (``uv run pytest -k rope``);
- the grader's driver (``course/grading/driver.py``) runs public and *hidden* cases inside a sandbox
  and writes outputs only; the judge (``course/grading/judge.py``) checks them outside.

A case's id is ``<component>-public-<name>`` or ``<component>-hidden-<name>-<instance>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

# An inputs, outputs or expected mapping: tensors and JSON values, by name.
Bundle = dict[str, Any]


@dataclass(frozen=True)
class Outputs:
    """What one run of a case produced: its outputs, or the exception it raised."""

    data: Bundle
    raised: str | None = None  # "<ExceptionType>: <message>"


@dataclass(frozen=True)
class Case:
    """One kind of graded call.

    ``call(adapters, inputs)`` runs the student's code through the adapters and returns the
    outputs; ``check(outputs, expected, inputs)`` returns ``None`` when they pass, else a
    message (it runs on the judge's side, which holds the inputs too).
    ``public_inputs(shipped)`` builds the public instance's inputs from the shipped fixtures;
    ``snapshot`` names the snapshot holding the public instance's expected values, else they
    are the shipped bundle ``fixtures/expected/<component>/<public id>``. Hidden instances'
    inputs and expected values are the instructor's and never ship.
    """

    component: str
    name: str
    call: Callable[[ModuleType, Bundle], Bundle]
    check: Callable[[Bundle, Bundle, Bundle], str | None]
    public_inputs: Callable[[Any], Bundle] | None = None
    snapshot: str | None = None
    doc: str = field(default="", compare=False)

    @property
    def public_id(self) -> str:
        return f"{self.component}-public-{self.name}"

    def hidden_id(self, instance: str) -> str:
        return f"{self.component}-hidden-{self.name}-{instance}"


CASES: dict[tuple[str, str], Case] = {}


def case(
    component: str,
    name: str,
    *,
    check: Callable[[Bundle, Bundle, Bundle], str | None],
    public: Callable[[Any], Bundle] | None = None,
    snapshot: str | None = None,
) -> Callable[[Callable[[ModuleType, Bundle], Bundle]], Case]:
    """Register the decorated ``call(adapters, inputs) -> outputs`` as a case."""

    def register(call: Callable[[ModuleType, Bundle], Bundle]) -> Case:
        key = (component, name)
        if key in CASES:
            raise ValueError(f"case {component}/{name} is registered twice")
        CASES[key] = Case(component, name, call, check, public, snapshot, call.__doc__ or "")
        return CASES[key]

    return register


def components() -> list[str]:
    return sorted({comp for comp, _ in CASES})


def run_case(case: Case, adapters: ModuleType, inputs: Bundle) -> Outputs:
    """Run ``case`` and capture whatever it raises (``SystemExit`` included) as text."""
    return attempt_case(case, adapters, inputs)[0]


def attempt_case(
    case: Case, adapters: ModuleType, inputs: Bundle
) -> tuple[Outputs, BaseException | None]:
    """``run_case``, and the exception it caught (``None`` when the case returned): the grader's
    public run says where in the student's code it came from, as pytest does."""
    try:
        return Outputs(normalize(case.call(adapters, inputs))), None
    except BaseException as error:  # noqa: BLE001  (student code may raise, even exit)
        return Outputs({}, describe_exception(error)), error


def describe_exception(error: BaseException, limit: int = 2000) -> str:
    try:
        text = f"{type(error).__name__}: {error}"
    except BaseException:  # noqa: BLE001  (a hostile __str__)
        text = f"{type(error).__name__}: <unprintable>"
    return text[:limit]


def normalize(outputs: Any) -> Bundle:
    """Own, CPU, contiguous tensors and plain JSON values; anything else is refused."""
    if not isinstance(outputs, dict):
        raise TypeError(f"a case returned {type(outputs).__name__}, not a dict of outputs")
    return {str(name): normalize_value(value, str(name)) for name, value in outputs.items()}


def normalize_value(value: Any, name: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").contiguous().clone().as_subclass(torch.Tensor)
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) in (list, tuple):
        return [normalize_value(v, name) for v in value]
    if type(value) is dict and all(type(k) is str for k in value):
        return {k: normalize_value(v, name) for k, v in value.items()}
    raise TypeError(f"output {name!r} holds a {type(value).__name__}, not a tensor or JSON value")


def judge_case(case: Case, outputs: Outputs, expected: Bundle, inputs: Bundle) -> str | None:
    """``None`` when the outputs pass; a message otherwise. Never raises: outputs of any shape
    or type that the check cannot handle fail the case."""
    if outputs.raised is not None:
        return f"raised {outputs.raised}"
    try:
        message = case.check(outputs.data, expected, inputs)
    except Exception as error:  # noqa: BLE001  (malformed outputs of any kind)
        return f"malformed outputs ({describe_exception(error, 300)})"
    return str(message) if message else None
