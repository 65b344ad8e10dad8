"""Loss, gradient clipping, AdamW (the handout's order) and the learning-rate schedule."""

import math

import torch

from .failures import ConfigError, ShapeMismatch


def nll(logits, targets):
    """Mean of -log softmax(logits)[target] over every leading position."""
    if logits.shape[:-1] != targets.shape:
        raise ShapeMismatch(
            f"logits {tuple(logits.shape)} do not fit targets {tuple(targets.shape)}"
        )
    log_z = torch.logsumexp(logits, dim=-1)
    chosen = torch.take_along_dim(logits, targets[..., None], dim=-1)[..., 0]
    return (log_z - chosen).mean()


def clip_global_norm(parameters, limit, eps=1e-6):
    with_grad = [p for p in parameters if p.grad is not None]
    total = (
        torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in with_grad]))
        if with_grad
        else 0.0
    )
    if with_grad and total > limit:
        factor = limit / (total + eps)
        for p in with_grad:
            p.grad.mul_(factor)


class DecoupledAdam(torch.optim.Optimizer):
    """AdamW exactly as the handout writes it: the Adam step with the bias-corrected rate
    alpha_t, then theta -= lr * lambda * theta."""

    def __init__(self, params, lr, betas, eps, weight_decay):
        if not lr >= 0:
            raise ConfigError(f"bad learning rate {lr}")
        if not all(0 <= b < 1 for b in betas):
            raise ConfigError(f"bad betas {betas}")
        super().__init__(
            params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        )

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            (b1, b2), lr = group["betas"], group["lr"]
            for theta in group["params"]:
                g = theta.grad
                if g is None:
                    continue
                s = self.state[theta]
                t = s["t"] = s.get("t", 0) + 1
                m = s["m"] = b1 * s.get("m", torch.zeros_like(theta)) + (1 - b1) * g
                v = s["v"] = b2 * s.get("v", torch.zeros_like(theta)) + (1 - b2) * g * g
                alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                theta -= alpha * m / (v.sqrt() + group["eps"])
                theta -= lr * group["weight_decay"] * theta
        return loss


def warmup_cosine(step, peak, floor, warmup, total):
    if step < warmup:
        return peak * step / warmup
    if step > total:
        return floor
    return floor + (peak - floor) * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) / 2
