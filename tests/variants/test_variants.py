"""Architecture variants of the ``TransformerLM``, checked against naive or torch references.

Parity against HF transformers lives in test_parity_hf.py; encoder-decoder in
test_encoder_decoder.py.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from ..adapters import run_accumulate_gradients
from .adapters import (
    get_variant_lm,
    run_feedforward,
    run_generate_variant,
    run_grouped_query_attention,
    run_layernorm,
    run_mixture_of_experts,
    run_multihead_latent_attention,
    run_transformer_lm_variant,
    run_transformer_lm_variant_cached,
    run_transformer_lm_variant_with_aux_loss,
    run_variant_accounting,
    run_variant_config_json_round_trip,
)

TINY = dict(vocab_size=61, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)

VARIANTS = {
    "mha": {},
    "gqa": dict(num_kv_heads=2),
    "mqa": dict(num_kv_heads=1),
    "qk_norm": dict(num_kv_heads=2, qk_norm=True),
    "mla": dict(
        attention="mla", kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5
    ),
    "mla_q_lora": dict(attention="mla", q_lora_rank=16, kv_lora_rank=12, qk_rope_head_dim=4),
    "moe": dict(ffn="moe", num_experts=4, top_k=2),
    "layernorm_learned_position_gelu": dict(
        norm="layernorm", position_encoding="learned", ffn="gelu", bias=True, tie_embeddings=True
    ),
    "sinusoidal_position_relu": dict(position_encoding="sinusoidal", ffn="relu"),
    "post_norm_layernorm": dict(norm_placement="post", norm="layernorm"),
    "nope_position": dict(position_encoding="none"),
}


def tiny_model(seed: int = 0, **overrides) -> torch.nn.Module:
    return get_variant_lm({**TINY, **overrides}, seed)


# --- KV cache: incremental decoding equals the full forward, for every decoder variant ------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kv_cache_matches_full_forward(variant: str) -> None:
    model = tiny_model(**VARIANTS[variant])
    ids = torch.randint(0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids)
    stepwise, _ = run_transformer_lm_variant_cached(model, ids, 5)
    torch.testing.assert_close(stepwise, full, atol=2e-5, rtol=1e-5)
    with torch.no_grad():  # outside the cached decoding the model is the plain function again
        torch.testing.assert_close(model(ids), full)


@pytest.mark.parametrize("variant", ["mha", "gqa", "mla", "moe"])
def test_kv_cache_greedy_generation_matches_uncached(variant: str) -> None:
    """``cs336 generate``'s decoding loop with and without the (latent) KV cache."""
    model = tiny_model(**VARIANTS[variant])
    cached = run_generate_variant(model, [3, 1, 4], 10, use_kv_cache=True)
    assert cached == run_generate_variant(model, [3, 1, 4], 10, use_kv_cache=False)
    assert len(cached) == 10


def test_kv_cache_generation_feeds_one_position_per_step() -> None:
    model = tiny_model(**VARIANTS["gqa"])
    seen: list[int] = []
    handle = model.token_embeddings.register_forward_hook(
        lambda m, args, out: seen.append(args[0].shape[-1])
    )
    try:
        run_generate_variant(model, [1, 2, 3, 4, 5], 6, use_kv_cache=True)
        cached_calls = list(seen)
        seen.clear()
        run_generate_variant(model, [1, 2, 3, 4, 5], 6, use_kv_cache=False)
    finally:
        handle.remove()
    assert cached_calls == [5, 1, 1, 1, 1, 1]
    assert seen == [5, 6, 7, 8, 9, 10]


@pytest.mark.parametrize(
    ("variant", "per_layer"),
    [("mha", 2 * 4 * 8), ("gqa", 2 * 2 * 8), ("mqa", 2 * 1 * 8), ("mla", 12 + 4)],
)
def test_kv_cache_bytes_per_token(variant: str, per_layer: int) -> None:
    config = {**TINY, **VARIANTS[variant]}
    accounting = run_variant_accounting(config, 3, 7)
    assert accounting["kv_cache_elements_per_token"] == 2 * per_layer
    _, cache_bytes = run_transformer_lm_variant_cached(
        tiny_model(**VARIANTS[variant]), torch.zeros(3, 7, dtype=torch.long), 7
    )
    assert cache_bytes == 3 * 7 * 2 * per_layer * 4 == accounting["kv_cache_bytes"]


# --- Components against torch.nn.functional or naive references -----------------------------


