"""The registry of snapshot cases that ``course/cases/fixtures.py`` writes.

A case is a function of the frozen fixture data returning a ``CaseResult``: the reference
solution's float32 output, the float64 output of an *independent* computation, and the
outputs of known mistakes, each with the hint a student sees when their output matches it.
Cases live in ``course/cases/model.py`` and ``course/cases/variants.py`` and register themselves
with ``@snapshot_case(name)``; their truths call the naive computations of ``course/cases/truths``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from cs336_basics.config import ModelConfig


@dataclass(frozen=True)
class FixtureData:
    """What every case may read: the shared inputs and the small reference model."""

    config: ModelConfig
    state_dict: dict[str, torch.Tensor]
    inputs: dict[str, torch.Tensor]


@dataclass
class CaseResult:
    reference: torch.Tensor
    truth: torch.Tensor
    wrong: dict[str, tuple[str, torch.Tensor]] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "reference": self.reference.detach().cpu().numpy(),
            "truth": self.truth.detach().cpu().double().numpy(),
            **{slug: out.detach().cpu().double().numpy() for slug, (_, out) in self.wrong.items()},
        }


Case = Callable[[FixtureData], CaseResult]
REGISTRY: dict[str, Case] = {}


def snapshot_case(name: str) -> Callable[[Case], Case]:
    def register(case: Case) -> Case:
        if name in REGISTRY:
            raise ValueError(f"snapshot case {name!r} is registered twice")
        REGISTRY[name] = case
        return case

    return register
