"""The handout's ablations of the Transformer block (post-norm, no norm, NoPE, SiLU
feed-forward): ungraded experiments, built from the variant parts and checked against
snapshots computed by an independent float64 block."""

from __future__ import annotations

import pytest

from ..test_transformer import block_args, block_weights
from .adapters import run_transformer_block_ablation


@pytest.mark.parametrize(
    "name, switches, absent",
    [
        ("post_norm", dict(norm_placement="post"), ()),
        ("no_norm", dict(norm_placement="none"), ("ln1.weight", "ln2.weight")),
        ("nope", dict(position_encoding="none"), ()),
        ("silu_ffn", dict(ffn="silu"), ("ffn.w3.weight",)),
    ],
)
def test_ablations_of_the_block(snapshot, inputs, state_dict, model_config, name, switches, absent):
    """Each ablation against its snapshot, an independent float64 block built from
    ``torch.nn.functional`` (no norm and the SiLU feed-forward have no ln / w3 weights)."""
    w = {k: v for k, v in block_weights(state_dict).items() if k not in absent}
    out = run_transformer_block_ablation(
        *block_args(model_config), w, inputs["in_embeddings"], **switches
    )
    snapshot.assert_match(out, f"transformer_block_{name}")