def test_layernorm_matches_torch() -> None:
    x = torch.randn(3, 5, 16) * 3 + 1
    weight, bias = torch.randn(16), torch.randn(16)
    expected = F.layer_norm(x, (16,), weight, bias, eps=1e-5)
    torch.testing.assert_close(
        run_layernorm(16, 1e-5, weight, bias, x), expected, atol=1e-5, rtol=1e-5
    )


def test_layernorm_keeps_bfloat16_dtype() -> None:
    x = torch.randn(4, 16).to(torch.bfloat16)
    out = run_layernorm(
        16, 1e-5, torch.ones(16, dtype=torch.bfloat16), torch.zeros(16, dtype=torch.bfloat16), x
    )
    assert out.dtype == torch.bfloat16


@pytest.mark.parametrize("activation", ["gelu", "relu", "silu"])
def test_feedforward_position_activations(activation: str) -> None:
    """The ungated MLPs (GELU for GPT-2 and the original Transformer's position-wise FFN)."""
    torch.manual_seed(0)
    x, w1, b1, w2, b2 = (
        torch.randn(2, 5, 8),
        torch.randn(12, 8),
        torch.randn(12),
        torch.randn(8, 12),
        torch.randn(8),
    )
    act = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}[activation]
    weights = {"w1.weight": w1, "w1.bias": b1, "w2.weight": w2, "w2.bias": b2}
    expected = F.linear(act(F.linear(x, w1, b1)), w2, b2)
    torch.testing.assert_close(
        run_feedforward(8, 12, activation, weights, x), expected, atol=1e-5, rtol=1e-5
    )


def naive_rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    d = x.shape[-1]
    angles = positions[..., None].double() * theta ** (
        -torch.arange(0, d, 2, dtype=torch.float64) / d
    )
    even, odd = x[..., 0::2].double(), x[..., 1::2].double()
    out = torch.empty_like(x, dtype=torch.float64)
    out[..., 0::2] = even * angles.cos() - odd * angles.sin()
    out[..., 1::2] = even * angles.sin() + odd * angles.cos()
    return out.float()


@pytest.mark.parametrize(
    ("num_kv_heads", "qk_norm"), [(2, False), (1, False), (4, False), (2, True)]
)
def test_gqa_attention_matches_torch_sdpa(num_kv_heads: int, qk_norm: bool) -> None:
    """GQA / MQA / MHA (+ qk_norm) against repeat_interleave'd keys and torch's SDPA."""
    torch.manual_seed(0)
    d_model, heads, d_head, seq = 32, 4, 8, 7
    x = torch.randn(2, seq, d_model)
    weights = {
        "q_proj.weight": torch.randn(d_model, d_model) * 0.3,
        "k_proj.weight": torch.randn(num_kv_heads * d_head, d_model) * 0.3,
        "v_proj.weight": torch.randn(num_kv_heads * d_head, d_model) * 0.3,
        "output_proj.weight": torch.randn(d_model, d_model) * 0.3,
    }
    if qk_norm:
        weights |= {"q_norm.weight": torch.randn(d_head), "k_norm.weight": torch.randn(d_head)}
    positions = torch.arange(seq) + 3

    q = (x @ weights["q_proj.weight"].T).view(2, seq, heads, d_head).transpose(1, 2)
    k = (x @ weights["k_proj.weight"].T).view(2, seq, num_kv_heads, d_head).transpose(1, 2)
    v = (x @ weights["v_proj.weight"].T).view(2, seq, num_kv_heads, d_head).transpose(1, 2)
    if qk_norm:
        q = F.rms_norm(q, (d_head,), weights["q_norm.weight"], eps=1e-5)
        k = F.rms_norm(k, (d_head,), weights["k_norm.weight"], eps=1e-5)
    q, k = naive_rope(q, positions, 1e4), naive_rope(k, positions, 1e4)
    group = heads // num_kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = attended.transpose(1, 2).reshape(2, seq, d_model) @ weights["output_proj.weight"].T

    actual = run_grouped_query_attention(
        d_model, heads, num_kv_heads, 16, 1e4, weights, x, positions, qk_norm=qk_norm
    )
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


MLA = dict(
    vocab_size=1,
    context_length=16,
    d_model=32,
    num_layers=1,
    num_heads=4,
    d_ff=1,
    attention="mla",
    q_lora_rank=16,
    kv_lora_rank=12,
    qk_rope_head_dim=4,
    qk_nope_head_dim=6,
    v_head_dim=5,
)


