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
- ``yarn`` (``factor``, ``original_max_position_embeddings``; optional ``beta_fast`` = 32,
  ``beta_slow`` = 1, ``truncate`` = true, ``attention_factor``, ``mscale``, ``mscale_all_dim``;
  Qwen, DeepSeek): pairs that turn more than ``beta_fast`` times over ``L`` keep ``w_i``, those
  turning fewer than ``beta_slow`` times get ``w_i / factor``, with a linear ramp over the pair
  index between; the cosines and sines are multiplied by ``attention_factor`` (default
  ``m(factor, mscale) / m(factor, mscale_all_dim)`` when both are given, else ``m(factor, 1)``,
  where ``m(s, k) = 1 + 0.1 k ln s`` for ``s > 1`` and 1 otherwise).
- ``dynamic`` (``factor``, ``original_max_position_embeddings``; dynamic NTK): a call whose
  largest position is ``n - 1`` with ``n > L`` rotates every position with the base
  ``theta * (factor * n / L - (factor - 1)) ** (d / (d - 2))`` instead of ``theta``; calls
  with ``n <= L`` use plain RoPE. The base therefore depends on the call, not only on the
  position: a full forward pass over ``n`` tokens uses ``base(n)`` everywhere, while cached
  decoding rotates each new query and key with ``base(its position + 1)`` and keeps the keys
  already cached as they were rotated. Both are what HF's ``dynamic`` computes in ``generate``
  (with and without its cache). HF's module also remembers the longest length it has seen
  and keeps using it for shorter calls until one is shorter than ``L``; this one is a
  function of each call's positions (the same whenever calls only grow, as in ``generate``
  on a fresh model or from a prompt shorter than ``L``). HF's ``L`` is the config's
  ``max_position_embeddings``.

Any other type or parameter is refused by name.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from cs336_basics.rope import RotaryPositionalEmbedding, check_positions

PARAMETERS: dict[str, tuple[str, ...]] = {  # required
    "linear": ("factor",),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
    "yarn": ("factor", "original_max_position_embeddings"),
    "dynamic": ("factor", "original_max_position_embeddings"),
}
OPTIONAL = {
    "yarn": ("beta_fast", "beta_slow", "truncate", "attention_factor", "mscale", "mscale_all_dim")
}


