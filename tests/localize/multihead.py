"""Multi-head self-attention: its stages, each run alone on the reference's input, then probes
of the whole layer (the queries zeroed, positions repeated); and where it raised."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch

from tests.cases.shipped import Shipped
from tests.localize.stages import (
    composite_raised,
    first_off,
    first_probe_off,
    first_stage_wrong,
    heads_of,
    merge_heads,
    raises,
    stage_data,
    stage_line,
    tensor,
)
from tests.measure import rope_table_lines


def attention_call(adapters: ModuleType, s: Shipped, rope: bool, weights: dict, x, positions=None):
    d_model, heads = x.shape[-1], s.config["num_heads"]
    w = [weights[f"attn.{n}_proj.weight"] for n in ("q", "k", "v", "output")]
    if not rope:
        return adapters.run_multihead_self_attention(d_model, heads, *w, x)
    if positions is None:
        positions = torch.arange(x.shape[-2]).expand(x.shape[:-1])
    return adapters.run_multihead_self_attention_with_rope(
        d_model, heads, s.config["context_length"], s.config["rope_theta"], *w, x, positions
    )


def attention_stages(adapters: ModuleType, s: Shipped, rope: bool) -> list:
    name, heads = ("mhsa_rope" if rope else "mhsa"), s.config["num_heads"]
    w, x = s.layer(), s.inputs["in_embeddings"]
    d_model, seq = x.shape[-1], x.shape[-2]
    causal = torch.ones(seq, seq, dtype=torch.bool).tril()
    checks = [
        (
            f"the {n.upper()} projection (run_linear)",
            lambda n=n: adapters.run_linear(d_model, d_model, w[f"attn.{n}_proj.weight"], x),
            stage_data()[f"{name}.{n}"],
        )
        for n in ("q", "k", "v")
    ]
    if rope:
        positions = torch.arange(seq).expand(x.shape[0], 1, seq)
        checks += [
            (
                f"RoPE on the {n}s of each head (run_rope)",
                lambda n=n: adapters.run_rope(
                    d_model // heads,
                    s.config["rope_theta"],
                    s.config["context_length"],
                    heads_of(tensor(f"{name}.{n}"), heads),
                    positions,
                ),
                stage_data()[f"{name}.{n}_rope"],
            )
            for n in ("q", "k")
        ]
    checks += [
        (
            "the attention of each head: scores, causal mask, softmax, weighted values "
            "(run_scaled_dot_product_attention)",
            lambda: adapters.run_scaled_dot_product_attention(
                tensor(f"{name}.q_rope"),
                tensor(f"{name}.k_rope"),
                heads_of(tensor(f"{name}.v"), heads),
                causal,
            ),
            stage_data()[f"{name}.attended"],
        ),
        (
            "the output projection of the merged heads (run_linear)",
            lambda: adapters.run_linear(
                d_model,
                d_model,
                w["attn.output_proj.weight"],
                merge_heads(tensor(f"{name}.attended")),
            ),
            stage_data()[f"{name}.out"],
        ),
    ]
    return checks


def attention_probes(adapters: ModuleType, s: Shipped, rope: bool) -> list:
    """Probes of the student's attention whose reference outputs are known; with RoPE, every
    position is 0 (RoPE then rotates nothing), so they compare with attention without RoPE."""
    w, x = s.layer(), s.inputs["in_embeddings"]

    def run(weights: dict, inputs: torch.Tensor):
        zeros = torch.zeros(inputs.shape[:-1], dtype=torch.long)
        return lambda: attention_call(adapters, s, rope, weights, inputs, zeros)

    one = stage_data()["mhsa.out"][:, :1]
    repeated = x[:, :1].expand(x.shape).contiguous()
    zero_q = w | {"attn.q_proj.weight": torch.zeros_like(w["attn.q_proj.weight"])}
    return [
        (
            "on a single token (whose only weight is 1, on itself) your attention differs: the "
            "value projection, how heads are split and merged back, or the output projection",
            run(w, x[:, :1]),
            one,
        ),
        (
            "on a sequence of one token repeated (every query then averages equal values) your "
            "attention differs although one token alone is right: how the heads are merged back "
            "((batch, heads, seq, d_k) -> (batch, seq, heads * d_k): move the head axis next to "
            "d_k before reshaping)",
            run(w, repeated),
            np.broadcast_to(one, x.shape),
        ),
        (
            "with the queries zeroed (every query then averages the values it may see) your "
            "attention differs: the causal mask (position i sees keys 0..i, itself included)",
            run(zero_q, x),
            stage_data()["mhsa.zero_q"],
        ),
    ]


def localize_attention(adapters: ModuleType, rope: bool) -> list[str]:
    s = Shipped()
    off = first_off(attention_stages(adapters, s, rope))
    if off:
        return [stage_line(*off, "projections, RoPE, attention and output projection")]
    w, x = s.layer(), s.inputs["in_embeddings"]
    if rope:
        zeros = torch.zeros(x.shape[:-1], dtype=torch.long)
        unrotated = first_off(
            [("", lambda: attention_call(adapters, s, rope, w, x, zeros), stage_data()["mhsa.out"])]
        )
        if unrotated is None:
            return [
                "each of your sub-components is right alone, and with every position 0 (RoPE "
                "rotating nothing) so is your attention: how RoPE is applied inside it differs "
                "(to queries and keys, never values, per head, at the given positions)"
            ]
    off = first_probe_off(attention_probes(adapters, s, rope))
    if off and off[1].startswith("NaN"):
        return [
            "your attention gives NaN where a query may attend to no key: the causal mask must "
            "let position i see keys 0..i, itself included"
        ]
    if off:
        return [f"each of your sub-components is right alone, but {off[0]} ({off[1]})"]
    return [
        "each of your sub-components is right alone, and so are one token, a repeated token and "
        "zeroed queries: the scores differ: the queries and keys each head sees (head h owns "
        "features h*d_k..(h+1)*d_k-1 of each projection) or their 1/sqrt(d_k) scale"
    ]


# An LM small enough to build in a moment (no weights) whose RoPE tables, 12 positions by
# d_k / 2 = 8 or d_k = 16, share their shape with no other buffer of the handout's model.
ROPE_TABLE_LM = {"context_length": 12, "d_model": 32, "num_heads": 2, "d_ff": 64}


def rope_tables_in_state_dict(build: Callable[..., torch.nn.Module], s: Shipped) -> list[str]:
    """``measure.rope_table_lines`` for the LM ``build`` (``get_transformer_lm``) makes: the
    RoPE tables its state dict holds, which a strict load of the handout's weights refuses."""
    lm = ROPE_TABLE_LM
    model = build(
        vocab_size=s.config["vocab_size"],
        num_layers=s.config["num_layers"],
        rope_theta=s.config["rope_theta"],
        **lm,
    )
    d_k = lm["d_model"] // lm["num_heads"]
    return rope_table_lines(model.state_dict(), set(s.state_dict), lm["context_length"], d_k)