def mla_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights of every MLA projection (full query rank 16, latent rank 12)."""
    g = torch.Generator().manual_seed(seed)
    shapes = {
        "q_down_proj.weight": (16, 32),
        "q_norm.weight": (16,),
        "q_up_proj.weight": (4 * (6 + 4), 16),
        "kv_down_proj.weight": (12, 32),
        "kv_norm.weight": (12,),
        "k_rope_proj.weight": (4, 32),
        "k_up_proj.weight": (4 * 6, 12),
        "v_up_proj.weight": (4 * 5, 12),
        "output_proj.weight": (32, 4 * 5),
    }
    return {
        name: torch.randn(shape, generator=g) * (0.3 if len(shape) > 1 else 1.0)
        for name, shape in shapes.items()
    }


def test_mla_folded_latent_path_equals_expanded() -> None:
    """Caching only the latent and the shared RoPE key, with k_up folded into the queries and
    v_up into the output, computes the same attention as expanding keys and values."""
    weights, x = mla_weights(), torch.randn(2, 9, 32)
    positions = torch.arange(9) + 2
    plain = run_multihead_latent_attention(MLA, weights, x, positions)
    folded = run_multihead_latent_attention(MLA, weights, x, positions, use_latent_cache=True)
    torch.testing.assert_close(folded, plain, atol=1e-5, rtol=1e-5)


def test_mla_matches_naive_reference() -> None:
    """The expanded MLA path against a loop-over-heads reference written from the equations."""
    weights, x = mla_weights(1), torch.randn(1, 6, 32)
    positions = torch.arange(6)
    rms = lambda t, g: F.rms_norm(t, (t.shape[-1],), g, eps=1e-5)  # noqa: E731
    c_q = rms(x @ weights["q_down_proj.weight"].T, weights["q_norm.weight"])
    q_all = (c_q @ weights["q_up_proj.weight"].T).view(1, 6, 4, 10)
    c_kv = rms(x @ weights["kv_down_proj.weight"].T, weights["kv_norm.weight"])
    k_rope = naive_rope(x @ weights["k_rope_proj.weight"].T, positions, 1e4)
    k_nope = (c_kv @ weights["k_up_proj.weight"].T).view(1, 6, 4, 6)
    v = (c_kv @ weights["v_up_proj.weight"].T).view(1, 6, 4, 5)
    heads = []
    for h in range(4):
        q_h = torch.cat((q_all[..., h, :6], naive_rope(q_all[..., h, 6:], positions, 1e4)), -1)
        k_h = torch.cat((k_nope[..., h, :], k_rope), -1)
        heads.append(F.scaled_dot_product_attention(q_h, k_h, v[..., h, :], is_causal=True))
    expected = torch.cat(heads, -1) @ weights["output_proj.weight"].T
    torch.testing.assert_close(
        run_multihead_latent_attention(MLA, weights, x, positions), expected, atol=1e-5, rtol=1e-5
    )


def moe_weights(
    num_experts: int, d_model: int = 8, d_ff: int = 6, seed: int = 0
) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    weights = {"router.weight": torch.randn(num_experts, d_model, generator=g)}
    for e in range(num_experts):
        weights[f"experts.{e}.w1.weight"] = torch.randn(d_ff, d_model, generator=g) * 0.4
        weights[f"experts.{e}.w2.weight"] = torch.randn(d_model, d_ff, generator=g) * 0.4
        weights[f"experts.{e}.w3.weight"] = torch.randn(d_ff, d_model, generator=g) * 0.4
    return weights


def naive_moe(
    weights: dict,
    x: torch.Tensor,
    num_experts: int,
    top_k: int,
    normalize: bool,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per token: softmax probabilities or, with ``bias``, sigmoid scores chosen by score + bias."""
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        logits = weights["router.weight"] @ x[t]
        probs = torch.softmax(logits, dim=-1) if bias is None else torch.sigmoid(logits)
        rank = probs if bias is None else probs + bias
        chosen = sorted(range(num_experts), key=lambda e: -rank[e])[:top_k]
        total = sum(probs[e] for e in chosen) if normalize else 1.0
        for e in chosen:
            hidden = F.silu(weights[f"experts.{e}.w1.weight"] @ x[t]) * (
                weights[f"experts.{e}.w3.weight"] @ x[t]
            )
            out[t] += probs[e] / total * (weights[f"experts.{e}.w2.weight"] @ hidden)
    return out


