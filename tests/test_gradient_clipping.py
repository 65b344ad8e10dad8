"""Global-norm clipping against torch.nn.utils.clip_grad_norm_."""

from __future__ import annotations

import torch

from .adapters import run_gradient_clipping
from .hints import diagnosis_lines, matching_hints
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
