"""The fairness check (``course/cases/fairness``): its margins mean what they say, a wrong style is
caught, the correct styles pass in this process, and they owe nothing to the reference."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from course.cases.fairness import check, styles
from course.cases.fairness.kit import Kit
from course.cases.fairness.spread import derived_atol
from tests.cases import CASES

FAIRNESS = Path(check.__file__).parent


def test_margin_is_error_over_tolerance() -> None:
    case = CASES[("linear", "basic")]
    truth = torch.linspace(-1, 1, 12, dtype=torch.float64).reshape(3, 4)
    expected = {"out": truth, "out.atol": 1e-3, "reveal": True}
    inputs = {"weight": torch.zeros(4, 2), "x": torch.zeros(3, 2)}
    for error in (0.0, 2.5e-4, 7.5e-4, 3e-3):
        adapters = SimpleNamespace(run_linear=lambda d_in, d_out, w, x, e=error: truth + e)
        outputs = check.run_case(case, adapters, inputs)
        found = check.margin(case, outputs, expected, inputs)
        assert found == pytest.approx(error / 1e-3, rel=1e-6, abs=check.MARGIN_FLOOR)


def test_a_style_with_a_catalogued_mistake_fails_the_check(monkeypatch) -> None:
    untransposed = dataclasses.replace(styles.MATMUL, linear=lambda x, weight: x @ weight)
    monkeypatch.setattr(check, "STYLES", {"untransposed": lambda: untransposed.adapters("x")})
    monkeypatch.setattr(check, "TRAINING_STYLES", {})
    rows = check.run_config("here", ["swiglu"], compiled=False)
    assert {r.style for r in rows} == {"reference", "untransposed"}
    assert all(r.passed for r in rows if r.style == "reference")
    wrong = [r for r in rows if r.style == "untransposed"]
    assert wrong and not any(r.passed for r in wrong)
    text, fine = check.report(rows, check.MAX_MARGIN)
    assert not fine and "FAILS" in text


@pytest.mark.parametrize("components", [["rope", "softmax", "rmsnorm"], ["cosine_schedule"]])
def test_every_correct_style_passes_with_headroom_here(components: list[str]) -> None:
    rows = check.run_config("here", components, compiled=False)
    assert len({r.style for r in rows}) >= 4
    too_close = [r for r in rows if not r.passed or (r.margin or 0) > check.MAX_MARGIN]
    assert too_close == []


def test_a_thin_margin_fails_the_report() -> None:
    rows = [
        check.Row("c", "s", "x-public-y", True, 0.8),
        check.Row("c", "t", "x-public-y", True, 0.1),
    ]
    text, fine = check.report(rows, max_margin=0.5)
    assert not fine and "0.8" in text and "above 0.5" in text


def test_derived_tolerances_follow_the_spread_of_correct_styles() -> None:
    # Ten times the reference's error, or four times the worst correct style's if larger,
    # plus 8 float32 ulps of the output's scale.
    eps = float(torch.finfo(torch.float32).eps)
    assert derived_atol(1e-6, 1e-6, 0.0) == pytest.approx(1e-5)
    assert derived_atol(1e-6, 5e-6, 2.0) == pytest.approx(2e-5 + 16 * eps)


def test_the_styles_are_written_without_the_reference() -> None:
    for path in sorted(FAIRNESS.glob("*.py")):
        if path.name in ("check.py", "__main__.py"):
            continue  # the runner grades the reference's adapters beside the styles
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        ]
        assert not [m for m in imported if m.split(".")[0] == "cs336_basics"], path.name


def test_each_style_is_a_different_kit() -> None:
    kits = [styles.MATMUL, styles.EINSUM, styles.FUNCTIONAL, styles.BROADCAST]
    for field in ("linear", "rmsnorm", "softmax", "sdpa", "rope"):
        assert len({getattr(k, field) for k in kits}) >= 3, field
    assert isinstance(styles.MATMUL, Kit)
