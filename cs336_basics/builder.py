"""``build_model``: the one place a config becomes a model, for training, checkpoints and the CLI.

A plain ``ModelConfig`` builds the handout's ``TransformerLM`` (``transformer_lm``); a config class
an extension registered (``cs336_basics.registry``) builds what that extension says.
"""

from __future__ import annotations

import torch
from torch import nn

from cs336_basics.config import ModelConfig
from cs336_basics.model import transformer_lm
from cs336_basics.registry import model_kind_of


def build_model(
    config: ModelConfig,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> nn.Module:
    """The model ``config`` describes, freshly initialised on ``device``."""
    if kind := model_kind_of(config):
        return kind.build(config, device=device, dtype=dtype)
    return transformer_lm(config, device=device, dtype=dtype)
