"""The reference's intermediate outputs for the composite components' public inputs:
``fixtures/stages.npz`` (written by ``make fixtures``).

A failing ``transformer_lm``, ``transformer_block``, multi-head attention or SwiGLU case is
localized with them (``tests/localize/``): the student's own sub-components run, through their
adapters, on the reference's input to each stage, and the first stage whose output leaves the
reference's is named; probes (the student's composite with some weights zeroed, or fewer layers)
are compared with the reference's output for the same probe. Everything here is computed in
float64 from the handout's formulas with torch primitives, independently of ``cs336_basics``,
and checked against the composite snapshots before anything is written.
"""

from __future__ import annotations

import numpy as np
import torch

from course.cases.snapshot_case import FixtureData
from tests.snapshots import Snapshot

RMS_EPS = 1e-5
THETA = 10000.0


def rmsnorm(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * gain


def rope(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Interleaved pairs (x[2i], x[2i+1]) rotated by position * theta^(-2i/d)."""
    d = x.shape[-1]
    angles = positions[..., None].double() * THETA ** (-torch.arange(0, d, 2).double() / d)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def heads_of(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.reshape(*t.shape[:-1], heads, -1).transpose(-2, -3)


def attention_stages(w: dict, x: torch.Tensor, heads: int, positions) -> dict[str, torch.Tensor]:
    """Projections, RoPE'd queries and keys, attended heads and the output."""
    q, k, v = (x @ w[f"attn.{n}_proj.weight"].T for n in ("q", "k", "v"))
    qh, kh, vh = (heads_of(t, heads) for t in (q, k, v))
    if positions is not None:
        qh, kh = rope(qh, positions[..., None, :]), rope(kh, positions[..., None, :])
    seq = x.shape[-2]
    scores = qh @ kh.transpose(-1, -2) / qh.shape[-1] ** 0.5
    scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    attended = torch.softmax(scores, -1) @ vh
    merged = attended.transpose(-2, -3).flatten(-2)
    out = merged @ w["attn.output_proj.weight"].T
    return {"q": q, "k": k, "v": v, "q_rope": qh, "k_rope": kh, "attended": attended, "out": out}


def swiglu(w: dict, x: torch.Tensor) -> torch.Tensor:
    a, b = x @ w["ffn.w1.weight"].T, x @ w["ffn.w3.weight"].T
    return (a * torch.sigmoid(a) * b) @ w["ffn.w2.weight"].T


def block(w: dict, x: torch.Tensor, heads: int, positions) -> dict[str, torch.Tensor]:
    ln1 = rmsnorm(x, w["ln1.weight"])
    attn = attention_stages(w, ln1, heads, positions)["out"]
    h = x + attn
    ln2 = rmsnorm(h, w["ln2.weight"])
    ffn = swiglu(w, ln2)
    ffn_only = x + swiglu(w, rmsnorm(x, w["ln2.weight"]))
    return {
        "ln1": ln1,
        "attn": attn,
        "h": h,
        "ln2": ln2,
        "ffn": ffn,
        "out": h + ffn,
        "ffn_only": ffn_only,
    }


def layer(state: dict, i: int) -> dict:
    prefix = f"layers.{i}."
    return {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}


def stage_arrays(data: FixtureData) -> dict[str, np.ndarray]:
    config = data.config
    state = {k: v.double() for k, v in data.state_dict.items()}
    heads, layers = config.num_heads, config.num_layers
    x = data.inputs["in_embeddings"].double()
    positions = torch.arange(x.shape[-2]).expand(x.shape[:-1])
    out: dict[str, torch.Tensor] = {}
    w0 = layer(state, 0)
    for name, pos in (("mhsa", None), ("mhsa_rope", positions)):
        stages = attention_stages(w0, x, heads, pos)
        out |= {f"{name}.{k}": v for k, v in stages.items()}
        zero_q = w0 | {"attn.q_proj.weight": torch.zeros_like(w0["attn.q_proj.weight"])}
        out[f"{name}.zero_q"] = attention_stages(zero_q, x, heads, pos)["out"]
    out |= {f"block.{k}": v for k, v in block(w0, x, heads, positions).items()}
    out["swiglu.w1x"] = x @ w0["ffn.w1.weight"].T
    out["swiglu.w3x"] = x @ w0["ffn.w3.weight"].T
    out["swiglu.gated"] = torch.nn.functional.silu(out["swiglu.w1x"]) * out["swiglu.w3x"]
    ids = data.inputs["in_indices"]
    ids_positions = torch.arange(ids.shape[-1]).expand(ids.shape)
    hidden = state["token_embeddings.weight"][ids]
    out["lm.embedding"] = hidden
    for i in range(layers):
        head = state["lm_head.weight"]
        out[f"lm.logits_{i}_layers"] = rmsnorm(hidden, state["ln_final.weight"]) @ head.T
        hidden = block(layer(state, i), hidden, heads, ids_positions)["out"]
        out[f"lm.layer{i}"] = hidden
    out["lm.final_norm"] = rmsnorm(hidden, state["ln_final.weight"])
    out["lm.logits"] = out["lm.final_norm"] @ state["lm_head.weight"].T
    cross_check(out)
    return {k: v.numpy() for k, v in sorted(out.items())}


# Each stage output that is also a composite snapshot's expected value must agree with it.
SNAPSHOT_OF = {
    "mhsa.out": "multihead_self_attention",
    "mhsa_rope.out": "multihead_self_attention_with_rope",
    "block.out": "transformer_block",
    "lm.logits": "transformer_lm",
}


def cross_check(stages: dict[str, torch.Tensor]) -> None:
    for key, name in SNAPSHOT_OF.items():
        snap = Snapshot.load(name)
        error = float(np.abs(stages[key].numpy() - snap.expected).max())
        if error > snap.atol:
            raise RuntimeError(f"stage {key} disagrees with snapshot {name} ({error:.3e})")
