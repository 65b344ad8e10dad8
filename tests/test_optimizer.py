"""AdamW against torch.optim.AdamW over many steps and against the handout's formula."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from .adapters import get_adamw_cls
from .expect import raises_an_error
from .hints import matching_hints
from .localize import graded_case_located


def _problem(seed: int = 0) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    inputs = torch.randn(32, 6, generator=generator)
    targets = torch.randn(32, 3, generator=generator)
    return model, inputs, targets


def _train(optimizer_cls, steps: int, **hyperparameters) -> list[torch.Tensor]:
    model, inputs, targets = _problem()
    optimizer = optimizer_cls(model.parameters(), **hyperparameters)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


HYPERPARAMETERS = {"lr": 3e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}


def test_adamw_is_a_torch_optimizer():
    assert issubclass(get_adamw_cls(), torch.optim.Optimizer)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
@graded_case_located("adamw")
def test_adamw_tracks_torch_adamw_over_many_steps(weight_decay):
    # torch decays before the update and scales eps by the bias correction; the handout decays
    # after it and does not. Per step those differ by O(lr² λ) and O(eps), far below the
    # tolerance, while a wrong bias correction, beta or decay is far above it.
    hyperparameters = {**HYPERPARAMETERS, "weight_decay": weight_decay}
    ours = _train(get_adamw_cls(), 200, **hyperparameters)
    theirs = _train(torch.optim.AdamW, 200, **hyperparameters)
    for a, b in zip(ours, theirs, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=5e-4)
    untrained = [p.detach() for p in _problem()[0].parameters()]
    assert max((a - u).abs().max().item() for a, u in zip(ours, untrained, strict=False)) > 0.1


LR, BETAS, EPS, DECAY = 0.05, (0.8, 0.9), 1e-6, 0.2


def _gradients(t: int) -> list[float]:
    return [math.sin(t + i) * (i + 1) for i in range(3)]


def handout_adamw(
    steps: int,
    *,
    decay_first: bool = False,
    torch_eps: bool = False,
    bias_correction: bool = True,
    coupled_l2: bool = False,
    eps_inside_sqrt: bool = False,
    decay_with_step_size: bool = False,
) -> list[list[float]]:
    """A plain-Python transcription of the handout's algorithm (float64); returns the parameters
    after each step.

    Two reasonable readings are accepted: ``decay_first`` applies the decoupled decay
    ``theta -= lr * lambda * theta`` before the Adam update (torch.optim.AdamW's order) rather
    than after it (the handout's), and ``torch_eps`` adds eps to the bias-corrected root
    ``sqrt(v / (1 - beta2^t))`` as torch does. The other flags reproduce common mistakes."""
    (beta1, beta2), theta, m, v, history = BETAS, [1.0, -2.0, 0.5], [0.0] * 3, [0.0] * 3, []
    for t in range(1, steps + 1):
        grads = _gradients(t)
        if coupled_l2:
            grads = [g + DECAY * p for g, p in zip(grads, theta, strict=False)]
        alpha = LR * math.sqrt(1 - beta2**t) / (1 - beta1**t) if bias_correction else LR
        eps = EPS * math.sqrt(1 - beta2**t) if torch_eps else EPS
        for i, g in enumerate(grads):
            decay = 0.0 if coupled_l2 else (alpha if decay_with_step_size else LR) * DECAY
            if decay_first:
                theta[i] -= decay * theta[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            denominator = math.sqrt(v[i] + eps) if eps_inside_sqrt else math.sqrt(v[i]) + eps
            theta[i] -= alpha * m[i] / denominator
            if not decay_first:
                theta[i] -= decay * theta[i]
        history.append(list(theta))
    return history


ACCEPTED = {
    f"decay {'before' if first else 'after'} the update, {'torch' if torch_eps else 'handout'} eps": handout_adamw(
        20, decay_first=first, torch_eps=torch_eps
    )
    for first in (False, True)
    for torch_eps in (False, True)
}


def test_adamw_matches_the_handout_formula_exactly():
    parameter = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64))
    optimizer = get_adamw_cls()([parameter], lr=LR, betas=BETAS, eps=EPS, weight_decay=DECAY)
    mistakes = {
        "no bias correction: the step size is lr * sqrt(1 - beta2^t) / (1 - beta1^t)": handout_adamw(
            20, bias_correction=False
        ),
        "weight decay is added to the gradient (L2, coupled); AdamW decays the parameters directly: theta -= lr * lambda * theta": handout_adamw(
            20, coupled_l2=True
        ),
        "eps goes outside the square root: m / (sqrt(v) + eps)": handout_adamw(
            20, eps_inside_sqrt=True
        ),
        "the decay uses the bias-corrected step size; it is theta -= lr * lambda * theta with the plain lr": handout_adamw(
            20, decay_with_step_size=True
        ),
    }
    # Every accepted reading is computed independently; at each step the parameters must
    # match one of those that the previous steps matched.
    candidates = dict(ACCEPTED)
    for t in range(20):
        parameter.grad = torch.tensor(_gradients(t + 1), dtype=torch.float64)
        optimizer.step()
        actual = parameter.detach().tolist()
        candidates = {
            name: history
            for name, history in candidates.items()
            if actual == pytest.approx(history[t], rel=1e-10, abs=1e-12)
        }
        if not candidates:
            expected = ACCEPTED["decay after the update, handout eps"][t]
            same = lambda a, b, t=t: a == pytest.approx(b[t], rel=1e-9, abs=1e-9)  # noqa: E731
            raise AssertionError(
                f"step {t + 1}: parameters {actual}, expected {expected}{matching_hints(actual, mistakes, same)}"
            )


@graded_case_located("adamw")
def test_adamw_param_groups_and_state_dict_round_trip():
    adamw = get_adamw_cls()
    model, inputs, targets = _problem()
    weights = [p for p in model.parameters() if p.ndim == 2]
    biases = [p for p in model.parameters() if p.ndim == 1]
    groups = [{"params": weights}, {"params": biases, "weight_decay": 0.0, "lr": 1e-3}]
    optimizer = adamw(groups, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    assert optimizer.param_groups[1]["weight_decay"] == 0.0
    assert optimizer.param_groups[0]["weight_decay"] == 0.1

    def step(opt, mdl):
        opt.zero_grad()
        torch.nn.functional.mse_loss(mdl(inputs), targets).backward()
        opt.step()

    for _ in range(5):
        step(optimizer, model)
    saved_state = copy.deepcopy(optimizer.state_dict())  # state_dict shares the tensors
    saved_model = {k: v.clone() for k, v in model.state_dict().items()}
    step(optimizer, model)
    continued = [p.detach().clone() for p in model.parameters()]

    model.load_state_dict(saved_model)
    fresh_weights = [p for p in model.parameters() if p.ndim == 2]
    fresh_biases = [p for p in model.parameters() if p.ndim == 1]
    restored = adamw(
        [{"params": fresh_weights}, {"params": fresh_biases}],
        lr=0.5,
        betas=(0.9, 0.95),
        eps=1e-8,
        weight_decay=0.1,
    )
    restored.load_state_dict(saved_state)
    assert restored.param_groups[1]["lr"] == 1e-3
    step(restored, model)
    for a, b in zip(model.parameters(), continued, strict=False):
        assert torch.equal(a.detach(), b)


def test_adamw_skips_parameters_without_gradients():
    frozen = torch.nn.Parameter(torch.ones(3))
    live = torch.nn.Parameter(torch.ones(3))
    optimizer = get_adamw_cls()(
        [frozen, live], lr=0.1, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0
    )
    live.grad = torch.ones(3)
    optimizer.step()
    assert torch.equal(frozen.detach(), torch.ones(3))
    assert not torch.equal(live.detach(), torch.ones(3))


@pytest.mark.robustness
def test_adamw_rejects_bad_hyperparameters():
    parameter = torch.nn.Parameter(torch.zeros(1))
    with raises_an_error():
        get_adamw_cls()([parameter], lr=-1.0, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    with raises_an_error():
        get_adamw_cls()([parameter], lr=1e-3, betas=(0.9, 1.5), eps=1e-8, weight_decay=0.0)
