"""Mixture-of-experts feed-forward layers from parts: a router, the experts and shared experts.

``Router`` scores the experts and picks each token's ``top_k`` (softmax or DeepSeek-V3's
sigmoid scoring, optional group-limited routing); ``MixtureOfExperts`` sends each token through
its chosen experts (any modules) and the always-on shared experts, weighted as the router says,
and keeps the load-balancing loss; ``mixture_of_experts`` assembles SwiGLU experts from sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from einops import rearrange
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from cs336_basics.feedforward import SwiGLU
from cs336_basics.functional import softmax
from cs336_basics.linear import Linear

Routing = tuple[Float[Tensor, "tokens top_k"], Int[Tensor, "tokens top_k"], Tensor]


class Router(Linear):
    """A bias-free ``d_model -> num_experts`` map whose scores pick each token's ``top_k`` experts.

    Scores are a softmax over the experts or, with ``scoring="sigmoid"`` (DeepSeek-V3's
    "noaux_tc"), per-expert sigmoids. A token's weights are the scores of its chosen experts,
    renormalised to sum to one when ``normalize_topk`` (Mixtral; Qwen3-MoE makes it an option;
    Switch with ``top_k = 1`` keeps the raw probability), times ``routed_scaling``.

    ``expert_groups = (groups, topk_groups)`` limits each token to the experts of its best
    ``topk_groups`` of ``groups`` equal consecutive groups (DeepSeek's group-limited routing),
    groups ranked by their best score or, with sigmoid scoring, the sum of their two best.

    A ``selection_bias`` (DeepSeek-V3's ``score_correction_bias``) is added to the scores for
    *choosing* experts (and groups) only; the weights are the unbiased scores.
    """

    def __init__(
        self,
        d_model: int,
        num_experts: int,
        top_k: int,
        *,
        normalize_topk: bool = True,
        routed_scaling: float = 1.0,
        expert_groups: tuple[int, int] | None = None,
        scoring: str = "softmax",
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k={top_k} must be between 1 and num_experts={num_experts}")
        if scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"scoring must be 'softmax' or 'sigmoid'; got {scoring!r}")
        if expert_groups is not None:
            check_expert_groups(expert_groups, num_experts, top_k, scoring)
        super().__init__(d_model, num_experts, device=device, dtype=dtype)
        self.num_experts = num_experts
        self.top_k = top_k
        self.normalize_topk = normalize_topk
        self.routed_scaling = routed_scaling
        self.expert_groups = expert_groups
        self.scoring = scoring

    def route(
        self,
        tokens: Float[Tensor, "tokens d_model"],
        selection_bias: Float[Tensor, " experts"] | None = None,
    ) -> Routing:
        """Each token's expert weights and expert ids (``(tokens, top_k)`` each), and the
        router probabilities ``(tokens, experts)`` the load-balancing loss reads (sigmoid
        scores normalised to sum to one per token, as DeepSeek-V3's)."""
        logits = self(tokens).float()
        if self.scoring == "sigmoid":
            scores = logits.sigmoid()
            probabilities = scores / scores.sum(dim=-1, keepdim=True)
        else:
            scores = probabilities = softmax(logits, dim=-1)
        biased = scores if selection_bias is None else scores + selection_bias
        if self.expert_groups is not None:
            biased = biased.masked_fill(~self.in_best_groups(biased), float("-inf"))
        experts = biased.topk(self.top_k, dim=-1).indices
        weights = scores.gather(-1, experts)
        if self.normalize_topk:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights * self.routed_scaling, experts, probabilities

    def in_best_groups(
        self, scores: Float[Tensor, "tokens experts"]
    ) -> Bool[Tensor, "tokens experts"]:
        """True for the experts in each token's ``topk_groups`` best groups."""
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


class MixtureOfExperts(nn.Module):
    """A token's output is the sum of its chosen ``experts``' outputs, weighted as the ``router``
    says, plus the ``shared_experts``' output (always on; DeepSeek), when given.

    With a sigmoid router the layer keeps DeepSeek-V3's per-expert ``score_correction_bias``
    buffer (persistent, zero at init, loaded from checkpoints; no gradient reaches it, and
    DeepSeek's balancing update of it during training is not implemented), which the router
    adds to its scores to choose experts.

    ``capacity_factor`` caps each expert at ``ceil(capacity_factor * tokens * top_k / num_experts)``
    assignments per forward call. Assignments are served first choices first (GShard), then in
    token order; the rest are dropped, and a token whose every choice was dropped gets a zero
    output, so in a residual block it passes through unchanged. Capacity is per call: with a KV
    cache (a few new tokens per call) fewer tokens compete, so fewer are dropped.

    After each forward, ``aux_loss()`` returns that call's load-balancing loss of Switch
    Transformer, ``num_experts * sum_i f_i * P_i``, where ``f_i`` is the fraction of tokens that
    chose expert ``i`` among their top k (before dropping) and ``P_i`` the mean router
    probability of ``i``. It is ``top_k`` when routing is perfectly balanced and grows as it
    concentrates.
    """

    def __init__(
        self,
        router: Router,
        experts: Iterable[nn.Module],
        shared_experts: nn.Module | None = None,
        capacity_factor: float | None = None,
    ) -> None:
        super().__init__()
        self.router = router
        self.experts = nn.ModuleList(experts)
        if len(self.experts) != router.num_experts:
            raise ValueError(
                f"the router scores {router.num_experts} experts; got {len(self.experts)}"
            )
        self.shared_experts = shared_experts
        self.capacity_factor = capacity_factor
        self.routing: tuple[Tensor, Tensor] | None = None  # the last call's, for aux_loss()
        if router.scoring == "sigmoid":
            # Here rather than in the router: the state-dict name checkpoints already use.
            weight = router.weight
            bias = torch.zeros(router.num_experts, device=weight.device, dtype=torch.float32)
            self.register_buffer("score_correction_bias", bias)
        else:
            self.score_correction_bias = None

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        tokens = rearrange(x, "... d_model -> (...) d_model")
        weights, experts, probabilities = self.router.route(tokens, self.score_correction_bias)
        if self.capacity_factor is not None:
            weights = weights * self.within_capacity(experts)
        self.routing = (probabilities, experts)

        output = torch.zeros_like(tokens)
        for expert_id, expert in enumerate(self.experts):
            token_ids, slot = torch.where(experts == expert_id)
            if token_ids.numel() > 0:
                routed = expert(tokens[token_ids]) * weights[token_ids, slot, None].to(tokens.dtype)
                output.index_add_(0, token_ids, routed)
        if self.shared_experts is not None:
            output = output + self.shared_experts(tokens)
        return output.reshape(x.shape)

    def within_capacity(
        self, experts: Int[Tensor, "tokens top_k"]
    ) -> Float[Tensor, "tokens top_k"]:
        """1.0 for each assignment its expert still has room for, 0.0 for dropped ones."""
        (num_tokens, top_k), num_experts = experts.shape, len(self.experts)
        capacity = math.ceil(self.capacity_factor * num_tokens * top_k / num_experts)
        chosen = torch.nn.functional.one_hot(experts, num_experts)  # (tokens, top_k, experts)
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
        num_experts = len(self.experts)
        chosen = torch.nn.functional.one_hot(experts, num_experts).sum(dim=1).float()
        token_fraction = chosen.mean(dim=0)
        mean_probability = probabilities.mean(dim=0)
        return num_experts * (token_fraction * mean_probability).sum()


def mixture_of_experts(
    d_model: int,
    d_ff: int,
    num_experts: int,
    top_k: int,
    normalize_topk: bool = True,
    capacity_factor: float | None = None,
    *,
    num_shared_experts: int = 0,
    routed_scaling: float = 1.0,
    expert_groups: tuple[int, int] | None = None,
    scoring: str = "softmax",
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> MixtureOfExperts:
    """``num_experts`` SwiGLU experts of width ``d_ff`` behind a ``Router``, and, with
    ``num_shared_experts``, one always-on SwiGLU of width ``num_shared_experts * d_ff``
    (DeepSeek's shared experts, fused)."""
    router = Router(
        d_model,
        num_experts,
        top_k,
        normalize_topk=normalize_topk,
        routed_scaling=routed_scaling,
        expert_groups=expert_groups,
        scoring=scoring,
        device=device,
        dtype=dtype,
    )
    experts = [SwiGLU(d_model, d_ff, device=device, dtype=dtype) for _ in range(num_experts)]
    shared = None
    if num_shared_experts:
        shared = SwiGLU(d_model, d_ff * num_shared_experts, device=device, dtype=dtype)
    return MixtureOfExperts(router, experts, shared, capacity_factor)


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