@pytest.mark.parametrize(("top_k", "normalize"), [(1, False), (2, True), (3, False)])
def test_moe_matches_naive_routing(top_k: int, normalize: bool) -> None:
    """k = 1 (Switch), k = 2 (GShard) and any k, with and without top-k renormalisation."""
    weights, x = moe_weights(4), torch.randn(10, 8, generator=torch.Generator().manual_seed(1))
    output, _ = run_mixture_of_experts(8, 6, 4, top_k, weights, x, normalize_topk=normalize)
    expected = naive_moe(weights, x, 4, top_k, normalize)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_moe_load_balancing_loss_matches_switch_formula() -> None:
    weights, x = moe_weights(4), torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(2))
    _, aux = run_mixture_of_experts(8, 6, 4, 2, weights, x)
    probs = torch.softmax(x.reshape(10, 8) @ weights["router.weight"].T, dim=-1)
    top2 = probs.topk(2, dim=-1).indices
    fraction = torch.tensor([(top2 == e).any(dim=-1).float().mean() for e in range(4)])
    torch.testing.assert_close(aux, 4 * (fraction * probs.mean(dim=0)).sum())
    assert aux >= 2 - 1e-6  # its minimum, top_k, is reached only by perfectly balanced routing


@pytest.mark.parametrize("normalize", [True, False])
def test_moe_sigmoid_routing_bias_chooses_but_does_not_weigh(normalize: bool) -> None:
    """DeepSeek-V3: sigmoid scores; the correction bias picks the experts, the unbiased scores
    weigh them; the balancing loss uses the scores normalised per token."""
    weights, x = moe_weights(4), torch.randn(10, 8, generator=torch.Generator().manual_seed(4))
    bias = torch.tensor([0.5, -0.5, 0.0, 0.2])
    weights["score_correction_bias"] = bias
    output, aux = run_mixture_of_experts(
        8, 6, 4, 2, weights, x, normalize_topk=normalize, scoring="sigmoid"
    )
    expected = naive_moe(weights, x, 4, 2, normalize, bias=bias)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    unbiased = naive_moe(weights, x, 4, 2, normalize, bias=torch.zeros(4))
    assert (unbiased - expected).abs().max() > 1e-2  # the bias changes some choices here
    scores = torch.sigmoid(x @ weights["router.weight"].T)
    top2 = (scores + bias).topk(2, dim=-1).indices
    fraction = torch.tensor([(top2 == e).any(dim=-1).float().mean() for e in range(4)])
    probs = scores / scores.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(aux, 4 * (fraction * probs.mean(dim=0)).sum())


def test_moe_capacity_drops_overflow_tokens() -> None:
    """With every token preferring expert 0 and capacity ceil(0.5 * 8 * 1 / 2) = 2, only the
    first two tokens are processed; the rest get zero output (the residual carries them)."""
    weights = moe_weights(2)
    weights["router.weight"] = torch.tensor([[1.0] + [0.0] * 7, [-1.0] + [0.0] * 7])
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(3))
    x[:, 0] = x[:, 0].abs() + 0.1
    output, _ = run_mixture_of_experts(
        8, 6, 2, 1, weights, x, normalize_topk=False, capacity_factor=0.5
    )
    unlimited, _ = run_mixture_of_experts(8, 6, 2, 1, weights, x, normalize_topk=False)
    torch.testing.assert_close(output[:2], unlimited[:2])
    assert torch.count_nonzero(output[2:]) == 0 and torch.count_nonzero(unlimited[2:]) > 0


def test_moe_capacity_serves_first_choices_before_second_choices() -> None:
    """Top-2 with capacity 1 per expert: each expert keeps one first-choice assignment."""
    weights = moe_weights(2)
    weights["router.weight"] = torch.tensor([[1.0] + [0.0] * 7, [-1.0] + [0.0] * 7])
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(4))
    x[0, 0], x[1, 0] = -2.0, 2.0  # token 0 prefers expert 1, token 1 prefers expert 0
    output, _ = run_mixture_of_experts(
        8, 6, 2, 2, weights, x, normalize_topk=True, capacity_factor=0.5
    )
    # Only first choices survive; with two experts the renormalised weight is the raw probability.
    first_choices_only = naive_moe(weights, x, 2, 1, normalize=False)
    torch.testing.assert_close(output, first_choices_only, atol=1e-5, rtol=1e-5)


