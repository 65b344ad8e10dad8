"""``ModelConfig``: every hyperparameter of a ``TransformerLM``, JSON round-trippable."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cs336_basics.atomic_write import atomic_writer

NormPlacement = Literal["pre", "post", "none"]
NormKind = Literal["rmsnorm", "layernorm"]
PositionEncoding = Literal["rope", "none", "learned", "sinusoidal"]
FeedForwardKind = Literal["swiglu", "silu", "gelu", "relu", "moe"]
AttentionKind = Literal["mha", "mla"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "norm_placement": ("pre", "post", "none"),
    "norm": ("rmsnorm", "layernorm"),
    "position_encoding": ("rope", "none", "learned", "sinusoidal"),
    "ffn": ("swiglu", "silu", "gelu", "relu", "moe"),
    "attention": ("mha", "mla"),
}


@dataclass(frozen=True)
class ModelConfig:
    """Shape and variant switches of a decoder-only Transformer LM.

    The defaults are the handout's pre-norm, RoPE, SwiGLU model. The ablation switches:

    - ``norm_placement``: ``"pre"`` (``x + f(norm(x))``), ``"post"`` (``norm(x + f(x))``, the
      original Transformer) or ``"none"`` (no RMSNorm anywhere).
    - ``position_encoding``: ``"rope"`` or ``"none"`` (NoPE: causal masking alone tells the model
      about order).
    - ``ffn``: ``"swiglu"`` (gated) or ``"silu"`` (``w2(silu(w1 x))``, use ``d_ff = 4 d_model``).

    Variants of modern (and older) LLMs, all off by default:

    - ``norm``: ``"rmsnorm"`` or ``"layernorm"`` (mean-centred, with a bias; GPT-2).
    - ``position_encoding`` also takes ``"learned"`` (a trained table of ``context_length``
      vectors added to the token embeddings; GPT-2) and ``"sinusoidal"`` (the fixed sin/cos
      table of the original Transformer).
    - ``num_kv_heads``: key/value heads shared by groups of query heads; ``None`` or
      ``num_heads`` is multi-head attention, fewer is grouped-query attention (GQA), ``1`` is
      multi-query attention (MQA).
    - ``qk_norm``: RMSNorm over each query and key head before RoPE (Qwen3).
    - ``bias``: biases on every attention and feed-forward projection (GPT-2).
    - ``tie_embeddings``: the LM head reuses the token-embedding matrix.
    - ``ffn`` also takes ``"gelu"`` and ``"relu"`` (two-matrix MLPs) and ``"moe"``: a
      mixture of ``num_experts`` SwiGLU experts of width ``d_ff``; each token goes to its
      ``top_k`` experts by router softmax (weights renormalised over the top k when
      ``normalize_topk``); ``capacity_factor`` (``None`` = unlimited) caps the tokens per
      expert, and the load-balancing loss is scaled by ``aux_loss_coef``.
    - ``attention="mla"``: multi-head latent attention (DeepSeek-V2). Keys and values are
      up-projected from a ``kv_lora_rank`` latent; queries from a ``q_lora_rank`` latent
      (``None``: a full-rank projection). Each head has ``qk_nope_head_dim`` position-free
      query/key dims plus ``qk_rope_head_dim`` rotated dims whose key is shared by all heads,
      and ``v_head_dim`` value dims (``None`` defaults to ``d_model / num_heads``).
    - ``fused_attention``: compute attention with PyTorch's fused
      ``F.scaled_dot_product_attention`` kernel instead of the reference code: the same
      function, faster in training (not for ``attention="mla"``).
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    norm_placement: NormPlacement = "pre"
    position_encoding: PositionEncoding = "rope"
    ffn: FeedForwardKind = "swiglu"
    norm: NormKind = "rmsnorm"
    num_kv_heads: int | None = None
    qk_norm: bool = False
    bias: bool = False
    tie_embeddings: bool = False
    num_experts: int = 8
    top_k: int = 2
    normalize_topk: bool = True
    capacity_factor: float | None = None
    aux_loss_coef: float = 0.01
    attention: AttentionKind = "mha"
    q_lora_rank: int | None = None
    kv_lora_rank: int = 32
    qk_rope_head_dim: int = 8
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    fused_attention: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
            _check_positive(name, getattr(self, name))
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"ModelConfig.{name} must be one of {choices}; got {getattr(self, name)!r}"
                )
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        if self.position_encoding == "rope" and self.attention == "mha" and self.d_head % 2 != 0:
            raise ValueError(
                f"RoPE needs an even head size, but d_model / num_heads = {self.d_head}"
            )
        if self.position_encoding == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"sinusoidal positions need an even d_model; got {self.d_model}")
        if self.rope_theta <= 0 or self.norm_eps < 0:
            raise ValueError(
                f"rope_theta must be positive and norm_eps non-negative; got {self.rope_theta}, {self.norm_eps}"
            )
        for name in ("qk_norm", "bias", "tie_embeddings", "normalize_topk", "fused_attention"):
            if not isinstance(getattr(self, name), bool):
                value = getattr(self, name)
                raise ValueError(f"ModelConfig.{name} must be true or false; got {value!r}")
        self._check_attention()
        if self.ffn == "moe":
            self._check_moe()

    def _check_attention(self) -> None:
        if self.num_kv_heads is not None:
            _check_positive("num_kv_heads", self.num_kv_heads)
            if self.num_heads % self.num_kv_heads != 0:
                raise ValueError(
                    f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}"
                )
        if self.attention != "mla":
            return
        if (
            self.num_kv_heads not in (None, self.num_heads)
            or self.qk_norm
            or self.bias
            or self.fused_attention
        ):
            raise ValueError(
                "attention='mla' has its own key/value compression, no biases and no fused kernel: "
                "leave num_kv_heads unset and qk_norm, bias and fused_attention off"
            )
        if self.position_encoding != "rope":
            raise ValueError(
                f"attention='mla' uses decoupled RoPE; got position_encoding={self.position_encoding!r}"
            )
        _check_positive("kv_lora_rank", self.kv_lora_rank)
        _check_positive("qk_rope_head_dim", self.qk_rope_head_dim)
        for name in ("q_lora_rank", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, name) is not None:
                _check_positive(name, getattr(self, name))
        if self.qk_rope_head_dim % 2 != 0:
            raise ValueError(f"qk_rope_head_dim must be even for RoPE; got {self.qk_rope_head_dim}")

    def _check_moe(self) -> None:
        _check_positive("num_experts", self.num_experts)
        _check_positive("top_k", self.top_k)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} cannot exceed num_experts={self.num_experts}")
        if self.capacity_factor is not None and not self.capacity_factor > 0:
            raise ValueError(
                f"capacity_factor must be positive or None; got {self.capacity_factor}"
            )
        if self.aux_loss_coef < 0:
            raise ValueError(f"aux_loss_coef must be non-negative; got {self.aux_loss_coef}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s): {', '.join(unknown)}")
        missing = sorted(
            f.name
            for f in dataclasses.fields(cls)
            if f.name not in data and f.default is dataclasses.MISSING
        )
        if missing:
            raise ValueError(f"ModelConfig is missing required field(s): {', '.join(missing)}")
        return cls(**data)

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialise to JSON text; also write it to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if path is not None:
            with atomic_writer(path) as out:
                out.write(text.encode())
        return text

    @classmethod
    def from_json(cls, path_or_text: str | Path) -> ModelConfig:
        """Read a config from a JSON file path or a JSON string."""
        text = str(path_or_text)
        if not text.lstrip().startswith("{"):
            path = Path(path_or_text)
            if not path.is_file():
                raise FileNotFoundError(f"model config not found: {path}")
            text = path.read_text()
        return cls.from_dict(json.loads(text))


def _check_positive(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"ModelConfig.{name} must be a positive integer; got {value!r}")
