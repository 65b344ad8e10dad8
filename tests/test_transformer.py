"""The Transformer block and LM: snapshots, the ablations, truncated inputs, state-dict
loading, and incremental decoding with the KV cache."""

from __future__ import annotations

import pytest
import torch

from .adapters import run_transformer_block, run_transformer_block_ablation, run_transformer_lm


def block_weights(state_dict: dict[str, torch.Tensor], layer: int = 0) -> dict[str, torch.Tensor]:
    prefix = f"layers.{layer}."
    return {k.removeprefix(prefix): v for k, v in state_dict.items() if k.startswith(prefix)}


def lm_args(config: dict) -> tuple:
    keys = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff", "rope_theta")
    return tuple(config[k] for k in keys)


def block_args(config: dict) -> tuple:
    return config["d_model"], config["num_heads"], config["d_ff"], config["context_length"], config["rope_theta"]


def test_transformer_block(snapshot, inputs, state_dict, model_config):
    out = run_transformer_block(*block_args(model_config), block_weights(state_dict), inputs["in_embeddings"])
    snapshot.assert_match(out, "transformer_block")


def test_transformer_lm(snapshot, inputs, state_dict, model_config):
    out = run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])
    snapshot.assert_match(out, "transformer_lm")


def test_transformer_lm_truncated_input(snapshot, inputs, state_dict, model_config):
    ids = inputs["in_indices"][:, : model_config["context_length"] // 4]
    snapshot.assert_match(run_transformer_lm(*lm_args(model_config), state_dict, ids), "transformer_lm_truncated")


def test_transformer_lm_prefix_logits_match_full_sequence(inputs, state_dict, model_config):
    ids = inputs["in_indices"]
    full = run_transformer_lm(*lm_args(model_config), state_dict, ids)
    for length in (1, 5, ids.shape[1]):
        prefix = run_transformer_lm(*lm_args(model_config), state_dict, ids[:, :length])
        torch.testing.assert_close(prefix, full[:, :length])


def test_transformer_lm_bfloat16(inputs, state_dict, model_config):
    bf16 = {k: v.bfloat16() for k, v in state_dict.items()}
    out = run_transformer_lm(*lm_args(model_config), bf16, inputs["in_indices"])
    assert out.dtype == torch.bfloat16
    reference = run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])
    # bfloat16 keeps ~3 significant digits; the argmax of the logits should rarely move.
    agreement = (out.float().argmax(-1) == reference.argmax(-1)).float().mean()
    assert agreement > 0.9


def test_transformer_lm_rejects_too_long_input(state_dict, model_config):
    ids = torch.zeros(1, model_config["context_length"] + 1, dtype=torch.long)
    with pytest.raises(ValueError, match="context_length"):
        run_transformer_lm(*lm_args(model_config), state_dict, ids)


@pytest.mark.parametrize("kind", ["missing", "unexpected", "shape"])
def test_transformer_lm_state_dict_errors_name_the_key(inputs, state_dict, model_config, kind):
    key = "layers.1.attn.k_proj.weight"
    if kind == "missing":
        del state_dict[key]
    elif kind == "unexpected":
        key = "layers.1.attn.bias"
        state_dict[key] = torch.zeros(1)
    else:
        state_dict[key] = state_dict[key][:, :-1]
    with pytest.raises(RuntimeError, match=key.replace(".", r"\.")):
        run_transformer_lm(*lm_args(model_config), state_dict, inputs["in_indices"])


# --- the handout's ablations --------------------------------------------------------------


def reference_block(x, w, *, norm, rope, ffn, config):
    """An independent float64 block for the ablations, built from torch.nn.functional."""
    import torch.nn.functional as F

    from course.cases_model import naive_attention

    d_model, heads, theta = config["d_model"], config["num_heads"], config["rope_theta"]
    attn_w = {k.removeprefix("attn."): v for k, v in w.items() if k.startswith("attn.")}
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)

    def attn(t):
        return naive_attention(t, attn_w, heads, positions, theta if rope else None)

    def feed_forward(t):
        w1, w2 = w["ffn.w1.weight"].double(), w["ffn.w2.weight"].double()
        hidden = F.silu(F.linear(t, w1))
        if ffn == "swiglu":
            hidden = hidden * F.linear(t, w["ffn.w3.weight"].double())
        return F.linear(hidden, w2)

    def ln(t, name):
        return F.rms_norm(t, (d_model,), w[name].double(), eps=1e-5)

    x = x.double()
    if norm == "pre":
        x = x + attn(ln(x, "ln1.weight"))
        return x + feed_forward(ln(x, "ln2.weight"))
    if norm == "post":
        x = ln(x + attn(x), "ln1.weight")
        return ln(x + feed_forward(x), "ln2.weight")
    x = x + attn(x)
    return x + feed_forward(x)


@pytest.mark.parametrize(
    "norm, rope, ffn",
    [("post", True, "swiglu"), ("none", True, "swiglu"), ("pre", False, "swiglu"), ("pre", True, "silu")],
    ids=["post_norm", "no_norm", "nope", "silu_ffn"],
)
def test_transformer_block_ablations(inputs, state_dict, model_config, norm, rope, ffn):
    pytest.importorskip("course", reason="the ablation reference lives in the instructor tooling")
    w = block_weights(state_dict)
    if norm == "none":
        w = {k: v for k, v in w.items() if not k.startswith("ln")}
    if ffn == "silu":
        del w["ffn.w3.weight"]
    x = inputs["in_embeddings"]
    out = run_transformer_block_ablation(
        *block_args(model_config), w, x, norm_placement=norm, position_encoding="rope" if rope else "none", ffn=ffn
    )
    expected = reference_block(x, w, norm=norm, rope=rope, ffn=ffn, config=model_config)
    torch.testing.assert_close(out.double(), expected, atol=1e-4, rtol=1e-4)
