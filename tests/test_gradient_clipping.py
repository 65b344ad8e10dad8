"""Global-norm clipping against torch.nn.utils.clip_grad_norm_; at its boundaries, a norm equal to
the maximum is left alone, and the scale is ``max / (norm + 1e-6)``, whose ``eps`` matters for
tiny norms."""

from __future__ import annotations

import pytest
import torch

from .adapters import run_gradient_clipping
from .hints import diagnosis_lines, matching_hints
from .localize import diagnosed_if_raised
from .localize.raised import clipping_raised
from .measure import clipping_lines


def _parameters_with_grads(scale: float, seed: int = 0) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(3, 4), (5,), (2, 2, 2)]
    parameters = [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]
    for p in parameters:
        p.grad = torch.randn(p.shape, generator=generator) * scale
    return parameters


def _clone(parameters):
    copies = [torch.nn.Parameter(p.detach().clone()) for p in parameters]
    for copy, p in zip(copies, parameters, strict=False):
        copy.grad = None if p.grad is None else p.grad.clone()
    return copies


def test_gradient_clipping_matches_torch_when_norm_is_large():
    ours = _parameters_with_grads(scale=10.0)
    theirs = _clone(ours)
    given = [p.grad.clone() for p in ours]
    per_parameter = [p.grad / max(1.0, p.grad.norm().item()) for p in ours]
    run_gradient_clipping(ours, max_l2_norm=1.0)
    torch.nn.utils.clip_grad_norm_(theirs, max_norm=1.0)
    clipped = [p.grad for p in ours]
    same = lambda a, b: all(torch.allclose(x, y, atol=1e-5) for x, y in zip(a, b, strict=False))  # noqa: E731
    hint = matching_hints(
        clipped,
        {
            "each parameter was clipped by its own norm; use one global L2 norm over all gradients": per_parameter
        },
        same,
    ) or diagnosis_lines(clipping_lines(given, clipped, 1.0))
    assert same(clipped, [p.grad for p in theirs]), (
        f"clipped gradients differ from clip_grad_norm_{hint}"
    )
    total = torch.sqrt(sum(p.grad.pow(2).sum() for p in ours))
    assert abs(total.item() - 1.0) < 1e-4


def test_gradient_clipping_leaves_small_gradients_alone():
    ours = _parameters_with_grads(scale=1e-3)
    before = [p.grad.clone() for p in ours]
    run_gradient_clipping(ours, max_l2_norm=1.0)
    for p, g in zip(ours, before, strict=False):
        assert torch.equal(p.grad, g), (
            "gradients whose global norm is already below max_l2_norm changed\n"
            "hint: scale only when the norm exceeds the maximum"
        )


def test_gradient_clipping_uses_one_global_norm_and_skips_missing_grads():
    ours = _parameters_with_grads(scale=5.0, seed=3)
    ours[1].grad = None  # frozen parameter: no gradient, must be skipped
    expected_norm = torch.sqrt(sum(p.grad.pow(2).sum() for p in ours if p.grad is not None))
    expected = [None if p.grad is None else p.grad * 2.0 / (expected_norm + 1e-6) for p in ours]
    given = [p.grad.clone() for p in ours if p.grad is not None]
    run_gradient_clipping(iter(ours), max_l2_norm=2.0)  # a one-shot iterator must work too
    assert ours[1].grad is None
    clipped = [p.grad for p in ours if p.grad is not None]
    measured = diagnosis_lines(clipping_lines(given, clipped, 2.0))
    for p, e in zip(ours, expected, strict=False):
        if e is not None:
            torch.testing.assert_close(p.grad, e, msg=lambda message: message + measured)


# --- gradient clipping ------------------------------------------------------------------------


def parameters_with_gradients(*gradients: list[float]) -> list[torch.nn.Parameter]:
    parameters = []
    for values in gradients:
        parameter = torch.nn.Parameter(torch.zeros(len(values)))
        parameter.grad = torch.tensor(values)
        parameters.append(parameter)
    return parameters


def clipped(gradients: list[list[float]], max_l2_norm: float) -> list[torch.Tensor]:
    """The student's clipping of ``gradients``; raising gets a note on what a probe measured."""
    parameters = parameters_with_gradients(*gradients)
    with diagnosed_if_raised(lambda: clipping_raised(run_gradient_clipping)):
        run_gradient_clipping(parameters, max_l2_norm)
    return [p.grad for p in parameters]


def clipping_diagnosis(gradients: list[list[float]], got: list[torch.Tensor], max_norm) -> str:
    lines = clipping_lines([torch.tensor(g) for g in gradients], got, max_norm)
    return diagnosis_lines(lines)


def test_gradient_clipping_norm_equal_to_max_is_left_alone() -> None:
    gradients = [[3.0, 0.0], [4.0]]  # global norm exactly 5
    got = clipped(gradients, 5.0)
    # 5 / (5 + 1e-6) would change them by 2e-7 relative, which the upstream handout allows.
    assert torch.allclose(torch.cat(got), torch.tensor([3.0, 0.0, 4.0]), rtol=1e-6, atol=0), (
        f"gradients of norm exactly max_l2_norm=5 became {torch.cat(got).tolist()}; only norms "
        "above the maximum are scaled" + clipping_diagnosis(gradients, got, 5.0)
    )


@pytest.mark.parametrize("norm, max_l2_norm", [(2e-6, 1e-6), (3e-3, 1e-3), (0.5, 0.25)])
def test_gradient_clipping_eps_in_the_scale_matches_torch(norm, max_l2_norm) -> None:
    direction = torch.tensor([0.6, -0.8, 0.0])
    gradients = [(direction * norm).tolist()]
    (ours,) = clipped(gradients, max_l2_norm)
    theirs = parameters_with_gradients(*gradients)
    torch.nn.utils.clip_grad_norm_(theirs, max_l2_norm)  # scales by max / (norm + 1e-6)
    missing_eps = direction * max_l2_norm
    assert torch.allclose(ours, theirs[0].grad, rtol=1e-5, atol=0), (
        f"norm {norm:g} clipped to max {max_l2_norm:g}: got {ours.tolist()}, torch "
        f"gives {theirs[0].grad.tolist()}"
        + (
            "\nhint: scale by max / (norm + 1e-6); the eps matters when the norm is tiny"
            if torch.allclose(ours, missing_eps, rtol=1e-5)
            else clipping_diagnosis(gradients, [ours], max_l2_norm)
        )
    )


def test_gradient_clipping_zero_gradients_stay_zero() -> None:
    parameters = parameters_with_gradients([0.0, 0.0], [0.0])
    run_gradient_clipping(parameters, 1.0)
    assert all(torch.equal(p.grad, torch.zeros_like(p.grad)) for p in parameters)
