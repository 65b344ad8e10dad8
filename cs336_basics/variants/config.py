"""``VariantConfig``: a ``ModelConfig`` plus the architecture variants, in sections.

The top level holds what every decoder has (norms, positions, the feed-forward kind, biases,
tied embeddings); the attention is a section (``AttentionConfig`` for multi-head attention,
``LatentAttentionConfig`` for MLA, which may hold a ``SparseAttentionConfig``), and so is a
mixture of experts (``ffn=MoEConfig(...)``). A setting of one kind of attention or feed-forward
cannot be written beside another kind: the section that would hold it is not there.

Each section validates its own fields; ``VariantConfig`` checks the few rules that span
sections (MLA needs RoPE, ...). ``build_model`` then trusts the config. JSON files hold the
sections as objects with a ``"kind"``; files in the earlier flat format (every switch at the top
level) still load (``flat_config``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from cs336_basics.config import ModelConfig, check_positive
from cs336_basics.variants.flat_config import flag_fields, flattened, is_flat, sectioned

NormPlacement = Literal["pre", "post", "none"]
NormKind = Literal["rmsnorm", "layernorm"]
PositionEncoding = Literal["rope", "none", "learned", "sinusoidal"]
DenseFeedForward = Literal["swiglu", "silu", "gelu", "gelu_tanh", "relu"]
RouterScoring = Literal["softmax", "sigmoid"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "norm_placement": ("pre", "post", "none"),
    "norm": ("rmsnorm", "layernorm"),
    "position_encoding": ("rope", "none", "learned", "sinusoidal"),
}
DENSE_FEED_FORWARDS = ("swiglu", "silu", "gelu", "gelu_tanh", "relu")


def check_flags(section: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(section, name)
        if not isinstance(value, bool):
            raise ValueError(f"ModelConfig.{name} must be true or false; got {value!r}")


def check_optional_positive(section: object, names: tuple[str, ...]) -> None:
    for name in names:
        if getattr(section, name) is not None:
            check_positive(name, getattr(section, name))


@dataclass(frozen=True)
class AttentionConfig:
    """Multi-head self-attention and its variants.

    ``num_kv_heads``: key/value heads shared by groups of query heads (``None``: one per query
    head; fewer: grouped-query attention; ``1``: multi-query). ``head_dim``: the width of every
    query, key and value head (``None``: ``d_model / num_heads``); set, it decouples the heads
    from ``d_model`` (Qwen3, Gemma). ``qk_norm``: RMSNorm on every query and key head before
    RoPE (Qwen3). ``qkv_bias``: biases on the query, key and value projections only (Qwen2).
    ``fused_attention``: PyTorch's fused ``F.scaled_dot_product_attention`` kernel instead of
    the reference attention: the same function, faster.
    """

    kind: ClassVar[str] = "mha"
    num_kv_heads: int | None = None
    head_dim: int | None = None
    qk_norm: bool = False
    qkv_bias: bool = False
    fused_attention: bool = False

    def __post_init__(self) -> None:
        check_flags(self, ("qk_norm", "qkv_bias", "fused_attention"))
        check_optional_positive(self, ("num_kv_heads", "head_dim"))


@dataclass(frozen=True)
class SparseAttentionConfig:
    """DeepSeek Sparse Attention (DeepSeek-V3.2, ``dsa.py``): a lightning indexer of
    ``index_heads`` heads of width ``index_head_dim`` picks the ``index_topk`` keys each query
    attends to."""

    index_topk: int
    index_heads: int = 4
    index_head_dim: int = 16

    def __post_init__(self) -> None:
        for name in ("index_topk", "index_heads", "index_head_dim"):
            check_positive(name, getattr(self, name))


@dataclass(frozen=True)
class LatentAttentionConfig:
    """Multi-head latent attention (DeepSeek-V2): keys and values from a ``kv_lora_rank``
    latent, queries from a ``q_lora_rank`` latent (``None``: full rank); ``qk_nope_head_dim``
    position-free plus ``qk_rope_head_dim`` rotated query/key dims per head and ``v_head_dim``
    value dims (``None``: ``d_model / num_heads``). ``sparse``: DeepSeek Sparse Attention on
    top (it needs ``q_lora_rank``)."""

    kind: ClassVar[str] = "mla"
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32
    qk_rope_head_dim: int = 8
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    sparse: SparseAttentionConfig | None = None

    def __post_init__(self) -> None:
        check_positive("kv_lora_rank", self.kv_lora_rank)
        check_positive("qk_rope_head_dim", self.qk_rope_head_dim)
        check_optional_positive(self, ("q_lora_rank", "qk_nope_head_dim", "v_head_dim"))
        if self.qk_rope_head_dim % 2 != 0:
            raise ValueError(f"qk_rope_head_dim must be even for RoPE; got {self.qk_rope_head_dim}")
        if self.sparse is None:
            return
        if self.q_lora_rank is None:
            raise ValueError(
                "index_topk (sparse attention) needs q_lora_rank: the indexer's "
                "queries come from the query latent"
            )
        if self.sparse.index_head_dim < self.qk_rope_head_dim:
            raise ValueError(
                f"index_head_dim={self.sparse.index_head_dim} must be at least "
                f"qk_rope_head_dim={self.qk_rope_head_dim} (its first dims are rotated)"
            )


@dataclass(frozen=True)
class MoEConfig:
    """A mixture of ``num_experts`` SwiGLU experts of width ``d_ff``, each token going to its
    ``top_k`` by router softmax (renormalised over the top k when ``normalize_topk``).

    ``capacity_factor`` (``None``: unlimited) caps the tokens per expert, and the load-balancing
    loss is scaled by ``aux_loss_coef``. ``dense_layers`` (indices) keep a plain SwiGLU of width
    ``dense_d_ff`` instead (Qwen3-MoE's ``mlp_only_layers``, DeepSeek's
    ``first_k_dense_replace``). DeepSeek-V2: ``num_shared_experts`` (one always-on SwiGLU of
    width ``num_shared_experts * d_ff``), ``routed_scaling`` (factor on the routed weights) and
    ``expert_groups = [groups, topk_groups]`` (group-limited routing).
    ``router_scoring="sigmoid"``: DeepSeek-V3's routing (sigmoid scores, a per-expert
    ``score_correction_bias`` buffer used to choose experts only; see ``moe.py``).
    """

    kind: ClassVar[str] = "moe"
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

    def __post_init__(self) -> None:
        check_flags(self, ("normalize_topk",))
        check_positive("num_experts", self.num_experts)
        check_positive("top_k", self.top_k)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} cannot exceed num_experts={self.num_experts}")
        if self.router_scoring not in ("softmax", "sigmoid"):
            raise ValueError(
                f"router_scoring must be 'softmax' or 'sigmoid'; got {self.router_scoring!r}"
            )
        if self.dense_layers is not None:
            check_positive("dense_d_ff", self.dense_d_ff or 0)
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


SECTIONS: dict[str, tuple[type, ...]] = {
    "attention": (AttentionConfig, LatentAttentionConfig),
    "ffn": (MoEConfig,),
}
FLAT_SECTIONS: dict[str, type] = {
    "mha": AttentionConfig,
    "mla": LatentAttentionConfig,
    "sparse": SparseAttentionConfig,
    "moe": MoEConfig,
}


@dataclass(frozen=True)
class VariantConfig(ModelConfig):
    """The handout's model with modern (and older) LLM variants; the defaults are the handout's.

    - ``norm_placement``: ``"pre"`` (``x + f(norm(x))``), ``"post"`` (``norm(x + f(x))``, the
      original Transformer) or ``"none"`` (no norm anywhere). ``norm``: ``"rmsnorm"`` or
      ``"layernorm"`` (mean-centred, with a bias; GPT-2).
    - ``position_encoding``: ``"rope"``, ``"none"`` (NoPE: the causal mask alone tells the model
      about order), ``"learned"`` (a trained table of ``context_length`` vectors added to the token
      embeddings; GPT-2) or ``"sinusoidal"`` (the original Transformer's fixed table).
      ``rope_scaling``: ``None``, or RoPE frequency scaling as released long-context models use
      it, ``{"rope_type": "linear" | "dynamic" | "llama3" | "yarn", ...}`` (see
      ``rope_scaling.py``; MLA: ``yarn`` only, with DeepSeek's softmax mscale).
    - ``ffn``: ``"swiglu"``; ``"silu"``, ``"gelu"``, ``"gelu_tanh"``, ``"relu"`` (two-matrix MLPs,
      use ``d_ff = 4 d_model``); or a ``MoEConfig``: a mixture of SwiGLU experts.
    - ``attention``: an ``AttentionConfig`` (multi-head attention, GQA/MQA, QK norm, ...) or a
      ``LatentAttentionConfig`` (MLA, optionally sparse).
    - ``bias``: biases on the attention and two-matrix MLP projections (GPT-2; not with MLA).
      ``tie_embeddings``: the LM head reuses the token embeddings.
    """

    norm_placement: NormPlacement = "pre"
    position_encoding: PositionEncoding = "rope"
    ffn: DenseFeedForward | MoEConfig = "swiglu"
    norm: NormKind = "rmsnorm"
    rope_scaling: dict[str, Any] | None = None
    bias: bool = False
    tie_embeddings: bool = False
    # a factory, not an instance: nothing runs a section's checks at import time
    attention: AttentionConfig | LatentAttentionConfig = dataclasses.field(
        default_factory=AttentionConfig
    )

    def __post_init__(self) -> None:
        self._check_kinds()
        super().__post_init__()
        if self.position_encoding == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"sinusoidal positions need an even d_model; got {self.d_model}")
        if self.rope_scaling is not None:
            from cs336_basics.variants.rope_scaling import check_rope_scaling

            if self.position_encoding != "rope":
                raise ValueError("rope_scaling needs position_encoding='rope'")
            if self.mla is not None and self.rope_scaling.get("rope_type") != "yarn":
                raise ValueError("attention='mla' supports rope_scaling of type 'yarn' only")
            check_rope_scaling(self.rope_scaling)
        if self.mla is not None:
            self._check_latent_attention()
        elif self.num_heads % self.kv_heads != 0:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.kv_heads}"
            )
        dense_layers = self.moe.dense_layers if self.moe is not None else None
        if dense_layers is not None and not all(0 <= i < self.num_layers for i in dense_layers):
            raise ValueError(
                f"dense_layers {dense_layers} must be layer indices below "
                f"num_layers={self.num_layers}"
            )

    def _check_kinds(self) -> None:
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"ModelConfig.{name} must be one of {choices}; got {getattr(self, name)!r}"
                )
        check_flags(self, ("bias", "tie_embeddings"))
        if not isinstance(self.ffn, MoEConfig) and self.ffn not in DENSE_FEED_FORWARDS:
            raise ValueError(
                f"ModelConfig.ffn must be one of {DENSE_FEED_FORWARDS} or a MoEConfig; "
                f"got {self.ffn!r}"
            )
        if not isinstance(self.attention, SECTIONS["attention"]):
            raise ValueError(
                "ModelConfig.attention must be an AttentionConfig or a LatentAttentionConfig; "
                f"got {self.attention!r}"
            )

    def _check_latent_attention(self) -> None:
        if self.bias:
            raise ValueError("attention='mla' has no biases: leave bias off")
        if self.position_encoding != "rope":
            raise ValueError(
                "attention='mla' uses decoupled RoPE; "
                f"got position_encoding={self.position_encoding!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields, each section as an object with its ``"kind"``."""
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        for name in SECTIONS:
            if dataclasses.is_dataclass(data[name]):
                data[name] = {"kind": data[name].kind, **dataclasses.asdict(data[name])}
        return data

    @classmethod
    def accepts(cls, data: dict[str, Any]) -> bool:
        return super().accepts(data) or is_flat(data, FLAT_SECTIONS)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VariantConfig:
        """The config ``data`` describes, in the sectioned format ``to_dict`` writes or in the
        earlier flat one. Unknown and missing fields are errors."""
        if is_flat(data, FLAT_SECTIONS):
            data = sectioned(data, FLAT_SECTIONS)
        data = dict(data)
        for name, kinds in SECTIONS.items():
            if isinstance(data.get(name), dict):
                data[name] = section_from_dict(name, data[name], kinds)
        config = super().from_dict(data)
        assert isinstance(config, VariantConfig)
        return config

    @classmethod
    def flag_class(cls) -> type:
        """The flat format's fields as a dataclass: the command line's flags for a config
        (``--attention mla``, ``--num-experts 8``, ...)."""
        return flag_fields(cls, FLAT_SECTIONS, DENSE_FEED_FORWARDS)

    def flat_dict(self) -> dict[str, Any]:
        """The config in the earlier flat format (the config dicts the test adapters take)."""
        return flattened(self.to_dict(), FLAT_SECTIONS)

    @property
    def mla(self) -> LatentAttentionConfig | None:
        """The latent-attention section, when the attention is MLA."""
        return self.attention if isinstance(self.attention, LatentAttentionConfig) else None

    @property
    def mha(self) -> AttentionConfig | None:
        """The multi-head attention section, when the attention is not MLA."""
        return self.attention if isinstance(self.attention, AttentionConfig) else None

    @property
    def sparse(self) -> SparseAttentionConfig | None:
        """The sparse-attention section, when the attention is sparse MLA."""
        return self.mla.sparse if self.mla is not None else None

    @property
    def moe(self) -> MoEConfig | None:
        """The mixture-of-experts section, when the feed-forward is one."""
        return self.ffn if isinstance(self.ffn, MoEConfig) else None

    @property
    def ffn_kind(self) -> str:
        """``"moe"`` or the dense feed-forward's name."""
        return self.ffn.kind if isinstance(self.ffn, MoEConfig) else self.ffn

    @property
    def uses_rope_heads(self) -> bool:
        return self.position_encoding == "rope" and self.mha is not None

    @property
    def d_head(self) -> int:
        """Width of a query/key/value head: ``head_dim``, or ``d_model / num_heads`` when unset."""
        head_dim = self.mha.head_dim if self.mha is not None else None
        return self.d_model // self.num_heads if head_dim is None else head_dim

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` has the mixture of experts (else a dense SwiGLU)."""
        return self.moe is not None and index not in (self.moe.dense_layers or ())

    @property
    def kv_heads(self) -> int:
        """Key/value heads: ``num_kv_heads``, or ``num_heads`` when unset (and for MLA)."""
        kv_heads = self.mha.num_kv_heads if self.mha is not None else None
        return self.num_heads if kv_heads is None else kv_heads

    @property
    def mla_nope_dim(self) -> int:
        nope = self.mla.qk_nope_head_dim if self.mla is not None else None
        return self.d_head if nope is None else nope

    @property
    def mla_v_dim(self) -> int:
        v_dim = self.mla.v_head_dim if self.mla is not None else None
        return self.d_head if v_dim is None else v_dim


def section_from_dict(name: str, data: dict[str, Any], kinds: tuple[type, ...]) -> Any:
    """The section ``data`` describes: the class of its ``"kind"``, with nested sections."""
    by_kind = {kind.kind: kind for kind in kinds}
    kind = data.get("kind")
    if kind not in by_kind:
        raise ValueError(f"ModelConfig.{name}.kind must be one of {tuple(by_kind)}; got {kind!r}")
    section_class = by_kind[kind]
    fields = {field.name for field in dataclasses.fields(section_class)}
    values = {key: value for key, value in data.items() if key != "kind"}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ValueError(f"unknown field(s) of {name} kind {kind!r}: {', '.join(unknown)}")
    if isinstance(values.get("sparse"), dict):
        values["sparse"] = SparseAttentionConfig(**values["sparse"])
    return section_class(**values)
