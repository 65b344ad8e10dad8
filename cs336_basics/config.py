"""``ModelConfig``: every hyperparameter of a ``TransformerLM``, JSON round-trippable."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

NormPlacement = Literal["pre", "post", "none"]
PositionEncoding = Literal["rope", "none"]
FeedForwardKind = Literal["swiglu", "silu"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "norm_placement": ("pre", "post", "none"),
    "position_encoding": ("rope", "none"),
    "ffn": ("swiglu", "silu"),
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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive integer; got {value!r}")
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise ValueError(f"ModelConfig.{name} must be one of {choices}; got {getattr(self, name)!r}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        if self.position_encoding == "rope" and self.d_head % 2 != 0:
            raise ValueError(
                f"RoPE needs an even head size, but d_model / num_heads = {self.d_head}"
            )
        if self.rope_theta <= 0 or self.norm_eps < 0:
            raise ValueError(
                f"rope_theta must be positive and norm_eps non-negative; got {self.rope_theta}, {self.norm_eps}"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

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
            Path(path).write_text(text)
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
