"""The Transformer block and LM, and SwiGLU: their stages, each run alone on the reference's
input, then probes of the whole (a sublayer's output weights zeroed, fewer layers, one token);
and where the LM raised."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

from tests.cases.core import Bundle
from tests.cases.shipped import Shipped
from tests.localize.multihead import attention_call
from tests.localize.stages import (
    RMS_EPS,
    composite_raised,
    first_off,
    first_probe_off,
    stage_data,
    stage_error,
    stage_line,
    tensor,
    to_array,
)


def block_args(s: Shipped) -> list:
    c = s.config
    return [c["d_model"], c["num_heads"], c["d_ff"], c["context_length"], c["rope_theta"]]


def block_stages(adapters: ModuleType, s: Shipped) -> list:
    w, x, d, d_ff = s.layer(), s.inputs["in_embeddings"], s.config["d_model"], s.config["d_ff"]
    ffn = [w[f"ffn.{n}.weight"] for n in ("w1", "w2", "w3")]
    return [
        (
            "ln1 (run_rmsnorm)",
            lambda: adapters.run_rmsnorm(d, RMS_EPS, w["ln1.weight"], x),
            stage_data()["block.ln1"],
        ),
        (
            "the attention on ln1's output (run_multihead_self_attention_with_rope)",
            lambda: attention_call(adapters, s, True, w, tensor("block.ln1")),
            stage_data()["block.attn"],
        ),
        (
            "ln2 (run_rmsnorm)",
            lambda: adapters.run_rmsnorm(d, RMS_EPS, w["ln2.weight"], tensor("block.h")),
            stage_data()["block.ln2"],
        ),
        (
            "the feed-forward on ln2's output (run_swiglu)",
            lambda: adapters.run_swiglu(d, d_ff, *ffn, tensor("block.ln2")),
            stage_data()["block.ffn"],
        ),
    ]


def zeroed(w: dict, *names: str) -> dict:
    return w | {n: torch.zeros_like(w[n]) for n in names}


def block_probes(adapters: ModuleType, s: Shipped) -> list:
    w, x = s.layer(), s.inputs["in_embeddings"]

    def run(weights: dict):
        return lambda: adapters.run_transformer_block(*block_args(s), weights, x)

    return [
        (
            "with both sublayers' outputs zeroed your block does not return its input: the "
            "residual stream must pass through unchanged (pre-norm: x + sublayer(norm(x)), no "
            "norm after the sum, the residual taken from x, not from norm(x))",
            run(zeroed(w, "attn.output_proj.weight", "ffn.w2.weight")),
            x.double().numpy(),
        ),
        (
            "with the feed-forward's output zeroed your block differs: the attention sublayer "
            "must be x + attn(ln1(x))",
            run(zeroed(w, "ffn.w2.weight")),
            stage_data()["block.h"],
        ),
        (
            "with the attention's output zeroed your block differs: the feed-forward sublayer "
            "must be h + ffn(ln2(h))",
            run(zeroed(w, "attn.output_proj.weight")),
            stage_data()["block.ffn_only"],
        ),
    ]


def stages_then_probes(stages: list, checked: str, probes: list) -> list[str] | None:
    """The first stage that is off, else the first probe that is off; ``None`` when neither."""
    off = first_off(stages)
    if off:
        return [stage_line(*off, checked)]
    off = first_probe_off(probes)
    if off:
        return [f"each of your sub-components is right alone, but {off[0]} ({off[1]})"]
    return None


BLOCK_STAGES = "ln1, attention, ln2 and feed-forward"
LM_STAGES = "embedding, each layer, final norm and LM head"


def localize_block(adapters: ModuleType) -> list[str]:
    s = Shipped()
    found = stages_then_probes(
        block_stages(adapters, s),
        BLOCK_STAGES,
        block_probes(adapters, s),
    )
    return (
        found
        if found is not None
        else [
            "each of your sub-components and each sublayer alone is right, so the sublayers are "
            "chained wrongly: the feed-forward takes h = x + attn(ln1(x)), not x"
        ]
    )


def lm_args(s: Shipped, layers: int) -> list:
    c = s.config
    keys = ("vocab_size", "context_length", "d_model")
    tail = ("num_heads", "d_ff", "rope_theta")
    return [*(c[k] for k in keys), layers, *(c[k] for k in tail)]


def lm_stages(adapters: ModuleType, s: Shipped) -> list:
    c, ids, state = s.config, s.inputs["in_indices"], s.state_dict
    checks = [
        (
            "the token embedding (run_embedding)",
            lambda: adapters.run_embedding(
                c["vocab_size"], c["d_model"], state["token_embeddings.weight"], ids
            ),
            stage_data()["lm.embedding"],
        )
    ]
    for i in range(c["num_layers"]):
        before = "lm.embedding" if i == 0 else f"lm.layer{i - 1}"
        checks.append(
            (
                f"layer {i} (run_transformer_block)",
                lambda i=i, before=before: adapters.run_transformer_block(
                    *block_args(s), s.layer(i), tensor(before)
                ),
                stage_data()[f"lm.layer{i}"],
            )
        )
    last = f"lm.layer{c['num_layers'] - 1}"
    checks += [
        (
            "the final norm (run_rmsnorm with ln_final)",
            lambda: adapters.run_rmsnorm(
                c["d_model"], RMS_EPS, state["ln_final.weight"], tensor(last)
            ),
            stage_data()["lm.final_norm"],
        ),
        (
            "the LM head (run_linear with lm_head)",
            lambda: adapters.run_linear(
                c["d_model"], c["vocab_size"], state["lm_head.weight"], tensor("lm.final_norm")
            ),
            stage_data()["lm.logits"],
        ),
    ]
    return checks


def lm_probes(adapters: ModuleType, s: Shipped) -> list:
    ids, layers = s.inputs["in_indices"], s.config["num_layers"]

    def truncated(k: int, *zero: str):
        weights = {
            n: v
            for n, v in s.state_dict.items()
            if not n.startswith("layers.") or int(n.split(".")[1]) < k
        }
        weights |= {f"layers.0.{n}": torch.zeros_like(weights[f"layers.0.{n}"]) for n in zero}
        return lambda: adapters.run_transformer_lm(*lm_args(s, k), weights, ids)

    probes = [
        (
            "with one layer whose sublayer outputs are zeroed (embedding, final norm and LM head "
            "alone) your LM differs: look at that path (the final norm, lm_head's own weights, "
            "not the embedding's, raw logits rather than probabilities)",
            truncated(1, "attn.output_proj.weight", "ffn.w2.weight"),
            stage_data()["lm.logits_0_layers"],
        )
    ]
    probes += [
        (
            f"with only its first {k} layer{'s' * (k > 1)} your LM differs: how the LM chains the "
            "blocks (each block's output is the next one's input, positions 0..seq-1, nothing "
            "added around the blocks)",
            truncated(k),
            stage_data()[f"lm.logits_{k}_layers"],
        )
        for k in range(1, layers)
    ]
    return probes


def localize_lm(adapters: ModuleType) -> list[str]:
    s = Shipped()
    return stages_then_probes(lm_stages(adapters, s), LM_STAGES, lm_probes(adapters, s)) or []


# --- SwiGLU ----------------------------------------------------------------------------------


def localize_swiglu(adapters: ModuleType, inputs: Bundle) -> list[str]:
    w1, w2, w3, x = (inputs[n] for n in ("w1", "w2", "w3", "x"))
    d_ff, d_model = w1.shape
    checks = [
        (
            "W1 x (run_linear)",
            lambda: adapters.run_linear(d_model, d_ff, w1, x),
            stage_data()["swiglu.w1x"],
        ),
        (
            "W3 x (run_linear)",
            lambda: adapters.run_linear(d_model, d_ff, w3, x),
            stage_data()["swiglu.w3x"],
        ),
        (
            "SiLU(W1 x) (run_silu)",
            lambda: adapters.run_silu(tensor("swiglu.w1x")) * tensor("swiglu.w3x"),
            stage_data()["swiglu.gated"],
        ),
    ]
    off = first_off(checks)
    if off:
        return [stage_line(*off, "W1 x, W3 x and SiLU")]
    return [
        "W1 x, W3 x and SiLU are right with your own adapters, so the gating differs: "
        "W2 (SiLU(W1 x) * W3 x), the SiLU on W1 x only, multiplied elementwise before W2"
    ]


def swiglu_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """SwiGLU raised: with square weights (d_ff = d_model), does it run, and is it right there,
    or does it gate after W2?"""
    w1, w2, w3, x = (inputs[n] for n in ("w1", "w2", "w3", "x"))
    d_ff, d_model = w1.shape
    if d_ff < d_model:
        return []
    square = w1[:d_model], w2[:, :d_model], w3[:d_model]
    try:
        out = adapters.run_swiglu(d_model, d_model, *square, x)
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    a, b, c = (to_array(w) for w in square)
    x64 = to_array(x)
    gate = x64 @ a.T
    silu = gate / (1 + np.exp(-gate))
    if not stage_error(out, (silu * (x64 @ c.T)) @ b.T):
        return [
            f"your SwiGLU runs with d_ff = d_model = {d_model} but raised with d_ff={d_ff}: "
            "somewhere d_ff and d_model are mixed up (W1 and W3 are (d_ff, d_model), W2 is "
            "(d_model, d_ff): Linear(d_ff, d_model) for W2)"
        ]
    if not stage_error(out, (silu @ b.T) * (x64 @ c.T)):
        return [
            f"with d_ff = d_model = {d_model} your SwiGLU runs and returns W2(SiLU(W1 x)) * W3 x: "
            "the gate multiplies before W2, W2(SiLU(W1 x) * W3 x), where both are d_ff wide"
        ]
    return []


def lm_build_lines(adapters: ModuleType, s: Shipped) -> list[str]:
    """The LM ``get_transformer_lm`` builds for the case's config without weights: whether
    building raises, how many layers it holds, and the first parameter whose shape differs from
    the handout's state dict (names the student's model does not share are left out)."""
    build, layers = getattr(adapters, "get_transformer_lm", None), s.config["num_layers"]
    if not callable(build):
        return []  # an adapters.py written for the course's own suite lacks it
    try:
        with torch.random.fork_rng():
            built = build(*lm_args(s, layers)).state_dict()
    except NotImplementedError:
        return []
    except Exception as raised:  # noqa: BLE001  (student code: any exception)
        return [
            f"your transformer_lm raised, and building your LM for this config without weights "
            f"(get_transformer_lm) raises {type(raised).__name__} too: the error is in the "
            "modules it constructs (the sizes each is given)"
        ]
    count = len({name.split(".")[1] for name in built if name.startswith("layers.")})
    if count and count != layers:
        return [
            f"your transformer_lm raised; the LM your get_transformer_lm builds for "
            f"num_layers={layers} holds {count} layers"
        ]
    for name, wanted in s.state_dict.items():
        got = built.get(name)
        if got is not None and tuple(got.shape) != tuple(wanted.shape):
            return [
                f"your transformer_lm raised; the LM your get_transformer_lm builds for this "
                f"config has {name} of shape {tuple(got.shape)}, not {tuple(wanted.shape)}"
            ]
    return []


def lm_raised(adapters: ModuleType) -> list[str]:
    """transformer_lm raised: the first stage that is off alone; else what the LM built for the
    config shows; else each stage is right alone (the error is in how the LM joins them)."""
    s = Shipped()
    stages = lm_stages(adapters, s)
    off = first_off(stages)
    if off:
        return [stage_line(*off, LM_STAGES)]
    return lm_build_lines(adapters, s) or composite_raised(stages, LM_STAGES, "transformer_lm")
