"""AdamW: Adam with decoupled weight decay (Loshchilov & Hutter, 2019)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch


class AdamW(torch.optim.Optimizer):
    """The handout's AdamW, as a ``torch.optim.Optimizer``.

    For each parameter ``θ`` with gradient ``g``, at step ``t = 1, 2, ...``::

        m  <- β1 m + (1 - β1) g
        v  <- β2 v + (1 - β2) g²
        αt <- lr · sqrt(1 - β2^t) / (1 - β1^t)
        θ  <- θ - αt · m / (sqrt(v) + eps)
        θ  <- θ - lr · λ · θ                      (decoupled weight decay)

    Per-parameter state is ``step`` (an int), ``exp_avg`` (m) and ``exp_avg_sq`` (v), the
    names ``torch.optim.AdamW`` uses, so ``state_dict``/``load_state_dict`` and param groups
    work through the usual ``torch.optim`` machinery.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        if lr < 0:
            raise ValueError(f"invalid learning rate: {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid betas: {betas}; each must be in [0, 1)")
        if eps < 0:
            raise ValueError(f"invalid eps: {eps}")
        if weight_decay < 0:
            raise ValueError(f"invalid weight_decay: {weight_decay}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # BEGIN SOLUTION
        for group in self.param_groups:
            lr = group["lr"]
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                step_size = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
                p.addcdiv_(m, v.sqrt().add_(eps), value=-step_size)
                p.mul_(1 - lr * weight_decay)
        # END SOLUTION
        return loss
