"""Scaled dot-product attention and causal multi-head self-attention (with and without RoPE)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from . import adapters
from .adapters import (
    run_multihead_self_attention,
    run_multihead_self_attention_with_rope,
    run_scaled_dot_product_attention,
)
from .expect import raises_an_error
from .hints import dtype_kept
from .localize import as_lines, diagnosed_if_raised, snapshot_located
from .localize.attention import localize_sdpa, sdpa_raised
from .localize.multihead import attention_raised, default_positions_raised, localize_attention

THETA, MAX_SEQ_LEN = 10000.0, 16


def attention_weights(state_dict: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    return [state_dict[f"layers.0.attn.{n}_proj.weight"] for n in ("q", "k", "v", "output")]


def test_scaled_dot_product_attention(snapshot, inputs):
    q, k, v, mask = (inputs[n] for n in ("q", "k", "v", "mask"))
    with diagnosed_if_raised(lambda: sdpa_raised(adapters, q, k, v, mask)):
        out = run_scaled_dot_product_attention(q, k, v, mask)
    snapshot_located(
        snapshot,
        out,
        "scaled_dot_product_attention",
        lambda: localize_sdpa(adapters, {"q": q, "k": k, "mask": mask}),
    )


def test_scaled_dot_product_attention_without_mask_and_with_extra_dims(inputs):
    q, k, v = (inputs[n].reshape(2, 2, *inputs[n].shape[1:]) for n in ("q", "k", "v"))
    torch.testing.assert_close(
        run_scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v)
    )


def test_scaled_dot_product_attention_with_fewer_keys_than_d_k(inputs):
    # 9 keys of width d_k = 16: a scale read off the wrong axis shows here (elsewhere both are 16).
    q, k, v = inputs["q"], inputs["k"][:, :9], inputs["v"][:, :9]
    out = run_scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(
        out,
        F.scaled_dot_product_attention(q, k, v),
        msg=lambda message: (
            message + as_lines(lambda: localize_sdpa(adapters, {"q": q, "k": k, "mask": None}))
        ),
    )


def test_scaled_dot_product_attention_broadcasts_a_2d_mask(inputs):
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    mask = inputs["mask"][0]  # (queries, keys), shared by the batch
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(run_scaled_dot_product_attention(q, k, v, mask), expected)


def test_multihead_self_attention(snapshot, inputs, state_dict, model_config):
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    with diagnosed_if_raised(lambda: attention_raised(adapters, rope=False)):
        out = run_multihead_self_attention(
            d_model, num_heads, *attention_weights(state_dict), inputs["in_embeddings"]
        )
    snapshot_located(
        snapshot, out, "multihead_self_attention", lambda: localize_attention(adapters, rope=False)
    )


def test_multihead_self_attention_with_rope(snapshot, inputs, state_dict, model_config):
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    x = inputs["in_embeddings"]
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    with diagnosed_if_raised(lambda: attention_raised(adapters, rope=True)):
        out = run_multihead_self_attention_with_rope(
            d_model, num_heads, MAX_SEQ_LEN, THETA, *attention_weights(state_dict), x, positions
        )
    snapshot_located(
        snapshot,
        out,
        "multihead_self_attention_with_rope",
        lambda: localize_attention(adapters, rope=True),
    )


@pytest.mark.robustness
def test_multihead_self_attention_with_rope_default_positions(inputs, state_dict, model_config):
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    x = inputs["in_embeddings"]
    weights = attention_weights(state_dict)
    explicit = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    args = (d_model, num_heads, MAX_SEQ_LEN, THETA, *weights, x)
    with diagnosed_if_raised(
        lambda: default_positions_raised(
            lambda: run_multihead_self_attention_with_rope(*args, explicit)
        )
    ):
        default = run_multihead_self_attention_with_rope(*args)
    torch.testing.assert_close(default, run_multihead_self_attention_with_rope(*args, explicit))


def test_multihead_self_attention_with_rope_uses_token_positions(inputs, state_dict, model_config):
    """RoPE makes attention depend on relative positions only: shifting every position by the
    same amount changes nothing, while other positions change the output."""
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    weights = attention_weights(state_dict)
    x = inputs["in_embeddings"][:, :8]

    def attend(positions: torch.Tensor) -> torch.Tensor:
        return run_multihead_self_attention_with_rope(
            d_model, num_heads, MAX_SEQ_LEN, THETA, *weights, x, positions.expand(x.shape[0], -1)
        )

    base = attend(torch.arange(8))
    torch.testing.assert_close(attend(torch.arange(8) + 5), base, atol=1e-5, rtol=1e-4)
    spread = attend(torch.tensor([0, 2, 3, 7, 8, 11, 12, 15]))
    assert not torch.allclose(spread, base, atol=1e-3), (
        "the output ignores token_positions: rotate queries and keys by the positions given"
    )


@pytest.mark.parametrize("rope", [False, True], ids=["plain", "rope"])
def test_multihead_self_attention_is_causal(inputs, state_dict, model_config, rope):
    """The output at position t must not change when tokens after t change."""
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    weights = attention_weights(state_dict)

    def attend(x: torch.Tensor) -> torch.Tensor:
        if rope:
            return run_multihead_self_attention_with_rope(
                d_model, num_heads, MAX_SEQ_LEN, THETA, *weights, x
            )
        return run_multihead_self_attention(d_model, num_heads, *weights, x)

    x = inputs["in_embeddings"]
    t = 5
    changed = x.clone()
    changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :])
    before, after = attend(x), attend(changed)
    torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1])
    assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


def test_multihead_self_attention_any_leading_dims(inputs, state_dict, model_config):
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    weights = attention_weights(state_dict)
    x = inputs["in_embeddings"]
    stacked = x.reshape(2, 2, *x.shape[1:])
    out = run_multihead_self_attention(d_model, num_heads, *weights, stacked)
    torch.testing.assert_close(
        out.reshape(x.shape), run_multihead_self_attention(d_model, num_heads, *weights, x)
    )


@pytest.mark.robustness
def test_multihead_self_attention_bfloat16(inputs, state_dict, model_config):
    d_model, num_heads = model_config["d_model"], model_config["num_heads"]
    weights = attention_weights(state_dict)
    x = inputs["in_embeddings"]
    out = run_multihead_self_attention(
        d_model, num_heads, *(w.bfloat16() for w in weights), x.bfloat16()
    )
    assert not dtype_kept(out, torch.bfloat16), dtype_kept(out, torch.bfloat16)
    reference = run_multihead_self_attention(d_model, num_heads, *weights, x)
    torch.testing.assert_close(out.float(), reference, atol=0.1, rtol=0.05)


@pytest.mark.robustness
def test_multihead_self_attention_rejects_indivisible_heads():
    weights = [torch.randn(10, 10) for _ in range(4)]
    with raises_an_error():
        run_multihead_self_attention(10, 3, *weights, torch.randn(1, 4, 10))