def test_moe_model_aux_loss_is_the_scaled_layer_loss_with_gradients() -> None:
    """One MoE layer whose attention output is zeroed, so its input is ln2(embeddings): the
    model's aux loss must be aux_loss_coef times the Switch loss of the layer on that input."""
    config = {
        **TINY,
        "num_layers": 1,
        **dict(ffn="moe", num_experts=4, top_k=2, aux_loss_coef=0.1),
    }
    weights = dict(tiny_model(**config).state_dict())
    weights["layers.0.attn.output_proj.weight"] = torch.zeros_like(
        weights["layers.0.attn.output_proj.weight"]
    )
    ids = torch.randint(0, TINY["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(6))
    _, aux_loss = run_transformer_lm_variant_with_aux_loss(config, weights, ids)
    ffn_input = F.rms_norm(
        weights["token_embeddings.weight"][ids],
        (TINY["d_model"],),
        weights["layers.0.ln2.weight"],
        eps=1e-5,
    )
    moe = {k.removeprefix("layers.0.ffn."): v for k, v in weights.items() if ".ffn." in k}
    _, layer_loss = run_mixture_of_experts(TINY["d_model"], TINY["d_ff"], 4, 2, moe, ffn_input)
    torch.testing.assert_close(aux_loss, 0.1 * layer_loss)
    assert aux_loss.requires_grad  # connected to the router weights, so training can use it
    _, dense_aux = run_transformer_lm_variant_with_aux_loss(TINY, tiny_model().state_dict(), ids)
    assert dense_aux == 0


def test_training_step_loss_adds_the_moe_aux_loss_to_the_cross_entropy() -> None:
    config = {**TINY, **dict(ffn="moe", num_experts=4, top_k=2, aux_loss_coef=0.5)}
    model = tiny_model(**config)
    ids = torch.randint(0, TINY["vocab_size"], (2, 9), generator=torch.Generator().manual_seed(7))
    inputs, targets = ids[:, :-1], ids[:, 1:]
    logits, aux_loss = run_transformer_lm_variant_with_aux_loss(config, model.state_dict(), inputs)
    cross_entropy = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    assert aux_loss.item() > 1e-3 * cross_entropy.item()  # large enough to be seen
    loss = run_accumulate_gradients(model, [(inputs, targets)])
    torch.testing.assert_close(
        loss.detach(),
        (cross_entropy + aux_loss).detach(),
        msg=lambda m: m + loss_terms_line(float(loss), float(cross_entropy), float(aux_loss)),
    )


def loss_terms_line(loss: float, cross_entropy: float, aux_loss: float) -> str:
    """Which of the training loss's two terms ``loss`` holds alone; ``""`` when neither."""
    for held, value, missing in (
        ("the cross-entropy", cross_entropy, "the model's auxiliary loss"),
        ("the auxiliary loss", aux_loss, "the cross-entropy"),
    ):
        if math.isclose(loss, value, rel_tol=1e-5):
            return (
                f"\ndiagnosis: your training loss {loss:.6g} is {held} alone: add {missing} "
                f"(the step's loss is {cross_entropy:.6g} + {aux_loss:.6g})"
            )
    return ""


def test_position_learned_embeddings_are_added_and_tied_head_is_shared() -> None:
    model = tiny_model(position_encoding="learned", tie_embeddings=True, norm_placement="none")
    state = model.state_dict()
    assert torch.equal(state["lm_head.weight"], state["token_embeddings.weight"])
    assert "position_embeddings.weight" in state
    ids = torch.randint(0, TINY["vocab_size"], (1, 5))
    with torch.no_grad():
        shifted = model(ids, token_positions=torch.arange(5) + 1)
        assert not torch.allclose(shifted, model(ids))


def test_post_norm_and_layernorm_state_dict_names() -> None:
    names = set(
        tiny_model(norm_placement="post", norm="layernorm", bias=True, ffn="gelu").state_dict()
    )
    assert {
        "layers.0.ln1.bias",
        "layers.0.ln2.weight",
        "layers.1.attn.q_proj.bias",
        "layers.1.ffn.w2.bias",
    } <= names
    assert not any(name.startswith("ln_final") for name in names)


def test_default_config_keeps_handout_state_dict_names_without_gqa_moe_mla() -> None:
    names = set(tiny_model().state_dict())
    expected = {"token_embeddings.weight", "ln_final.weight", "lm_head.weight"} | {
        f"layers.{i}.{n}.weight"
        for i in range(2)
        for n in (
            "attn.q_proj",
            "attn.k_proj",
            "attn.v_proj",
            "attn.output_proj",
            "ln1",
            "ffn.w1",
            "ffn.w2",
            "ffn.w3",
            "ln2",
        )
    }
    assert names == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(num_kv_heads=3), "multiple of num_kv_heads"),
        (dict(num_kv_heads=0), "num_kv_heads must be a positive integer"),
        (dict(ffn="moe", top_k=9), "top_k=9 cannot exceed num_experts=8"),
        (dict(ffn="moe", capacity_factor=0.0), "capacity_factor"),
        (dict(attention="mla", num_kv_heads=2), "attention='mla'"),
        (dict(attention="mla", position_encoding="learned"), "decoupled RoPE"),
        (dict(attention="mla", qk_rope_head_dim=3), "qk_rope_head_dim must be even"),
    ],
    ids=[
        "gqa_indivisible",
        "gqa_zero_kv_heads",
        "moe_top_k",
        "moe_capacity",
        "mla_with_gqa",
        "mla_needs_rope_position",
        "mla_odd_rope_dim",
    ],
)
def test_variant_config_validation(overrides: dict, message: str) -> None:
    """Impossible variant settings fail with a message naming the problem, before any weights."""
    ids = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        run_transformer_lm_variant({**TINY, **overrides}, {}, ids)