def check_rope_scaling(scaling: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the type or parameter this module cannot apply."""
    kind = scaling.get("rope_type")
    if kind not in PARAMETERS:
        raise ValueError(
            f"rope_scaling rope_type {kind!r} is not supported; supported: {tuple(PARAMETERS)}"
        )
    given, needed = set(scaling) - {"rope_type"}, set(PARAMETERS[kind])
    allowed = needed | set(OPTIONAL.get(kind, ()))
    if not needed <= given <= allowed:
        raise ValueError(
            f"rope_scaling of type {kind!r} takes {sorted(needed)} and optionally "
            f"{sorted(allowed - needed)}; unsupported: {sorted(given - allowed)}, "
            f"missing: {sorted(needed - given)}"
        )
    if not all(float(scaling[name]) > 0 for name in needed):
        raise ValueError(f"rope_scaling parameters must be positive; got {scaling}")


def inverse_frequencies(theta: float, d_k: int, scaling: dict[str, Any] | None) -> Tensor:
    """The (scaled) float64 inverse frequency of each of the ``d_k / 2`` rotated pairs
    (``dynamic``: those of inputs that fit in the original context, i.e. unscaled)."""
    base = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    if scaling is None or scaling["rope_type"] == "dynamic":
        return base
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return base / factor
    if scaling["rope_type"] == "yarn":
        ramp = _yarn_ramp(theta, d_k, scaling)
        return ramp * base / factor + (1 - ramp) * base
    context = float(scaling["original_max_position_embeddings"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    wavelengths = 2 * math.pi / base
    smooth = ((context / wavelengths - low) / (high - low)).clamp(0.0, 1.0)
    blended = (1 - smooth) * base / factor + smooth * base
    return torch.where(wavelengths > context / low, base / factor, blended)


def _yarn_ramp(theta: float, d_k: int, scaling: dict[str, Any]) -> Tensor:
    """Per pair: 0 (keep ``w_i``) for fast pairs, 1 (``w_i / factor``) for slow, linear between."""
    context = float(scaling["original_max_position_embeddings"])

    def pair_turning(turns: float) -> float:  # the pair index that turns ``turns`` times over L
        return d_k * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(theta))

    low, high = (
        pair_turning(scaling.get("beta_fast", 32)),
        pair_turning(scaling.get("beta_slow", 1)),
    )
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d_k - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp
    index = torch.arange(d_k // 2, dtype=torch.float64)
    return ((index - low) / (high - low)).clamp(0.0, 1.0)


def attention_factor(scaling: dict[str, Any] | None) -> float:
    """The factor on RoPE's cosines and sines (so on queries and keys): 1 but for ``yarn``."""
    if scaling is None or scaling["rope_type"] != "yarn":
        return 1.0
    if scaling.get("attention_factor") is not None:
        return float(scaling["attention_factor"])
    factor = float(scaling["factor"])

    def magnitude(k: float) -> float:
        return 1.0 if factor <= 1 else 0.1 * k * math.log(factor) + 1.0

    mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        return magnitude(mscale) / magnitude(mscale_all_dim)
    return magnitude(1.0)


def softmax_mscale(scaling: dict[str, Any] | None) -> float:
    """DeepSeek's extra factor ``m(factor, mscale_all_dim)`` whose square multiplies MLA's
    attention scores under ``yarn`` (1 without ``mscale_all_dim``)."""
    if scaling is None or scaling["rope_type"] != "yarn" or not scaling.get("mscale_all_dim"):
        return 1.0
    factor = float(scaling["factor"])
    return 1.0 if factor <= 1 else 0.1 * float(scaling["mscale_all_dim"]) * math.log(factor) + 1.0


def rotary_embedding(
    theta: float,
    d_k: int,
    max_seq_len: int,
    scaling: dict[str, Any] | None,
    device: torch.device | str | None = None,
) -> RotaryPositionalEmbedding:
    """The handout's RoPE module with its cosine and sine tables from ``inverse_frequencies``
    (``dynamic``: a ``DynamicNTKRotaryEmbedding``)."""
    if scaling is not None and scaling["rope_type"] == "dynamic":
        factor, context = float(scaling["factor"]), int(scaling["original_max_position_embeddings"])
        return DynamicNTKRotaryEmbedding(theta, d_k, max_seq_len, factor, context, device)
    rope = RotaryPositionalEmbedding(theta, d_k, max_seq_len, device=device)
    if scaling is not None:
        positions = torch.arange(max_seq_len, dtype=torch.float64)
        angles = torch.outer(positions, inverse_frequencies(theta, d_k, scaling))
        scale = attention_factor(scaling)
        rope.cos.copy_(angles.cos() * scale)
        rope.sin.copy_(angles.sin() * scale)
    return rope


class DynamicNTKRotaryEmbedding(RotaryPositionalEmbedding):
    """The handout's RoPE whose base grows with the length of each call (``dynamic`` above).

    A call whose positions all lie below ``original_context`` is the plain module; a longer
    one (largest position ``n - 1``) is rotated by a plain RoPE of base ``dynamic_base(n)``,
    built for that ``n`` and kept until the next length (cached decoding asks for a new one at
    each step past ``original_context``).
    """

    def __init__(
        self,
        theta: float,
        d_k: int,
        max_seq_len: int,
        factor: float,
        original_context: int,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(theta, d_k, max_seq_len, device=device)
        if d_k <= 2:
            raise ValueError(f"dynamic RoPE scaling needs d_k > 2; got {d_k}")
        self.factor = factor
        self.original_context = original_context
        self._rescaled: tuple[int, RotaryPositionalEmbedding] | None = None  # not a submodule

    def forward(
        self, x: Float[Tensor, "... seq d_k"], token_positions: Int[Tensor, "... seq"]
    ) -> Float[Tensor, "... seq d_k"]:
        check_positions(token_positions, self.max_seq_len)
        length = int(token_positions.max()) + 1 if token_positions.numel() else 0
        if length <= self.original_context:
            return super().forward(x, token_positions)
        return self.rescaled(length)(x, token_positions)

    def dynamic_base(self, length: int) -> float:
        """NTK-aware base for inputs of ``length`` positions (``theta`` at ``original_context``)."""
        stretch = self.factor * length / self.original_context - (self.factor - 1)
        return self.theta * stretch ** (self.d_k / (self.d_k - 2))

    def rescaled(self, length: int) -> RotaryPositionalEmbedding:
        """A plain RoPE with base ``dynamic_base(length)`` for positions below ``length``."""
        device, cached = self.cos.device, self._rescaled
        if cached is None or cached[0] != length or cached[1].cos.device != device:
            rope = RotaryPositionalEmbedding(self.dynamic_base(length), self.d_k, length, device)
            self._rescaled = cached = (length, rope)
        return cached[1]

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, dynamic factor={self.factor}, "
            f"original_context={self.original_context}"
        )
