"""Loss and gradient clipping."""

from __future__ import annotations

import torch


def cross_entropy(logits, targets):
    logits = logits - logits.max(dim=-1, keepdim=True).values
    log_z = torch.log(torch.exp(logits).sum(dim=-1))
    correct = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_z - correct).mean()


def gradient_clipping(parameters, max_l2_norm, eps=1e-6):
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))
    if total > max_l2_norm:
        for g in grads:
            g.mul_(max_l2_norm / (total + eps))
