"""Correct optimizer, clipping and schedule implementations in other arithmetic orders.

AdamW as the paper writes it (bias-corrected moments ``m_hat``, ``v_hat``) and as the handout
folds the corrections into the step size, with in-place ``addcdiv_``; the global gradient norm
by one sum of squares, by a norm of per-parameter norms, by ``clip_grad_norm_`` and in float64;
the cosine schedule by ``math`` and by a float32 ``torch.cos``. Written from the handout, not
from ``cs336_basics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from types import ModuleType

import torch


class AdamWForm(torch.optim.Optimizer):
    """The loop over the parameters that have a gradient; a subclass writes one update."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.update(p, self.state[p], group)

    def update(self, p: torch.Tensor, state: dict, group: dict) -> None:
        raise NotImplementedError


class PaperAdamW(AdamWForm):
    """Kingma and Ba's form: ``theta -= lr * m_hat / (sqrt(v_hat) + eps)``, then the decay.

    Its ``eps`` sits beside ``sqrt(v_hat)`` rather than ``sqrt(v)``: the handout's fold of the
    corrections into the step size moves it by a factor ``sqrt(1 - beta2^t)``, a difference of
    order ``eps`` that correct code of either form shows."""

    def update(self, p, state, group):
        beta1, beta2 = group["betas"]
        if not state:
            state.update(t=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
        state["t"] += 1
        t, g = state["t"], p.grad
        state["m"] = beta1 * state["m"] + (1 - beta1) * g
        state["v"] = beta2 * state["v"] + (1 - beta2) * g**2
        m_hat = state["m"] / (1 - beta1**t)
        v_hat = state["v"] / (1 - beta2**t)
        p -= group["lr"] * m_hat / (torch.sqrt(v_hat) + group["eps"])
        p -= group["lr"] * group["weight_decay"] * p


class InPlaceAdamW(AdamWForm):
    """The handout's folded step size, the decay first (as ``torch.optim.AdamW``), every
    update in place."""

    def update(self, p, state, group):
        beta1, beta2 = group["betas"]
        if not state:
            state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
        state["step"] += 1
        step = state["step"]
        p.mul_(1 - group["lr"] * group["weight_decay"])
        state["exp_avg"].lerp_(p.grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        size = group["lr"] * math.sqrt(1 - beta2**step) / (1 - beta1**step)
        denominator = state["exp_avg_sq"].sqrt().add_(group["eps"])
        p.addcdiv_(state["exp_avg"], denominator, value=-size)


def with_grads(parameters: Iterable[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    return [p for p in parameters if p.grad is not None]


def clip_by_sum_of_squares(parameters, max_l2_norm: float) -> None:
    present = with_grads(parameters)
    norm = math.sqrt(sum(float((p.grad**2).sum()) for p in present))
    if norm > max_l2_norm:
        for p in present:
            p.grad *= max_l2_norm / (norm + 1e-6)


def clip_by_norm_of_norms(parameters, max_l2_norm: float) -> None:
    present = with_grads(parameters)
    if not present:
        return
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in present]))
    factor = torch.clamp(max_l2_norm / (norm + 1e-6), max=1.0)
    for p in present:
        p.grad.mul_(factor)


def clip_with_torch(parameters, max_l2_norm: float) -> None:
    torch.nn.utils.clip_grad_norm_(list(parameters), max_l2_norm)


def clip_in_float64(parameters, max_l2_norm: float) -> None:
    present = with_grads(parameters)
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in present))
    if norm > max_l2_norm:
        for p in present:
            p.grad.copy_(p.grad.double() * (max_l2_norm / (norm + 1e-6)))


def cosine_math(it, high, low, warmup, cycle) -> float:
    if it < warmup:
        return it / warmup * high
    if it > cycle:
        return low
    return low + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) * (high - low)


def cosine_float32(it, high, low, warmup, cycle) -> float:
    """The cosine through a float32 tensor, as ``torch.cos(torch.tensor(...))`` gives."""
    if it < warmup:
        return it * high / warmup
    if it > cycle:
        return low
    progress = torch.tensor((it - warmup) / (cycle - warmup))
    return float(high - (high - low) * (1 - torch.cos(math.pi * progress)) / 2)


def training_adapters(name: str, adamw: type, clip: Callable, cosine: Callable) -> ModuleType:
    module = ModuleType(f"fairness_{name}")
    module.get_adamw_cls = lambda: adamw
    module.run_gradient_clipping = clip
    module.run_get_lr_cosine_schedule = cosine
    return module


TRAINING_STYLES: dict[str, Callable[[], ModuleType]] = {
    "paper_adamw_sum_of_squares": lambda: training_adapters(
        "paper", PaperAdamW, clip_by_sum_of_squares, cosine_math
    ),
    "in_place_adamw_norm_of_norms": lambda: training_adapters(
        "in_place", InPlaceAdamW, clip_by_norm_of_norms, cosine_float32
    ),
    "torch_clipping": lambda: training_adapters("torch", PaperAdamW, clip_with_torch, cosine_math),
    "float64_clipping": lambda: training_adapters(
        "float64", InPlaceAdamW, clip_in_float64, cosine_math
    ),
}
