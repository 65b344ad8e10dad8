"""RoPE frequency scaling for contexts longer than the pretraining one, as released models use it.

``rope_scaling`` is a dict ``{"rope_type": ..., <its parameters>}`` (the fields of HF's
``rope_parameters`` other than ``rope_theta``). Supported types, acting on the inverse
frequencies ``w_i = theta^(-2i/d)``:

- ``linear`` (``factor``): every ``w_i / factor`` (position interpolation).
- ``llama3`` (``factor``, ``low_freq_factor``, ``high_freq_factor``,
  ``original_max_position_embeddings``; Llama 3.1+): with wavelength ``2 pi / w_i`` and
  ``L = original_max_position_embeddings``, wavelengths above ``L / low_freq_factor`` are
  divided by ``factor``, those below ``L / high_freq_factor`` kept, and those between blended
  linearly in ``L / wavelength``.

Any other type or parameter is refused by name.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from cs336_basics.rope import RotaryPositionalEmbedding

PARAMETERS: dict[str, tuple[str, ...]] = {
    "linear": ("factor",),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
}


def check_rope_scaling(scaling: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the type or parameter this module cannot apply."""
    kind = scaling.get("rope_type")
    if kind not in PARAMETERS:
        raise ValueError(
            f"rope_scaling rope_type {kind!r} is not supported; supported: {tuple(PARAMETERS)}"
        )
    given, needed = set(scaling) - {"rope_type"}, set(PARAMETERS[kind])
    if given != needed:
        raise ValueError(
            f"rope_scaling of type {kind!r} takes exactly {sorted(needed)}; "
            f"unsupported: {sorted(given - needed)}, missing: {sorted(needed - given)}"
        )
    if not all(float(scaling[name]) > 0 for name in needed):
        raise ValueError(f"rope_scaling parameters must be positive; got {scaling}")


def inverse_frequencies(theta: float, d_k: int, scaling: dict[str, Any] | None) -> Tensor:
    """The (scaled) float64 inverse frequency of each of the ``d_k / 2`` rotated pairs."""
    base = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    if scaling is None:
        return base
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return base / factor
    context = float(scaling["original_max_position_embeddings"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    wavelengths = 2 * math.pi / base
    smooth = ((context / wavelengths - low) / (high - low)).clamp(0.0, 1.0)
    blended = (1 - smooth) * base / factor + smooth * base
    return torch.where(wavelengths > context / low, base / factor, blended)


def rotary_embedding(
    theta: float,
    d_k: int,
    max_seq_len: int,
    scaling: dict[str, Any] | None,
    device: torch.device | str | None = None,
) -> RotaryPositionalEmbedding:
    """The handout's RoPE module with its cosine and sine tables from ``inverse_frequencies``."""
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=device)
    if scaling is not None:
        positions = torch.arange(max_seq_len, dtype=torch.float64)
        angles = torch.outer(positions, inverse_frequencies(theta, d_k, scaling))
        rope.cos.copy_(angles.cos())
        rope.sin.copy_(angles.sin())
    return rope
