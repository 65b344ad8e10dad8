"""Mixture-of-experts feed-forward layer with a top-k softmax router."""

from __future__ import annotations

import math

import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.feedforward import SwiGLU
from cs336_basics.functional import softmax
from cs336_basics.linear import Linear


class MixtureOfExperts(nn.Module):
    """``num_experts`` SwiGLU experts; each token is processed by the ``top_k`` its router picks.

    The router is a bias-free ``d_model -> num_experts`` map followed by a softmax. A token's
    output is the sum of its chosen experts' outputs weighted by their router probabilities,
    renormalised to sum to one over the chosen experts when ``normalize_topk`` (Mixtral; Qwen3-MoE
    makes it an option; Switch with ``top_k = 1`` keeps the raw probability), then multiplied by
    ``routed_scaling``. ``num_shared_experts`` adds one always-on SwiGLU of width
    ``num_shared_experts * d_ff`` (DeepSeek).

    ``expert_groups = (groups, topk_groups)`` limits each token to the experts of its best
    ``topk_groups`` of ``groups`` equal consecutive groups (DeepSeek's group-limited routing).

    ``scoring="sigmoid"`` is DeepSeek-V3's routing ("noaux_tc"): scores are per-expert sigmoids
    (no softmax), and a per-expert ``score_correction_bias`` buffer (persistent, zero at init,
    loaded from checkpoints; no gradient reaches it, and DeepSeek's balancing update of it
    during training is not implemented) is added to them for *choosing* experts only: groups
    are ranked by the sum of their two best biased scores, experts by their biased score,
    while the weights are the unbiased scores of the chosen experts.

    ``capacity_factor`` caps each expert at ``ceil(capacity_factor * tokens * top_k / num_experts)``
    assignments per forward call. Assignments are served first choices first (GShard), then in
    token order; the rest are dropped, and a token whose every choice was dropped gets a zero
    output, so in a residual block it passes through unchanged. Capacity is per call: with a KV
    cache (a few new tokens per call) fewer tokens compete, so fewer are dropped.

    After each forward, ``aux_loss()`` returns that call's load-balancing loss of Switch Transformer,
    ``num_experts * sum_i f_i * P_i``, where ``f_i`` is the fraction of tokens that chose expert
    ``i`` among their top k (before dropping) and ``P_i`` the mean router probability of ``i``.
    It is ``top_k`` when routing is perfectly balanced and grows as it concentrates. With sigmoid
    scoring ``P_i`` is taken from the scores normalised to sum to one per token (DeepSeek-V3).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        num_experts: int,
        top_k: int,
        normalize_topk: bool = True,
        capacity_factor: float | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        num_shared_experts: int = 0,
        routed_scaling: float = 1.0,
        expert_groups: tuple[int, int] | None = None,
        scoring: str = "softmax",
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k={top_k} must be between 1 and num_experts={num_experts}")
        if scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"scoring must be 'softmax' or 'sigmoid'; got {scoring!r}")
        if expert_groups is not None:
            check_expert_groups(expert_groups, num_experts, top_k, scoring)
        self.num_experts = num_experts
        self.top_k = top_k
        self.normalize_topk = normalize_topk
        self.capacity_factor = capacity_factor
        self.router = Linear(d_model, num_experts, device=device, dtype=dtype)
        self.experts = nn.ModuleList(
            SwiGLU(d_model, d_ff, device=device, dtype=dtype) for _ in range(num_experts)
        )
        self.routing: tuple[Tensor, Tensor] | None = None  # the last call's, for aux_loss()
        self.routed_scaling = routed_scaling
        self.expert_groups = expert_groups
        if num_shared_experts:
            self.shared_experts = SwiGLU(
                d_model, d_ff * num_shared_experts, device=device, dtype=dtype
            )
        self.num_shared_experts = num_shared_experts
        self.scoring = scoring
        if scoring == "sigmoid":
            self.register_buffer(
                "score_correction_bias",
                torch.zeros(num_experts, device=device, dtype=torch.float32),
            )

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        tokens = rearrange(x, "... d_model -> (...) d_model")
        logits = self.router(tokens).float()
        if self.scoring == "sigmoid":
            scores = logits.sigmoid()
            probabilities = scores / scores.sum(dim=-1, keepdim=True)
        else:
            scores = probabilities = softmax(logits, dim=-1)
        weights, experts = self.choose(scores)
        if self.capacity_factor is not None:
            weights = weights * self.within_capacity(experts)
        self.routing = (probabilities, experts)

        output = torch.zeros_like(tokens)
        for expert_id, expert in enumerate(self.experts):
            token_ids, slot = torch.where(experts == expert_id)
            if token_ids.numel() > 0:
                routed = expert(tokens[token_ids]) * weights[token_ids, slot, None].to(tokens.dtype)
                output.index_add_(0, token_ids, routed)
        if self.num_shared_experts:
            output = output + self.shared_experts(tokens)
        return output.reshape(x.shape)

    def choose(
        self, scores: Float[Tensor, "tokens experts"]
    ) -> tuple[Float[Tensor, "tokens top_k"], Int[Tensor, "tokens top_k"]]:
        """Each token's ``top_k`` experts and their weights (renormalised when
        ``normalize_topk``, times ``routed_scaling``)."""
        biased = scores
        if self.scoring == "sigmoid":
            biased = scores + self.score_correction_bias
        if self.expert_groups is not None:
            biased = biased.masked_fill(~self.in_best_groups(biased), float("-inf"))
        experts = biased.topk(self.top_k, dim=-1).indices
        weights = scores.gather(-1, experts)
        if self.normalize_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights * self.routed_scaling, experts

    def in_best_groups(
        self, scores: Float[Tensor, "tokens experts"]
    ) -> Bool[Tensor, "tokens experts"]:
        """True for the experts in each token's ``topk_groups`` best groups: ranked by their best
        score (DeepSeek-V2) or, with sigmoid scoring, the sum of their two best (DeepSeek-V3)."""
        num_groups, topk_groups = self.expert_groups
        grouped = rearrange(scores, "tokens (groups e) -> tokens groups e", groups=num_groups)
        if self.scoring == "sigmoid":
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
        else:
            group_scores = grouped.amax(dim=-1)
        best = group_scores.topk(topk_groups, dim=-1).indices
        chosen = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, best, True)
        return rearrange(
            chosen[..., None].expand_as(grouped), "tokens groups e -> tokens (groups e)"
        )

    def within_capacity(
        self, experts: Int[Tensor, "tokens top_k"]
    ) -> Float[Tensor, "tokens top_k"]:
        """1.0 for each assignment its expert still has room for, 0.0 for dropped ones."""
        num_tokens = experts.shape[0]
        capacity = math.ceil(self.capacity_factor * num_tokens * self.top_k / self.num_experts)
        chosen = torch.nn.functional.one_hot(experts, self.num_experts)  # (tokens, top_k, experts)
        queue = rearrange(chosen, "tokens top_k experts -> (top_k tokens) experts")
        place_in_queue = (queue.cumsum(dim=0) * queue).sum(dim=-1)  # 1-based, first choices first
        fits = rearrange(
            place_in_queue <= capacity, "(top_k tokens) -> tokens top_k", tokens=num_tokens
        )
        return fits.float()

    def aux_loss(self) -> Float[Tensor, ""]:
        """The load-balancing loss of the last forward call, connected to its graph."""
        if self.routing is None:
            raise RuntimeError("aux_loss() needs a forward call first")
        probabilities, experts = self.routing
        chosen = torch.nn.functional.one_hot(experts, self.num_experts).sum(dim=1).float()
        token_fraction = chosen.mean(dim=0)
        mean_probability = probabilities.mean(dim=0)
        return self.num_experts * (token_fraction * mean_probability).sum()


def check_expert_groups(
    expert_groups: tuple[int, int] | list[int], num_experts: int, top_k: int, scoring: str
) -> None:
    """Raise ``ValueError`` unless ``(groups, topk_groups)`` splits the experts evenly and the
    chosen groups hold at least ``top_k`` experts (two per group for sigmoid's group score)."""
    groups, topk_groups = expert_groups
    if groups < 1 or num_experts % groups or not 0 < topk_groups <= groups:
        raise ValueError(
            f"expert_groups={list(expert_groups)} must be [groups dividing "
            f"num_experts={num_experts}, 0 < topk_groups <= groups]"
        )
    per_group = num_experts // groups
    if topk_groups * per_group < top_k or (scoring == "sigmoid" and per_group < 2):
        raise ValueError(
            f"expert_groups={list(expert_groups)} leaves {topk_groups * per_group} experts "
            f"({per_group} per group) to choose from; needed: at least top_k={top_k}, and 2 "
            "per group for sigmoid scoring"
        )
