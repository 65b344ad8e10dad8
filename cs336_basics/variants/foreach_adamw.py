"""AdamW with multi-tensor (``torch._foreach_*``) updates: one kernel launch per operation for
a whole parameter group instead of one per parameter.

The algorithm, hyperparameters and state layout (``step`` int, ``exp_avg``, ``exp_avg_sq`` per
parameter) are those of the readable ``cs336_basics.adamw.AdamW``, so the two load each other's
state dicts and take the same steps; this one only batches the arithmetic. The trainer picks it
with ``TrainConfig.optimizer = "adamw_foreach"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from cs336_basics.adamw import AdamW


class ForeachAdamW(AdamW):
    """``AdamW`` whose ``step`` updates every parameter of a group with ``torch._foreach_*``."""

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._update_group(group, params)
        return loss

    def _update_group(self, group: dict, params: list[torch.nn.Parameter]) -> None:
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        grads = [p.grad for p in params]
        if any(g.is_sparse for g in grads):
            raise RuntimeError("AdamW does not support sparse gradients")
        step_sizes = []
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            t = state["step"]
            # Parameters can differ in step count (one that had no gradient for a while).
            step_sizes.append(-lr * math.sqrt(1 - beta2**t) / (1 - beta1**t))
        exp_avgs = [self.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_mul_(exp_avgs, beta1)
        torch._foreach_add_(exp_avgs, grads, alpha=1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_add_(denominators, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denominators, step_sizes)
        torch._foreach_mul_(params, 1 - lr * weight_decay)