def test_mla_moe_config_json_round_trip() -> None:
    """A model rebuilt from the JSON of an MLA + MoE config loads the weights and agrees."""
    config = {**TINY, **VARIANTS["mla_q_lora"], "ffn": "moe", "capacity_factor": 1.25}
    model = tiny_model(**config)
    again = run_variant_config_json_round_trip(config)
    assert {k: v for k, v in again.items() if k in config} == config
    ids = torch.randint(0, TINY["vocab_size"], (2, 6), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        rebuilt = run_transformer_lm_variant(again, model.state_dict(), ids)
        torch.testing.assert_close(rebuilt, model(ids))


# --- Accounting of the variants ----------------------------------

ACCOUNTED = ["moe", "mla", "mla_q_lora"]


@pytest.mark.parametrize("variant", ACCOUNTED)
def test_moe_mla_accounting_parameters_match_model(variant: str) -> None:
    config = {**TINY, **VARIANTS[variant]}
    parameters = sum(p.numel() for p in tiny_model(**VARIANTS[variant]).parameters())
    assert sum(run_variant_accounting(config, 1, 1)["parameters"].values()) == parameters


@pytest.mark.parametrize("variant", ACCOUNTED)
def test_moe_mla_accounting_flops_match_flop_counter(variant: str) -> None:
    """MoE: router plus top_k experts per token; MLA: its expanded (training) path."""
    config = {**TINY, **VARIANTS[variant]}
    model = tiny_model(**VARIANTS[variant])
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, TINY["vocab_size"], (3, 10)))
    predicted = run_variant_accounting(config, 3, 10)["forward_flops"]
    assert sum(predicted.values()) == counter.get_total_flops()
    by_module = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    if config.get("ffn") == "moe":
        routers = [name for name in by_module if name.endswith(".ffn.router")]
        assert len(routers) == 2
        assert predicted["router"] == sum(by_module[name] for name in routers)


def test_kv_cache_accounting_bytes() -> None:
    mla = {**TINY, **VARIANTS["mla"]}
    accounting = run_variant_accounting(mla, batch_size=3, seq_len=5, bytes_per_value=2)
    assert accounting["kv_cache_bytes"] == 3 * 5 * 2 * (12 + 4) * 2


# --- the fused attention kernel: a speed option with the reference's math -------------------


@pytest.mark.parametrize("variant", ["mha", "gqa", "mqa", "qk_norm"])
def test_fused_attention_matches_reference_forward_backward_and_cache(variant: str) -> None:
    reference = tiny_model(**VARIANTS[variant])
    fused = tiny_model(**VARIANTS[variant], fused_attention=True)
    fused.load_state_dict(reference.state_dict())
    ids = torch.randint(0, TINY["vocab_size"], (3, TINY["context_length"]))
    targets = torch.randint(0, TINY["vocab_size"], ids.shape)
    losses = []
    for model in (reference, fused):
        logits = model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
        losses.append(logits)
    torch.testing.assert_close(losses[1], losses[0], atol=1e-5, rtol=1e-5)
    for (name, p_ref), p_fused in zip(
        reference.named_parameters(), fused.parameters(), strict=False
    ):
        torch.testing.assert_close(p_fused.grad, p_ref.grad, atol=1e-5, rtol=1e-4, msg=name)
    stepwise, _ = run_transformer_lm_variant_cached(fused, ids, 5)
    torch.testing.assert_close(stepwise, losses[0].detach(), atol=1e-5, rtol=1e-5)