def attention_raised(adapters: ModuleType, rope: bool) -> list[str]:
    """Multi-head attention raised: its first stage that raises or is off alone; else, with
    RoPE, RoPE's tables in the state dict of a model holding it (loading the weights fails);
    else each stage is right alone, so the error is in how the layer builds or joins them."""
    s = Shipped()
    stages = attention_stages(adapters, s, rope)
    checked = f"projections, {'RoPE, ' * rope}attention and output projection"
    off = first_stage_wrong(stages)
    if off:
        return [stage_line(*off, checked)]
    build = getattr(adapters, "get_transformer_lm", None)
    if rope and callable(build):
        try:
            tables = rope_tables_in_state_dict(build, s)
        except Exception:  # noqa: BLE001  (student code, or an LM not written yet: nothing seen)
            tables = []
        if tables:
            return tables
    return composite_raised(stages, checked, "multi-head attention")


def default_positions_raised(attend_at_positions: Callable[[], object]) -> list[str]:
    """Attention with RoPE raised without ``token_positions``: does it run with them given?"""
    if raises(attend_at_positions, tries=1):
        return []
    return [
        "your attention with RoPE runs with token_positions given (0..seq-1) but raised "
        "without them: when token_positions is None, rotate by the positions 0..seq-1"
    ]
