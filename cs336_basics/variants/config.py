"""``VariantConfig``: a ``ModelConfig`` plus the switches of the architecture variants.

Validation happens here, once, for every variant field (``ModelConfig`` checks the shared ones);
``build_model`` then trusts the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cs336_basics.config import ModelConfig, check_positive

NormPlacement = Literal["pre", "post", "none"]
NormKind = Literal["rmsnorm", "layernorm"]
PositionEncoding = Literal["rope", "none", "learned", "sinusoidal"]
FeedForwardKind = Literal["swiglu", "silu", "gelu", "gelu_tanh", "relu", "moe"]
AttentionKind = Literal["mha", "mla"]
RouterScoring = Literal["softmax", "sigmoid"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "norm_placement": ("pre", "post", "none"),
    "norm": ("rmsnorm", "layernorm"),
    "position_encoding": ("rope", "none", "learned", "sinusoidal"),
    "ffn": ("swiglu", "silu", "gelu", "gelu_tanh", "relu", "moe"),
    "attention": ("mha", "mla"),
    "router_scoring": ("softmax", "sigmoid"),
}
OPTIONAL_FIELDS = (
    "head_dim",
    "rope_scaling",
    "qkv_bias",
    "dense_layers",
    "dense_d_ff",
    "num_shared_experts",
    "routed_scaling",
    "expert_groups",
    "router_scoring",
    "index_topk",
    "index_heads",
    "index_head_dim",
)
_FLAGS = ("qk_norm", "bias", "qkv_bias", "tie_embeddings", "normalize_topk", "fused_attention")


@dataclass(frozen=True)
class VariantConfig(ModelConfig):
    """The handout's model with modern (and older) LLM variants; the defaults are the handout's.

    - ``norm_placement``: ``"pre"`` (``x + f(norm(x))``), ``"post"`` (``norm(x + f(x))``, the
      original Transformer) or ``"none"`` (no norm anywhere). ``norm``: ``"rmsnorm"`` or
      ``"layernorm"`` (mean-centred, with a bias; GPT-2).
    - ``position_encoding``: ``"rope"``, ``"none"`` (NoPE: the causal mask alone tells the model
      about order), ``"learned"`` (a trained table of ``context_length`` vectors added to the token
      embeddings; GPT-2) or ``"sinusoidal"`` (the original Transformer's fixed table).
    - ``ffn``: ``"swiglu"``; ``"silu"``, ``"gelu"``, ``"gelu_tanh"``, ``"relu"`` (two-matrix MLPs, use
      ``d_ff = 4 d_model``); or ``"moe"``: ``num_experts`` SwiGLU experts of width ``d_ff``, each
      token going to its ``top_k`` by router softmax (renormalised over the top k when
      ``normalize_topk``); ``capacity_factor`` (``None``: unlimited) caps the tokens per expert,
      and the load-balancing loss is scaled by ``aux_loss_coef``. ``dense_layers`` (indices)
      keep a plain SwiGLU of width ``dense_d_ff`` instead (Qwen3-MoE's ``mlp_only_layers``,
      DeepSeek's ``first_k_dense_replace``). DeepSeek-V2 MoE: ``num_shared_experts`` (one
      always-on SwiGLU of width ``num_shared_experts * d_ff``), ``routed_scaling`` (factor on
      the routed weights) and ``expert_groups = [groups, topk_groups]`` (group-limited routing).
      ``router_scoring="sigmoid"``: DeepSeek-V3's routing (sigmoid scores, a per-expert
      ``score_correction_bias`` buffer used to choose experts only, groups ranked by their two
      best biased scores; see ``moe.py``).
    - ``head_dim``: the width of every query, key and value head (``None``: ``d_model /
      num_heads``); set, it decouples the heads from ``d_model`` (Qwen3, Gemma): the query and
      output projections are ``d_model x num_heads * head_dim``.
    - ``rope_scaling``: ``None``, or RoPE frequency scaling as released long-context models
      use it, ``{"rope_type": "linear" | "dynamic" | "llama3" | "yarn", ...}`` (see ``rope_scaling.py``;
      MLA: ``yarn`` only, with DeepSeek's softmax mscale).
    - ``num_kv_heads``: key/value heads shared by groups of query heads (``None``: one per query
      head; fewer: grouped-query attention; ``1``: multi-query). ``qk_norm``: RMSNorm on every
      query and key head before RoPE (Qwen3). ``bias``: biases on the attention and two-matrix
      MLP projections (GPT-2); ``qkv_bias``: biases on the query, key and value
      projections only (Qwen2). ``tie_embeddings``: the LM head reuses the token embeddings.
    - ``attention="mla"``: multi-head latent attention (DeepSeek-V2): keys and values from a
      ``kv_lora_rank`` latent, queries from a ``q_lora_rank`` latent (``None``: full rank);
      ``qk_nope_head_dim`` position-free plus ``qk_rope_head_dim`` rotated query/key dims per
      head and ``v_head_dim`` value dims (``None``: ``d_model / num_heads``). ``index_topk``
      (``None``: dense) makes it DeepSeek Sparse Attention (DeepSeek-V3.2, ``dsa.py``): a
      lightning indexer of ``index_heads`` heads of width ``index_head_dim`` picks the
      ``index_topk`` keys each query attends to; it needs ``q_lora_rank``.
    - ``fused_attention``: PyTorch's fused ``F.scaled_dot_product_attention`` kernel instead of
      the reference attention: the same function, faster (not for MLA).
    """

    norm_placement: NormPlacement = "pre"
    position_encoding: PositionEncoding = "rope"
    ffn: FeedForwardKind = "swiglu"
    norm: NormKind = "rmsnorm"
    num_kv_heads: int | None = None
    head_dim: int | None = None
    rope_scaling: dict[str, Any] | None = None
    qk_norm: bool = False
    bias: bool = False
    qkv_bias: bool = False
    tie_embeddings: bool = False
    num_experts: int = 8
    top_k: int = 2
    normalize_topk: bool = True
    capacity_factor: float | None = None
    dense_layers: list[int] | None = None
    dense_d_ff: int | None = None
    num_shared_experts: int | None = None
    routed_scaling: float | None = None
    expert_groups: list[int] | None = None
    router_scoring: RouterScoring = "softmax"
    aux_loss_coef: float = 0.01
    attention: AttentionKind = "mha"
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32
    qk_rope_head_dim: int = 8
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    index_topk: int | None = None
    index_heads: int = 4
    index_head_dim: int = 16
    fused_attention: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"ModelConfig.{name} must be one of {choices}; got {getattr(self, name)!r}"
                )
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                value = getattr(self, name)
                raise ValueError(f"ModelConfig.{name} must be true or false; got {value!r}")
        if self.position_encoding == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"sinusoidal positions need an even d_model; got {self.d_model}")
        self._check_attention()
        if self.attention == "mla":
            self._check_mla()
        if self.ffn == "moe":
            self._check_moe()
        else:
            moe_only = ("dense_layers", "dense_d_ff", "num_shared_experts", "routed_scaling")
            for name in (*moe_only, "expert_groups"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} only applies with ffn='moe'")
            if self.router_scoring != "softmax":
                raise ValueError("router_scoring only applies with ffn='moe'")

    def _check_attention(self) -> None:
        if self.index_topk is not None and self.attention != "mla":
            raise ValueError("index_topk (DeepSeek sparse attention) needs attention='mla'")
        if self.rope_scaling is not None:
            from cs336_basics.variants.rope_scaling import check_rope_scaling

            if self.position_encoding != "rope":
                raise ValueError("rope_scaling needs position_encoding='rope'")
            if self.attention == "mla" and self.rope_scaling.get("rope_type") != "yarn":
                raise ValueError("attention='mla' supports rope_scaling of type 'yarn' only")
            check_rope_scaling(self.rope_scaling)
        if self.head_dim is not None:
            check_positive("head_dim", self.head_dim)
        if self.num_kv_heads is not None:
            check_positive("num_kv_heads", self.num_kv_heads)
            if self.num_heads % self.num_kv_heads != 0:
                raise ValueError(
                    f"num_heads={self.num_heads} must be a multiple of "
                    f"num_kv_heads={self.num_kv_heads}"
                )

    def _check_mla(self) -> None:
        if (
            self.num_kv_heads not in (None, self.num_heads)
            or self.qk_norm
            or self.bias
            or self.qkv_bias
            or self.head_dim is not None
        ):
            raise ValueError(
                "attention='mla' has its own key/value compression and no biases: "
                "leave num_kv_heads and head_dim unset and qk_norm and bias off"
            )
        if self.fused_attention:
            raise ValueError("attention='mla' has no fused kernel: leave fused_attention off")
        if self.position_encoding != "rope":
            raise ValueError(
                "attention='mla' uses decoupled RoPE; "
                f"got position_encoding={self.position_encoding!r}"
            )
        check_positive("kv_lora_rank", self.kv_lora_rank)
        check_positive("qk_rope_head_dim", self.qk_rope_head_dim)
        for name in ("q_lora_rank", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        if self.qk_rope_head_dim % 2 != 0:
            raise ValueError(f"qk_rope_head_dim must be even for RoPE; got {self.qk_rope_head_dim}")
        if self.index_topk is not None:
            self._check_sparse_attention()

    def _check_sparse_attention(self) -> None:
        for name in ("index_topk", "index_heads", "index_head_dim"):
            check_positive(name, getattr(self, name))
        if self.q_lora_rank is None:
            raise ValueError(
                "index_topk (sparse attention) needs q_lora_rank: the indexer's "
                "queries come from the query latent"
            )
        if self.index_head_dim < self.qk_rope_head_dim:
            raise ValueError(
                f"index_head_dim={self.index_head_dim} must be at least "
                f"qk_rope_head_dim={self.qk_rope_head_dim} (its first dims are rotated)"
            )

    def _check_moe(self) -> None:
        if self.dense_layers is not None:
            if not all(0 <= i < self.num_layers for i in self.dense_layers):
                raise ValueError(
                    f"dense_layers {self.dense_layers} must be layer indices below "
                    f"num_layers={self.num_layers}"
                )
            check_positive("dense_d_ff", self.dense_d_ff or 0)
        check_positive("num_experts", self.num_experts)
        check_positive("top_k", self.top_k)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} cannot exceed num_experts={self.num_experts}")
        if self.expert_groups is not None:
            from cs336_basics.variants.moe import check_expert_groups

            check_expert_groups(
                self.expert_groups, self.num_experts, self.top_k, self.router_scoring
            )
        if self.capacity_factor is not None and not self.capacity_factor > 0:
            raise ValueError(
                f"capacity_factor must be positive or None; got {self.capacity_factor}"
            )
        if self.aux_loss_coef < 0:
            raise ValueError(f"aux_loss_coef must be non-negative; got {self.aux_loss_coef}")

    def to_dict(self) -> dict[str, Any]:
        """All fields, except the published-architecture ones (``OPTIONAL_FIELDS``) at their
        defaults: configs written before those existed still write back byte for byte."""
        data = super().to_dict()
        for name in OPTIONAL_FIELDS:
            if data[name] == getattr(VariantConfig, name):
                del data[name]
        return data

    @property
    def uses_rope_heads(self) -> bool:
        return self.position_encoding == "rope" and self.attention == "mha"

    @property
    def d_head(self) -> int:
        """Width of a query/key/value head: ``head_dim``, or ``d_model / num_heads`` when unset."""
        return self.d_model // self.num_heads if self.head_dim is None else self.head_dim

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` has the mixture of experts (else a dense SwiGLU)."""
        return self.ffn == "moe" and index not in (self.dense_layers or ())

    @property
    def kv_heads(self) -> int:
        """Key/value heads: ``num_kv_heads``, or ``num_heads`` when unset."""
        return self.num_heads if self.num_kv_heads is None else self.num_kv_heads

    @property
    def mla_nope_dim(self) -> int:
        return self.d_head if self.qk_nope_head_dim is None else self.qk_nope_head_dim

    @property
    def mla_v_dim(self) -> int:
        return self.d_head if self.v_head_dim is None else self.v_head_dim
