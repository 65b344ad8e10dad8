"""Mixture-of-experts weights as checkpoint files store them, and as ``transformers`` holds them.

``transformers`` 5.x keeps each MoE layer's experts stacked in memory
(``mlp.experts.gate_up_proj``: ``(experts, 2 * d_ff, d_model)``, gate rows first;
``mlp.experts.down_proj``: ``(experts, d_model, d_ff)``), which is what ``convert`` reads and
writes. Published checkpoints, and what ``transformers``' ``save_pretrained`` writes, keep one
tensor per expert and projection:

- Mixtral: ``model.layers.N.block_sparse_moe.gate.weight`` and
  ``block_sparse_moe.experts.E.{w1,w3,w2}.weight`` (gate, up, down);
- Qwen3-MoE, DeepSeek-V2/V3: ``mlp.gate.weight`` and
  ``mlp.experts.E.{gate_proj,up_proj,down_proj}.weight`` (DeepSeek's ``mlp.shared_experts.*`` and
  ``mlp.gate.e_score_correction_bias`` keep their names).

``unstack_experts`` turns the in-memory layout into the file layout, ``stack_experts`` back.
"""

from __future__ import annotations

import re
from collections import defaultdict

import torch
from torch import Tensor

# family -> (the MoE block's name in files, its gate, up and down projection names)
_FILE_NAMES = {"mixtral": ("block_sparse_moe", ("w1", "w3", "w2"))}
_DEFAULT_NAMES = ("mlp", ("gate_proj", "up_proj", "down_proj"))
_PER_EXPERT = re.compile(r"(.+)\.(?:mlp|block_sparse_moe)\.experts\.(\d+)\.(\w+)\.weight")


def is_stacked(weights: dict[str, Tensor]) -> bool:
    """Whether ``weights`` hold their experts in the stacked in-memory layout."""
    return any(name.endswith(".experts.gate_up_proj") for name in weights)


def unstack_experts(weights: dict[str, Tensor], family: str) -> dict[str, Tensor]:
    """The in-memory (stacked) HF state dict of ``family`` in its per-expert file layout."""
    block, (gate, up, down) = _FILE_NAMES.get(family, _DEFAULT_NAMES)
    files: dict[str, Tensor] = {}
    for name, tensor in weights.items():
        layer, moe, rest = name.partition(".mlp.")
        if not moe or family != "mixtral" and not rest.startswith("experts."):
            files[name] = tensor  # only Mixtral renames its router; dense MLPs stay "mlp."
        elif rest == "experts.gate_up_proj":
            gates, ups = tensor.chunk(2, dim=1)
            for expert, (g, u) in enumerate(zip(gates, ups, strict=True)):
                files[f"{layer}.{block}.experts.{expert}.{gate}.weight"] = g
                files[f"{layer}.{block}.experts.{expert}.{up}.weight"] = u
        elif rest == "experts.down_proj":
            for expert, d in enumerate(tensor):
                files[f"{layer}.{block}.experts.{expert}.{down}.weight"] = d
        else:
            files[f"{layer}.{block}.{rest}"] = tensor
    return files


def stack_experts(files: dict[str, Tensor], family: str) -> dict[str, Tensor]:
    """Inverse of ``unstack_experts``: per-expert file tensors stacked as ``transformers`` holds
    them. Every expert of a layer must be present (``checkpoint`` checks that first)."""
    block, (gate, up, down) = _FILE_NAMES.get(family, _DEFAULT_NAMES)
    experts: dict[str, dict[int, dict[str, Tensor]]] = defaultdict(lambda: defaultdict(dict))
    weights: dict[str, Tensor] = {}
    for name, tensor in files.items():
        match = _PER_EXPERT.fullmatch(name)
        if match:
            layer, expert, projection = match.groups()
            experts[layer][int(expert)][projection] = tensor
        else:
            weights[name.replace(f".{block}.", ".mlp.")] = tensor
    for layer, by_expert in experts.items():
        ordered = [by_expert[e] for e in range(len(by_expert))]
        weights[f"{layer}.mlp.experts.gate_up_proj"] = torch.stack(
            [torch.cat((e[gate], e[up])) for e in ordered]
        )
        weights[f"{layer}.mlp.experts.down_proj"] = torch.stack([e[down] for e in ordered])
    return weights
