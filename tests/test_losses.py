"""Cross-entropy against torch.nn.functional and a naive softmax formula."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from . import lazy_adapters
from .adapters import run_cross_entropy
from .expect import raises_an_error
from .hints import close, diagnosis_lines, matching_hints
from .localize import graded_case_located
from .localize.losses import localize_cross_entropy


def assert_loss(
    actual: object,
    expected: torch.Tensor,
    logits: torch.Tensor,
    targets: torch.Tensor,
    mistakes: dict[str, object] | None = None,
    tolerance: float = 1e-6,
) -> None:
    """The loss is ``expected``; else the listed mistake it matches or, for any other, what
    the student's loss measures on probes (repeated batches, shifted rows, closed forms)."""
    if close(actual, expected, tolerance):
        return
    hint = matching_hints(actual, mistakes or {}, lambda a, b: close(a, b, tolerance))
    if not hint:
        inputs = {"logits": logits, "targets": targets}
        hint = diagnosis_lines(localize_cross_entropy(lazy_adapters, inputs))
    raise AssertionError(f"loss {actual}, expected {expected}{hint}")


def test_cross_entropy_matches_torch():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 5, generator=generator)
    targets = torch.randint(0, 5, (8,), generator=generator)
    expected = F.cross_entropy(logits, targets)
    mistakes = {
        "the loss is summed over positions; average it over every leading position": F.cross_entropy(
            logits, targets, reduction="sum"
        ),
        "this is the probability's log without the minus sign": -expected,
    }
    assert_loss(run_cross_entropy(logits, targets), expected, logits, targets, mistakes, 1e-5)


def test_cross_entropy_naive_formula():
    logits = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], dtype=torch.float64)
    targets = torch.tensor([2, 0])
    probabilities = logits.exp() / logits.exp().sum(-1, keepdim=True)
    expected = -probabilities[torch.arange(2), targets].log().mean()
    assert_loss(run_cross_entropy(logits, targets), expected, logits, targets)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 1000.0]])
    targets = torch.tensor([1, 0])
    result = run_cross_entropy(logits, targets)
    assert torch.isfinite(result), (
        f"cross-entropy is {result.item()} for logits near 1000\n"
        "hint: exp(1000) overflows; subtract each row's max before exp (log-sum-exp), and never form the softmax"
    )
    torch.testing.assert_close(result, F.cross_entropy(logits.double(), targets).float())


@graded_case_located("cross_entropy")
def test_cross_entropy_mean_over_leading_dims():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 3, 7, generator=generator)
    targets = torch.randint(0, 7, (2, 3), generator=generator)
    expected = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1))
    assert_loss(run_cross_entropy(logits, targets), expected, logits, targets)


def test_cross_entropy_gradient_matches_torch():
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(4, 6, generator=generator, requires_grad=True)
    reference = logits.detach().clone().requires_grad_(True)
    targets = torch.randint(0, 6, (4,), generator=generator)
    run_cross_entropy(logits, targets).backward()
    F.cross_entropy(reference, targets).backward()
    torch.testing.assert_close(
        logits.grad,
        reference.grad,
        msg=lambda message: (
            message
            + diagnosis_lines(
                localize_cross_entropy(
                    lazy_adapters, {"logits": logits.detach(), "targets": targets}
                )
            )
        ),
    )


def test_cross_entropy_of_uniform_logits_is_log_vocab():
    logits, targets = torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)
    assert_loss(run_cross_entropy(logits, targets), torch.log(torch.tensor(3.0)), logits, targets)


@pytest.mark.robustness
def test_cross_entropy_rejects_mismatched_shapes():
    logits = torch.zeros(4, 3)
    with raises_an_error():
        run_cross_entropy(logits, torch.zeros(5, dtype=torch.long))
