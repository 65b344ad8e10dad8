"""The cosine learning-rate schedule with warmup, against the handout's worked values."""

from __future__ import annotations

import math

import pytest
import torch

from .adapters import run_get_lr_cosine_schedule
from .hints import diagnosis_lines, matching_hints
from .measure import schedule_phases

# The handout's example: max 1, min 0.1, 7 warmup iterations, cycle ends at 21.
HANDOUT_VALUES = [
    0,
    0.14285714285714285,
    0.2857142857142857,
    0.42857142857142855,
    0.5714285714285714,
    0.7142857142857143,
    0.8571428571428571,
    1.0,
    0.9887175604818206,
    0.9554359905560885,
    0.9018241671106134,
    0.8305704108364301,
    0.7452476826029011,
    0.6501344202803414,
    0.55,
    0.44986557971965857,
    0.3547523173970989,
    0.26942958916356996,
    0.19817583288938662,
    0.14456400944391146,
    0.11128243951817937,
    0.1,
    0.1,
    0.1,
    0.1,
]


def mistaken_schedule(it: int, *, warmup_shift: int = 0, cosine_from_zero: bool = False) -> float:
    """The handout example's schedule with one of two common mistakes."""
    max_lr, min_lr, warmup, cycle = 1.0, 0.1, 7, 21
    if it < warmup:
        return (it + warmup_shift) / warmup * max_lr
    if it > cycle:
        return min_lr
    progress = it / cycle if cosine_from_zero else (it - warmup) / (cycle - warmup)
    return min_lr + (1 + math.cos(math.pi * progress)) / 2 * (max_lr - min_lr)


def test_cosine_schedule_handout_values():
    actual = [run_get_lr_cosine_schedule(it, 1.0, 0.1, 7, 21) for it in range(25)]
    mistakes = {
        "warmup is off by one: the rate is it / warmup_iters * max, so iteration 0 has rate 0": [
            mistaken_schedule(it, warmup_shift=1) for it in range(25)
        ],
        "the cosine must start at the end of warmup: progress is (it - warmup) / (cycle - warmup)": [
            mistaken_schedule(it, cosine_from_zero=True) for it in range(25)
        ],
    }
    hint = matching_hints(actual, mistakes, lambda a, b: a == pytest.approx(b, abs=1e-9))
    if not hint:  # not a listed mistake: which phases leave the handout's values
        its = list(range(25))
        hint = diagnosis_lines(
            schedule_phases(
                {"max": 1.0, "warmup": 7, "cycle": 21, "its": its},
                {"lrs": [as_float(lr) for lr in actual]},
                {"lrs": HANDOUT_VALUES},
            )
        )
    assert actual == pytest.approx(HANDOUT_VALUES, abs=1e-12), f"schedule {actual}{hint}"


def as_float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001  (not a number: the comparison below fails on it)
        return None


def test_cosine_schedule_matches_torch_schedulers():
    """Warmup as LinearLR from 0, then CosineAnnealingLR to the floor, then constant."""
    max_lr, min_lr, warmup, cycle = 3e-3, 3e-4, 10, 50
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=max_lr)
    warm = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: it / warmup)
    expected = []
    for _ in range(warmup):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        warm.step()
    optimizer.param_groups[0]["lr"] = max_lr
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=cycle - warmup, eta_min=min_lr
    )
    for _ in range(cycle - warmup + 1):
        expected.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        cosine.step()
    actual = [
        run_get_lr_cosine_schedule(it, max_lr, min_lr, warmup, cycle) for it in range(cycle + 1)
    ]
    its = list(range(cycle + 1))
    phases = schedule_phases(
        {"max": max_lr, "warmup": warmup, "cycle": cycle, "its": its},
        {"lrs": [as_float(lr) for lr in actual]},
        {"lrs": expected},
    )
    assert actual == pytest.approx(expected, rel=1e-9, abs=1e-12), diagnosis_lines(phases)
    assert run_get_lr_cosine_schedule(cycle + 100, max_lr, min_lr, warmup, cycle) == min_lr


def test_cosine_schedule_without_warmup_starts_at_max():
    # warmup_iters=0: no warm-up phase, so iteration 0 is the cosine's start, at max (a warm-up
    # formula it / warmup_iters would divide by zero there).
    its = [0, 3, 5, 10]
    actual = [run_get_lr_cosine_schedule(it, 2.0, 1.0, 0, 10) for it in its]
    expected = [1.0 + 0.5 * (1 + math.cos(math.pi * it / 10)) for it in its]
    phases = schedule_phases(
        {"max": 2.0, "warmup": 0, "cycle": 10, "its": its},
        {"lrs": [as_float(lr) for lr in actual]},
        {"lrs": expected},
    )
    assert actual == pytest.approx(expected, rel=1e-12), (
        f"warmup_iters=0: rates {actual} at its {its}, expected {expected}"
        + diagnosis_lines(phases)
    )
