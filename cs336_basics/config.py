"""``ModelConfig``: the hyperparameters of the handout's ``TransformerLM``, JSON round-trippable.

This is the one place a model configuration is validated. Architecture variants (GQA, MoE,
MLA, ...) add their fields in a subclass and register it (``cs336_basics.registry``);
``ModelConfig.from_dict`` reads the fields of every registered subclass too.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cs336_basics import registry
from cs336_basics.atomic_write import atomic_writer


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the handout's pre-norm, RoPE, SwiGLU decoder-only Transformer LM."""

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
            check_positive(name, getattr(self, name))
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"d_model={self.d_model} must be divisible by num_heads={self.num_heads}"
            )
        if self.rope_theta <= 0 or self.norm_eps < 0:
            raise ValueError(
                "rope_theta must be positive and norm_eps non-negative; "
                f"got {self.rope_theta}, {self.norm_eps}"
            )
        if self.uses_rope_heads and self.d_head % 2 != 0:
            raise ValueError(
                f"RoPE needs an even head size, but d_model / num_heads = {self.d_head}"
            )

    @property
    def uses_rope_heads(self) -> bool:
        """Whether RoPE rotates every ``d_head``-wide query and key head (always, here)."""
        return True

    @property
    def d_head(self) -> int:
        return self.d_model // self.num_heads

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def flag_class(cls) -> type:
        """The dataclass whose fields are this config's command-line flags: its own."""
        return cls

    @classmethod
    def accepts(cls, data: dict[str, Any]) -> bool:
        """Whether ``data`` names only fields of this class (a subclass may read more formats)."""
        return set(data) <= {field.name for field in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """The config ``data`` describes: with fields of a registered subclass (an architecture
        variant's), that subclass. Unknown and missing fields are errors."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown and cls is ModelConfig:
            for config_class in registry.config_classes():
                if config_class.accepts(data):
                    return config_class.from_dict(data)
        if unknown:
            raise ValueError(
                f"unknown {cls.__name__} field(s): {', '.join(unknown)}"
                + ("" if registry.config_classes() else " (no architecture variants are loaded)")
            )
        missing = sorted(
            name
            for name, field in fields.items()
            if name not in data
            and field.default is dataclasses.MISSING
            and field.default_factory is dataclasses.MISSING
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
            text = path.read_text(encoding="utf-8")
        return cls.from_dict(json.loads(text))


def check_positive(name: str, value: object) -> None:
    """Raise unless ``value`` is a positive ``int`` (not a ``bool``)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"ModelConfig.{name} must be a positive integer; got {value!r}")
