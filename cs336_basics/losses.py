"""Cross-entropy loss on unnormalised logits."""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def cross_entropy(
    logits: Float[Tensor, "... vocab_size"], targets: Int[Tensor, ...]
) -> Float[Tensor, ""]:
    """Mean of ``-log softmax(logits)[target]`` over every leading position.

    Computed as ``logsumexp(logits) - logits[target]`` with the maximum subtracted first, so
    large logits never overflow ``exp`` and the softmax is never formed explicitly.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and targets {tuple(targets.shape)} disagree: "
            "targets must have the logits' shape without the vocabulary dim"
        )
    # BEGIN SOLUTION
    # The max is only a shift the log-sum-exp undoes, so no gradient needs to flow through it.
    shifted = logits - logits.amax(dim=-1, keepdim=True).detach()
    log_normaliser = torch.log(torch.exp(shifted).sum(dim=-1))
    target_logits = shifted.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_normaliser - target_logits).mean()
    # END SOLUTION
