"""Scaled dot-product attention, read off the weights themselves (the identity as values): do
rows sum to 1, are masked positions exactly 0, which scale do the scores carry; and where it
raised."""

from __future__ import annotations

import math
from types import ModuleType

import torch

from tests.cases.core import Bundle
from tests.localize.stages import raises
from tests.measure import largest


def attention_weights(adapters: ModuleType, q: torch.Tensor, k: torch.Tensor, mask) -> torch.Tensor:
    """The student's attention weights: the output for the identity as values (padded with
    zero columns, so the values' width differs from d_k and from the number of keys)."""
    keys = k.shape[-2]
    values = torch.zeros(*k.shape[:-1], keys + 8, dtype=q.dtype)
    values[..., :keys] = torch.eye(keys, dtype=q.dtype)
    return adapters.run_scaled_dot_product_attention(q, k, values, mask)[..., :keys].double()


def named_scale(scale: float, d_k: int, d_v: int, keys: int = 0) -> str:
    """What a measured scale of the scores is, among the usual slips (``keys``: the number of
    keys, when it differs from d_k)."""
    of_keys = [(f"1/sqrt({keys}), the number of keys", keys**-0.5)] if keys else []
    for label, value in (
        ("1/sqrt(d_k)", d_k**-0.5),
        ("1/d_k", 1 / d_k),
        ("1 (no scaling)", 1.0),
        ("1/sqrt(d_v), the values' width", d_v**-0.5),
        ("sqrt(d_k)", d_k**0.5),
        *of_keys,
    ):
        if math.isclose(scale, value, rel_tol=2e-2):
            return label
    return ""


def weights_hints(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, mask) -> list[str]:
    """Rows sum to 1, masked positions are 0, and scores carry 1/sqrt(d_k)."""
    allowed = (
        torch.ones(weights.shape, dtype=torch.bool) if mask is None else mask.expand(weights.shape)
    )
    sums, across = weights.sum(-1), weights.sum(-2)
    if not torch.isfinite(weights).all():
        return []
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        if torch.allclose(across, torch.ones_like(across), atol=1e-4):
            return [
                "your attention weights sum to 1 over the queries, not over the keys: take the softmax over the last dimension"
            ]
        return [
            f"the rows of your attention weights sum to between {float(sums.min()):.4g} and "
            f"{float(sums.max()):.4g}, not 1 (read off with the identity as values): normalize "
            "after masking, e.g. fill masked scores with -inf before the softmax rather than "
            "zeroing weights after it"
        ]
    leaked = largest(weights[~allowed])
    if leaked > 1e-6:
        inverted = largest(weights[allowed]) < 1e-6
        return [
            "your attention gives weight only to the masked positions: True in the mask means "
            '"may attend"'
            if inverted
            else f"masked positions get attention weight up to {leaked:.3g}, not exactly 0: fill "
            "masked scores with -inf before the softmax (a score of 0 is an ordinary score)"
        ]
    scores = q.double() @ k.double().transpose(-1, -2)
    logs = weights.clamp_min(1e-300).log()
    usable = allowed & (weights > 1e-12)
    # Within a row, log w_j - mean = c (s_j - mean): fit c over every usable entry.
    centred_s = torch.where(usable, scores, 0) - (
        torch.where(usable, scores, 0).sum(-1, keepdim=True)
        / usable.sum(-1, keepdim=True).clamp_min(1)
    )
    centred_l = torch.where(usable, logs, 0) - (
        torch.where(usable, logs, 0).sum(-1, keepdim=True)
        / usable.sum(-1, keepdim=True).clamp_min(1)
    )
    centred_s, centred_l = centred_s[usable], centred_l[usable]
    denominator = float((centred_s * centred_s).sum())
    if denominator == 0:
        return []
    scale = float((centred_s * centred_l).sum()) / denominator
    residual = largest(centred_l - scale * centred_s)
    d_k = q.shape[-1]
    if residual > 1e-3 * max(1.0, float(centred_l.abs().max())) or math.isclose(
        scale, d_k**-0.5, rel_tol=2e-3
    ):
        return []
    keys = k.shape[-2]
    name = named_scale(scale, d_k, keys + 8, keys if abs(keys - d_k) > 1 else 0)
    return [
        f"your attention weights are the softmax of the scores q.k times {scale:.4g}"
        + (f" = {name}" if name else "")
        + f", not times 1/sqrt(d_k) = {d_k**-0.5:.4g}"
    ]


def localize_sdpa(adapters: ModuleType, inputs: Bundle) -> list[str]:
    q, k = inputs["q"], inputs["k"]
    mask = inputs.get("mask")
    try:
        weights = attention_weights(adapters, q, k, mask)
    except Exception:  # noqa: BLE001  (nothing measured)
        return []
    hints = weights_hints(weights, q, k, mask)
    if hints or not torch.isfinite(weights).all():
        return hints
    off = weights_not_softmax(weights, q, k, mask)
    if off:
        return [off]
    return [
        "your attention weights are right (rows sum to 1, masked positions 0, scores scaled by "
        "1/sqrt(d_k)), so the weighted sum of the values differs: weights @ V"
    ]


def sdpa_raised(adapters: ModuleType, q, k, v, mask) -> list[str]:
    """Scaled dot-product attention raised: the simplest of these inputs it runs on says where
    the error lies: without the mask, as many keys as queries, every size equal."""
    attend = adapters.run_scaled_dot_product_attention
    if not raises(lambda: attend(q, k, v, mask), tries=1):
        return []
    square = min(q.shape[-2], k.shape[-2])
    size = min(square, q.shape[-1], v.shape[-1])
    probes = [
        (
            "without the mask",
            lambda: attend(q, k, v),
            "the masking step (the mask is (..., queries, keys), True where a query may attend)",
        ),
        (
            "without a mask, on as many keys as queries",
            lambda: attend(q[..., :square, :], k[..., :square, :], v[..., :square, :]),
            "an axis taken for another: the scores are (..., queries, keys), one per query and key",
        ),
        (
            "without a mask, with queries, keys, d_k and d_v all of one size",
            lambda: attend(q[..., :size, :size], k[..., :size, :size], v[..., :size, :size]),
            "which axes each product contracts: the scores contract d_k (Q K^T), the output the "
            "keys (weights @ V)",
        ),
        (
            "on one sequence alone, 2-D Q, K and V with no leading dims, without a mask",
            lambda: attend(*(t.reshape(-1, *t.shape[-2:])[0] for t in (q, k, v))),
            "the leading batch dims: every product must act on the last two axes only (.T "
            "reverses every axis of a batched tensor; K.transpose(-2, -1) swaps the last two)",
        ),
    ]
    given = f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}"
    for probe, run, where in probes[mask is None :]:
        if not raises(run, tries=1):
            return [f"your attention raised on {given}, but runs {probe}: look at {where}"]
    return []


def weights_not_softmax(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, mask) -> str:
    """``""`` when the attention weights are softmax(q.k / sqrt(d_k)) with masked scores at
    -inf; else how far off they are (for weights whose rows, mask and scale are not at fault)."""
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    off = largest(weights - torch.softmax(scores, -1).nan_to_num())
    if off <= 1e-4:
        return ""
    return (
        f"your attention weights (read off with the identity as values) sum to 1 in each row "
        f"and are 0 where masked, yet differ from softmax(q.k / sqrt(d_k)) by up to {off:.3g} "
        "and are not that softmax at any other scale: look at the scores, one q.k per query "
        "and key, over d_k"
    )
