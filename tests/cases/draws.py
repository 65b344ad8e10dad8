"""Random case inputs drawn with NumPy's generator, so they are the same bits on every CPU.

torch's CPU normal sampler is vectorised, and its AVX2/AVX-512 and scalar code paths give
different numbers for one seed. NumPy's generators are plain C, so the cases' inputs, and the
expected values the instructor derives from them, do not depend on the machine that made them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def generator(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def normal(
    rng: np.random.Generator, shape: Sequence[int], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Standard normal draws (made in float64, then rounded to ``dtype``)."""
    return torch.from_numpy(rng.standard_normal(tuple(shape))).to(dtype)


def uniform(rng: np.random.Generator, shape: Sequence[int]) -> torch.Tensor:
    """Draws from U[0, 1) in float64."""
    return torch.from_numpy(rng.random(tuple(shape)))


def integers(rng: np.random.Generator, low: int, high: int, shape: Sequence[int]) -> torch.Tensor:
    """int64 draws from ``low`` (inclusive) to ``high`` (exclusive)."""
    return torch.from_numpy(rng.integers(low, high, tuple(shape), dtype=np.int64))


def permutation(rng: np.random.Generator, n: int) -> torch.Tensor:
    """A random int64 permutation of ``0 .. n-1``."""
    return torch.from_numpy(rng.permutation(n).astype(np.int64))
