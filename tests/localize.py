"""Where a failing graded case goes wrong, measured with the student's own code (``diagnosis:``
lines after a public case's failure; ``tests/test_cases.py`` calls :func:`localize`).

- Composite components (``transformer_lm``, ``transformer_block``, multi-head attention,
  SwiGLU): the student's sub-components run, through their adapters, on the reference's input to
  each stage (``fixtures/stages.npz``, written by ``make fixtures``), and the first stage whose
  output leaves the reference's is named. When every stage is right alone, probes of the
  student's composite (a sublayer's output weights zeroed, the queries zeroed, fewer layers, one
  token) name the connection that is wrong.
- Attention weights, read off the student's attention with the identity as values: do rows sum
  to 1, are masked positions exactly 0, and which scale do the scores carry?
- Cross-entropy: does the loss change when the batch or the sequence is repeated (a sum, or a
  mean over the wrong axes), or when a constant is added to a row of logits? Is it right where
  the answer is known in closed form (uniform logits, the target's or another logit raised)?

Each diagnosis prints only what it measured, and only when the measurement holds; a probe whose
own call fails (an adapter not written yet) says nothing. ``course/tests/test_localize.py`` feeds
each one right answers it must stay silent on.
"""

from __future__ import annotations

import copy
import io
import itertools
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import regex
import torch

from tests.cases.core import Bundle
from tests.cases.optim import adamw_formula
from tests.cases.shipped import END_OF_TEXT, Shipped
from tests.cases.tokenizers import build_tokenizer
from tests.cases.training import CHECKPOINT_LR, optimizer_for, small_model, train
from tests.common import FIXTURES_PATH
from tests.measure import (
    adamw_steps,
    bpe_training_lines,
    clipping_norms,
    largest,
    rmsnorm_axis,
    rope_positions,
    run_starts,
    schedule_phases,
    silu_ratio,
    softmax_rows,
    window_layout,
    window_lines,
)
from tests.snapshots import Snapshot

STAGES = FIXTURES_PATH / "stages.npz"
# A stage is off when it differs from the reference's float64 output by more than this share of
# the output's scale: float32 code that is right is about a hundred times closer.
STAGE_RTOL = 1e-4
RMS_EPS = 1e-5


@cache
def stage_data() -> dict[str, np.ndarray]:
    if not STAGES.is_file():
        return {}
    with np.load(STAGES, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def to_array(value: object) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).numpy()
    return np.asarray(value, dtype=np.float64)


def stage_error(actual: object, expected: np.ndarray) -> str:
    """``""`` when ``actual`` matches ``expected``; else how far off it is."""
    got = to_array(actual)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if not np.isfinite(got).all():
        return "NaN or inf in the output"
    error = np.abs(got - expected)
    tolerance = STAGE_RTOL * max(float(np.abs(expected).max(initial=0.0)), 1e-6)
    if error.max(initial=0.0) <= tolerance:
        return ""
    return f"max abs error {error.max():.3g}, {np.count_nonzero(error > tolerance)} of {error.size} values off"


def first_off(checks: list[tuple[str, Callable[[], object], np.ndarray]]) -> tuple[str, str] | None:
    """The first ``(stage, error)`` whose output is off; ``None`` when all match or a stage's
    call fails (nothing measured there, so nothing to say)."""
    for stage, run, expected in checks:
        try:
            error = stage_error(run(), expected)
        except Exception:  # noqa: BLE001  (an unfinished adapter: no evidence either way)
            return None
        if error:
            return stage, error
    return None


def first_probe_off(
    probes: list[tuple[str, Callable[[], object], np.ndarray]],
) -> tuple[str, str] | None:
    """Like :func:`first_off`, but a probe whose call fails is skipped (the code may refuse an
    unusual configuration; the other probes still measure something)."""
    for probe in probes:
        found = first_off([probe])
        if found:
            return found
    return None


def heads_of(t: torch.Tensor, heads: int) -> torch.Tensor:
    return t.reshape(*t.shape[:-1], heads, -1).transpose(-2, -3)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-2, -3).flatten(-2)


def tensor(name: str) -> torch.Tensor:
    return torch.from_numpy(stage_data()[name]).float()


def stage_line(stage: str, error: str, checked: str) -> str:
    return (
        f"the first stage whose output leaves the reference's is {stage} ({error}); {checked} "
        "were computed with your own adapters on the reference's input to each stage"
    )


# --- multi-head self-attention ----------------------------------------------------------------


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


# --- the Transformer block and LM ------------------------------------------------------------


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


# --- scaled dot-product attention: the weights themselves -------------------------------------


def attention_weights(adapters: ModuleType, q: torch.Tensor, k: torch.Tensor, mask) -> torch.Tensor:
    """The student's attention weights: the output for the identity as values (padded with
    zero columns, so the values' width differs from d_k and from the number of keys)."""
    keys = k.shape[-2]
    values = torch.zeros(*k.shape[:-1], keys + 8, dtype=q.dtype)
    values[..., :keys] = torch.eye(keys, dtype=q.dtype)
    return adapters.run_scaled_dot_product_attention(q, k, values, mask)[..., :keys].double()


def named_scale(scale: float, d_k: int, d_v: int) -> str:
    for label, value in (
        ("1/sqrt(d_k)", d_k**-0.5),
        ("1/d_k", 1 / d_k),
        ("1 (no scaling)", 1.0),
        ("1/sqrt(d_v), the values' width", d_v**-0.5),
        ("sqrt(d_k)", d_k**0.5),
    ):
        if math.isclose(scale, value, rel_tol=2e-2):
            return label
    return ""


def weights_hints(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, mask) -> list[str]:
    """Rows sum to 1, masked positions are 0, and scores carry 1/sqrt(d_k)."""
    allowed = (
        torch.ones(weights.shape, dtype=torch.bool) if mask is None else mask.expand(weights.shape)
    )
    sums, across = weights.sum(-1), weights.sum(-2)
    if not torch.isfinite(weights).all():
        return []
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        if torch.allclose(across, torch.ones_like(across), atol=1e-4):
            return [
                "your attention weights sum to 1 over the queries, not over the keys: take the softmax over the last dimension"
            ]
        return [
            f"the rows of your attention weights sum to between {float(sums.min()):.4g} and "
            f"{float(sums.max()):.4g}, not 1 (read off with the identity as values): normalize "
            "after masking, e.g. fill masked scores with -inf before the softmax rather than "
            "zeroing weights after it"
        ]
    leaked = largest(weights[~allowed])
    if leaked > 1e-6:
        inverted = largest(weights[allowed]) < 1e-6
        return [
            "your attention gives weight only to the masked positions: True in the mask means "
            '"may attend"'
            if inverted
            else f"masked positions get attention weight up to {leaked:.3g}, not exactly 0: fill "
            "masked scores with -inf before the softmax (a score of 0 is an ordinary score)"
        ]
    scores = q.double() @ k.double().transpose(-1, -2)
    logs = weights.clamp_min(1e-300).log()
    usable = allowed & (weights > 1e-12)
    # Within a row, log w_j - mean = c (s_j - mean): fit c over every usable entry.
    centred_s = torch.where(usable, scores, 0) - (
        torch.where(usable, scores, 0).sum(-1, keepdim=True)
        / usable.sum(-1, keepdim=True).clamp_min(1)
    )
    centred_l = torch.where(usable, logs, 0) - (
        torch.where(usable, logs, 0).sum(-1, keepdim=True)
        / usable.sum(-1, keepdim=True).clamp_min(1)
    )
    centred_s, centred_l = centred_s[usable], centred_l[usable]
    denominator = float((centred_s * centred_s).sum())
    if denominator == 0:
        return []
    scale = float((centred_s * centred_l).sum()) / denominator
    residual = largest(centred_l - scale * centred_s)
    d_k = q.shape[-1]
    if residual > 1e-3 * max(1.0, float(centred_l.abs().max())) or math.isclose(
        scale, d_k**-0.5, rel_tol=2e-3
    ):
        return []
    name = named_scale(scale, d_k, k.shape[-2] + 8)
    return [
        f"your attention weights are the softmax of the scores q.k times {scale:.4g}"
        + (f" = {name}" if name else "")
        + f", not times 1/sqrt(d_k) = {d_k**-0.5:.4g}"
    ]


def localize_sdpa(adapters: ModuleType, inputs: Bundle) -> list[str]:
    q, k = inputs["q"], inputs["k"]
    mask = inputs.get("mask")
    try:
        weights = attention_weights(adapters, q, k, mask)
    except Exception:  # noqa: BLE001  (nothing measured)
        return []
    hints = weights_hints(weights, q, k, mask)
    if hints or not torch.isfinite(weights).all():
        return hints
    off = weights_not_softmax(weights, q, k, mask)
    if off:
        return [off]
    return [
        "your attention weights are right (rows sum to 1, masked positions 0, scores scaled by "
        "1/sqrt(d_k)), so the weighted sum of the values differs: weights @ V"
    ]


# --- cross-entropy --------------------------------------------------------------------------


def closed_form_lines(adapters: ModuleType, vocab: int, rows: int) -> list[str]:
    """Losses known in closed form, on ``rows`` rows over ``vocab`` classes: uniform logits
    (log(vocab)), the target's logit or another logit raised by 10."""
    targets = torch.arange(rows) % vocab
    uniform = torch.zeros(rows, vocab)
    spread = math.log(math.exp(10.0) + vocab - 1)
    probes = [
        ("uniform logits (all 0)", uniform, math.log(vocab)),
        (
            "the target's logit 10 above the others",
            uniform.scatter(1, targets[:, None], 10.0),
            spread - 10,
        ),
        (
            "another logit 10 above the target's",
            uniform.scatter(1, (targets[:, None] + 1) % vocab, 10.0),
            spread,
        ),
    ]
    for described, logits, wanted in probes:
        got = float(adapters.run_cross_entropy(logits, targets))
        if not math.isclose(got, wanted, rel_tol=1e-4, abs_tol=1e-5):
            return [
                f"with {described} ({rows} rows, {vocab} classes) your loss is {got:.6g}, not "
                f"{wanted:.6g}: the log of the sum of a row's exps, minus its target's logit"
            ]
    return []


def localize_cross_entropy(adapters: ModuleType, inputs: Bundle) -> list[str]:
    logits, targets = inputs["logits"], inputs["targets"]

    def loss(x: torch.Tensor, t: torch.Tensor) -> float:
        return float(adapters.run_cross_entropy(x, t))

    try:
        base = loss(logits, targets)
        hints = []
        for axis in range(logits.dim() - 1):
            doubled = loss(torch.cat([logits, logits], axis), torch.cat([targets, targets], axis))
            if not math.isclose(doubled, base, rel_tol=1e-4, abs_tol=1e-6):
                what = "batch" if axis == 0 else "sequence"
                hints.append(
                    f"repeating the {what} (axis {axis}) changes your loss from {base:.6g} to "
                    f"{doubled:.6g}: the loss must be the mean over every leading axis, not a "
                    "sum or a mean over some of them"
                )
        hints += closed_form_lines(adapters, logits.shape[-1], logits.shape[0])
        shifted = loss(
            logits + 50.0 * torch.arange(logits.shape[-2]).reshape(-1, 1).expand(logits.shape),
            targets,
        )
    except Exception:  # noqa: BLE001  (nothing measured)
        return []
    if not math.isclose(shifted, base, rel_tol=1e-4, abs_tol=1e-5):
        hints.append(
            f"adding a constant to every logit of a row changes your loss ({base:.6g} to "
            f"{shifted:.6g}), which log-softmax must not do: subtract the row's max from every "
            "logit, the target's included, before exp"
        )
    return hints[:1]


# --- resource accounting, checkpoints and the training loop -----------------------------------
# A count is probed on one small shape, one hyperparameter changed at a time, and what each change
# adds is compared with what the handout's terms add for it. Counts are integers, so the
# comparison is exact; the shape is small, so a count that builds the model or runs a FLOP
# counter stays cheap.

ACCOUNTING_SHAPE = dict(
    vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48
)
FLOP_BATCH = 3
FLOP_SEQS = (4, 8, 12, 16)  # the per-layer count as a polynomial in seq: 3 points fit, 1 checks
FLOP_SIZES = f"batch={FLOP_BATCH}, seq={FLOP_SEQS[1]}, d_model={ACCOUNTING_SHAPE['d_model']}"


def exact(count: object) -> Fraction:
    """A returned count as an exact number (an int, a float or a 0-d array or tensor)."""
    value = count.item() if hasattr(count, "item") else count
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a count must be a number, got {type(value).__name__}")
    return Fraction(value)


def shown(value: Fraction) -> str:
    return f"{value.numerator:,}" if value.denominator == 1 else f"{float(value):,.6g}"


Term = tuple[Callable[[], Fraction], int, str]


def first_term_off(terms: list[Term]) -> list[str]:
    """The first term whose measured share differs from the handout's, as ``[line]`` (the line's
    ``{got}`` and ``{want}`` filled in); a probe whose call fails is skipped."""
    for measure, want, line in terms:
        try:
            got = measure()
        except Exception:  # noqa: BLE001  (the count refuses that shape: nothing measured)
            continue
        if got != want:
            return [line.format(got=shown(got), want=f"{want:,}")]
    return []


def parameter_terms(count: Callable[..., object]) -> list[str]:
    """Which term of the parameter count differs: the vocab_size terms, the feed-forward, the
    rest of a layer, the final norm (``count`` takes ``run_count_parameters``' arguments)."""
    s = ACCOUNTING_SHAPE
    d, layers, d_ff, vocab = s["d_model"], s["num_layers"], s["d_ff"], s["vocab_size"]

    def at(**changed: int) -> Fraction:
        return exact(count(**(s | changed)))

    def rest_of_layer(width: int) -> Fraction:  # one more layer, less the handout's feed-forward
        return at(d_model=width, num_layers=layers + 1) - at(d_model=width) - 3 * width * d_ff

    layer = 4 * d * d + 3 * d * d_ff + 2 * d
    return first_term_off(
        [
            (
                lambda: at(vocab_size=vocab + 1) - at(),
                2 * d,
                "your count grows by {got} per vocab entry, the handout's by 2 d_model = {want}: "
                "the token embeddings and the LM head (vocab_size x d_model each, not shared)",
            ),
            (
                lambda: at(d_ff=d_ff + 1) - at(),
                3 * d * layers,
                "your count grows by {got} per unit of d_ff, the handout's by 3 d_model "
                "num_layers = {want}: the feed-forward (w1, w2, w3, d_model x d_ff each, per layer)",
            ),
            (
                lambda: rest_of_layer(d),
                4 * d * d + 2 * d,
                "besides the feed-forward, each layer adds {got} parameters to your count, the "
                "handout's 4 d_model^2 + 2 d_model = {want}: the Q, K, V and output projections "
                f"(d_model x d_model each) and ln1, ln2 (d_model each), at d_model={d}",
            ),
            (
                lambda: (
                    at(num_heads=2 * s["num_heads"], context_length=2 * s["context_length"]) - at()
                ),
                0,
                "your count changes by {got} when num_heads and context_length double, the "
                "handout's by {want}: the projections are d_model x d_model whatever the heads, "
                "and RoPE has no parameters",
            ),
            (
                lambda: at() - layers * layer - 2 * vocab * d,
                d,
                "besides the layers and the vocab_size terms your count holds {got}, the "
                "handout's d_model = {want}: the final norm's gain (ln_final)",
            ),
        ]
    )


def seq_polynomial(values: list[Fraction]) -> tuple[Fraction, Fraction, Fraction]:
    """``(c2, c1, c0)`` with ``values[i] = c2 T^2 + c1 T + c0`` at ``T = FLOP_SEQS[i]``, fitted on
    the first three points; ``ValueError`` when the last does not lie on it (nothing to name)."""
    (t0, t1, t2, t3), (v0, v1, v2, v3) = FLOP_SEQS, values
    slope01, slope12 = (v1 - v0) / (t1 - t0), (v2 - v1) / (t2 - t1)
    c2 = (slope12 - slope01) / (t2 - t0)
    c1 = slope01 - c2 * (t0 + t1)
    c0 = v0 - c2 * t0 * t0 - c1 * t0
    if c2 * t3 * t3 + c1 * t3 + c0 != v3:
        raise ValueError("the count is not a quadratic in seq")
    return c2, c1, c0


def flop_terms(flops: Callable[..., object]) -> list[str]:
    """Which term of the forward FLOP count differs: the LM head, the feed-forward, then the rest
    of a layer as a polynomial in the sequence length (attention's seq^2, the projections' seq),
    then anything outside the layers (``flops`` takes ``run_forward_flops``' arguments)."""
    s, batch, seq = ACCOUNTING_SHAPE, FLOP_BATCH, FLOP_SEQS[1]
    d, layers, d_ff, vocab = s["d_model"], s["num_layers"], s["d_ff"], s["vocab_size"]

    def at(seq: int = seq, **changed: int) -> Fraction:
        return exact(flops(**(s | changed), batch_size=batch, sequence_length=seq))

    def rest_of_layer(t: int) -> Fraction:  # one more layer, less the handout's feed-forward
        return at(t, num_layers=layers + 1) - at(t) - 6 * batch * t * d * d_ff

    rest = 8 * batch * seq * d * d + 4 * batch * seq * seq * d
    outer = [
        (
            lambda: at(num_heads=2 * s["num_heads"]) - at(),
            0,
            "your count changes by {got} when num_heads doubles, the handout's by {want}: "
            "splitting d_model into heads changes no matmul's size",
        ),
        (
            lambda: (
                at() - layers * (rest + 6 * batch * seq * d * d_ff) - 2 * batch * seq * d * vocab
            ),
            0,
            "besides the layers and the LM head your count holds {got} FLOPs, the handout's "
            "{want}: the embedding lookup and the norms are not matmuls",
        ),
    ]
    growth = [
        (
            lambda: at(vocab_size=vocab + 1) - at(),
            2 * batch * seq * d,
            "your count grows by {got} per vocab entry, the handout's by 2 batch seq d_model "
            f"= {{want}} ({FLOP_SIZES}): the LM head's matmul",
        ),
        (
            lambda: at(d_ff=d_ff + 1) - at(),
            6 * batch * seq * d * layers,
            "your count grows by {got} per unit of d_ff, the handout's by 6 batch seq d_model "
            "num_layers = {want}: the feed-forward's three matmuls in every layer (2 FLOPs per "
            "multiply-add)",
        ),
    ]
    return first_term_off([*growth, *layer_flop_terms(rest_of_layer), *outer])


def layer_flop_terms(rest_of_layer: Callable[[int], Fraction]) -> list[Term]:
    """A layer's FLOPs beyond the feed-forward (``rest_of_layer(seq)``) as ``c2 seq^2 + c1 seq +
    c0``: attention's term, the projections' term, and a term that should not be there."""
    batch, d, seq = FLOP_BATCH, ACCOUNTING_SHAPE["d_model"], FLOP_SEQS[1]

    @cache
    def coefficients() -> tuple[Fraction, Fraction, Fraction]:
        return seq_polynomial([rest_of_layer(t) for t in FLOP_SEQS])

    return [
        (
            lambda: coefficients()[0],
            4 * batch * d,
            "per layer, the seq^2 term of your count is {got} seq^2, the handout's 4 batch "
            f"d_model = {{want}} ({FLOP_SIZES}): Q K^T and the weighted sum of V, 2 batch seq^2 "
            "d_model FLOPs each (the full seq x seq matrix)",
        ),
        (
            lambda: coefficients()[1],
            8 * batch * d * d,
            "per layer, besides the feed-forward, the seq-linear term of your count is {got} "
            "seq, the handout's 8 batch d_model^2 = {want}: the Q, K, V and output projections "
            "(2 batch seq d_model^2 FLOPs each)",
        ),
        (
            lambda: coefficients()[2],
            0,
            "per layer, your count holds {got} FLOPs that do not grow with seq, the handout's "
            "{want}: every matmul's FLOPs are proportional to the tokens",
        ),
        (
            lambda: rest_of_layer(seq),
            8 * batch * seq * d * d + 4 * batch * seq * seq * d,
            "besides the feed-forward, each layer adds {got} FLOPs to your count, the "
            f"handout's {{want}} ({FLOP_SIZES}): the four projections (8 batch seq d_model^2) "
            "and attention (4 batch seq^2 d_model)",
        ),
    ]


# A checkpoint is probed with the case's own model and optimizer: saved with your save, read back
# with torch.load, and loaded with your load into fresh ones, each compared with what was saved.


def same_state(a: object, b: object) -> bool:
    """Whether two state dicts (nested dicts, lists, tensors and numbers) hold the same values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(same_state, a, b))
    return type(a) is type(b) and a == b


def holds_state(saved: object, wanted: dict, depth: int = 4) -> bool:
    """Whether ``saved`` is, or contains within ``depth`` levels of dicts and lists, ``wanted``."""
    if same_state(saved, wanted):
        return True
    if depth == 0 or not isinstance(saved, dict | list | tuple):
        return False
    items = saved.values() if isinstance(saved, dict) else saved
    return any(holds_state(item, wanted, depth - 1) for item in items)


def checkpoint_at_save(adapters: ModuleType, inputs: Bundle, scratch: Path):
    """The case's model and optimizer trained to the save, their state dicts then, and where
    your save wrote them (a path or a rewound BytesIO, as the case does)."""
    model = small_model(inputs, "w.")
    optimizer = optimizer_for(model)
    train(model, optimizer, inputs["batches"][: inputs["saved_at"]])
    saved = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
    target = scratch / "checkpoint.pt" if inputs["target"] == "path" else io.BytesIO()
    adapters.run_save_checkpoint(model, optimizer, inputs["saved_at"], target)
    if isinstance(target, io.BytesIO):
        target.seek(0)
    return saved, target


def fresh_model_and_optimizer(inputs: Bundle):
    fresh = small_model(inputs, "other.")
    return fresh, optimizer_for(fresh, lr=0.5)


def checkpoint_restored(adapters: ModuleType, inputs: Bundle) -> list[str]:
    """Training on after your load differs: is the model, or the optimizer, what was saved?"""
    with tempfile.TemporaryDirectory() as scratch:
        (model_state, optimizer_state), target = checkpoint_at_save(adapters, inputs, Path(scratch))
        fresh, fresh_optimizer = fresh_model_and_optimizer(inputs)
        adapters.run_load_checkpoint(target, fresh, fresh_optimizer)
    restored = fresh_optimizer.state_dict()
    if not same_state(fresh.state_dict(), model_state):
        return [
            "after your load the model's weights differ from those saved (fresh weights loaded "
            "from your checkpoint): restore the model's state dict"
        ]
    if not same_state(restored["param_groups"], optimizer_state["param_groups"]):
        lr = fresh_optimizer.param_groups[0]["lr"]
        return [
            f"after your load the optimizer's learning rate is {lr:g}, not the saved "
            f"{CHECKPOINT_LR:g} (the fresh optimizer was made with 0.5): restore the optimizer's "
            "state dict (param_groups and state), not only the model's"
        ]
    if not same_state(restored["state"], optimizer_state["state"]):
        return [
            "after your load the optimizer's state (AdamW's step count and moments) differs "
            "from the saved one, though the model's weights and the learning rate are right"
        ]
    return []


def checkpoint_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Loading raised: does your checkpoint file (read back with torch.load) hold the model's
    and the optimizer's state dicts as saved? Then the error is in loading them."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            (model_state, optimizer_state), target = checkpoint_at_save(
                adapters, inputs, Path(scratch)
            )
            contents = torch.load(target, weights_only=True)
        except Exception:  # noqa: BLE001  (saving raised, or a file torch cannot read back)
            return []
        if isinstance(target, io.BytesIO):
            target.seek(0)
        if not raises(
            lambda: adapters.run_load_checkpoint(target, *fresh_model_and_optimizer(inputs)),
            tries=1,
        ):
            return []  # the probe's load runs: not located
    return saved_file_lines(contents, model_state, optimizer_state)


WRAPPER_PREFIXES = ("_orig_mod.", "module.")


def prefixed_key(contents: object, depth: int = 4) -> str:
    """A state-dict key in ``contents`` that starts with a wrapper's prefix (torch.compile's,
    DistributedDataParallel's); ``""`` when none does."""
    if depth == 0 or not isinstance(contents, dict | list | tuple):
        return ""
    if isinstance(contents, dict):
        keys = [k for k in contents if isinstance(k, str) and k.startswith(WRAPPER_PREFIXES)]
        if keys:
            return keys[0]
    items = contents.values() if isinstance(contents, dict) else contents
    return next(filter(None, (prefixed_key(item, depth - 1) for item in items)), "")


def saved_file_lines(contents: object, model_state: dict, optimizer_state: dict) -> list[str]:
    """What a checkpoint that your load raised on holds (``contents``: read back with
    torch.load): a wrapper's prefixed keys, the model's and the optimizer's state dicts as saved
    (then saving is right), or which of them is missing."""
    if key := prefixed_key(contents):
        return [
            f"your checkpoint's state dict has keys like {key!r} (read back with torch.load): "
            "save the underlying model's state dict (model.module for DDP, model._orig_mod for "
            "torch.compile), not the wrapper's, and load into the underlying model the same way"
        ]
    has_model, has_optimizer = (holds_state(contents, s) for s in (model_state, optimizer_state))
    if has_model and has_optimizer:
        return [
            "your checkpoint file holds the model's and the optimizer's state dicts as saved "
            "(read back with torch.load), so saving is right: your load raised restoring them "
            "into a fresh model and optimizer"
        ]
    missing = " and ".join(
        name for name, held in (("model", has_model), ("optimizer", has_optimizer)) if not held
    )
    return [
        f"your checkpoint file (read back with torch.load) holds no copy of the {missing}'s "
        "state dict as it was at the save, and your load raised: save model.state_dict() and "
        "optimizer.state_dict() in it"
    ]


# The training loop raised: the parts of a step, each run alone through its adapter.


def ran(call: Callable[[], object]) -> bool | None:
    """``True`` when ``call`` runs, ``False`` when it raises, ``None`` when its adapter is not
    written yet (``NotImplementedError``: nothing measured)."""
    try:
        call()
    except NotImplementedError:
        return None
    except Exception:  # noqa: BLE001  (student code: any exception)
        return False
    return True


def training_step_raised(adapters: ModuleType, shape: dict) -> list[str]:
    """Your training loop raised: do a step's gradient accumulation and the evaluation raise
    alone, on a tiny model of ``shape`` (``get_transformer_lm``'s arguments)?"""
    vocab, length = shape["vocab_size"], shape["context_length"]
    ids = torch.randint(0, vocab, (2, 2, length + 1), generator=torch.Generator().manual_seed(0))
    batches = [(b[:, :-1], b[:, 1:]) for b in ids]
    model = adapters.get_transformer_lm(**shape)
    loss = ran(lambda: adapters.run_cross_entropy(model(batches[0][0]), batches[0][1]))
    step = ran(lambda: adapters.run_accumulate_gradients(model, batches))
    tokens = np.arange(8 * length) % vocab
    evaluation = ran(lambda: adapters.run_evaluate(model, tokens, 2, length, 2, "cpu"))
    if not loss or step is None or evaluation is None:
        return []  # the loss itself raises, or a part is not wired: nothing located
    alone = "on 2 micro-batches of 2 sequences of a tiny model"
    if not step:
        return [
            f"alone, your gradient accumulation (run_accumulate_gradients) raises too {alone}, "
            "while the model and your cross-entropy run on the same batch: the error is in the "
            "training step around them (how it calls the loss, backward, the micro-batch loop)"
        ]
    if not evaluation:
        return [
            f"alone, your gradient accumulation runs {alone} and your evaluation (run_evaluate) "
            "raises: the error is in the evaluation"
        ]
    return [
        f"alone, your gradient accumulation and your evaluation run {alone}: the error is "
        "elsewhere in the loop (its batches, clipping, the schedule, the optimizer step, saving)"
    ]


def evaluation_raised(
    adapters: ModuleType, model: torch.nn.Module, dataset: np.ndarray, batch_size: int, length: int
) -> list[str]:
    """Your evaluation raised: do get_batch, the model and your cross-entropy run alone on the
    same data?"""
    where = f"{len(dataset)} tokens, batch_size={batch_size}, context_length={length}"
    try:
        x, y = adapters.run_get_batch(dataset, batch_size, length, "cpu")
    except NotImplementedError:
        return []
    except Exception:  # noqa: BLE001  (student code: any exception)
        return [f"your get_batch raises alone on this dataset ({where}): your evaluation's windows"]
    with torch.no_grad():
        loss = ran(
            lambda: adapters.run_cross_entropy(model(torch.as_tensor(x)), torch.as_tensor(y))
        )
    if not loss:
        return []  # the model or the loss raises alone: their own tests say more
    return [
        f"your get_batch, the model and your cross-entropy each run alone on this dataset "
        f"({where}), but your evaluation raised: the error is in how it calls them or averages "
        "their losses"
    ]


# --- the model's layers and decoding: where a shipped test's failure lies -------------------------


def snapshot_located(snapshot, out: object, name: str, diagnose: Callable[[], list[str]]) -> None:
    """``snapshot.assert_match(out, name)``, a failure getting ``diagnose``'s lines as a note
    when ``out`` is off the snapshot's expected value by more than float32 code that is right
    could be (a near miss, as ``--snapshot-exact`` fails, locates nothing)."""

    def lines() -> list[str]:
        return diagnose() if stage_error(out, Snapshot.load(name).expected) else []

    with diagnosed_if_raised(lines):
        snapshot.assert_match(out, name)


def first_stage_wrong(stages: list) -> tuple[str, str] | None:
    """Like :func:`first_off`, but a stage whose own call raises is named too (the error lies
    there); ``None`` when every stage is right or one is not written yet
    (``NotImplementedError`` locates nothing)."""
    for stage, run, expected in stages:
        try:
            error = stage_error(run(), expected)
        except NotImplementedError:
            return None
        except Exception as raised:  # noqa: BLE001  (student code: any exception)
            return stage, f"it raised {type(raised).__name__} there"
        if error:
            return stage, error
    return None


def attention_raised(adapters: ModuleType, rope: bool) -> list[str]:
    """Multi-head attention raised: its first stage that raises or is off alone; else each
    stage is right alone, so the error is in how the layer builds or joins them."""
    stages = attention_stages(adapters, Shipped(), rope)
    checked = f"projections, {'RoPE, ' * rope}attention and output projection"
    off = first_stage_wrong(stages)
    if off:
        return [stage_line(*off, checked)]
    return composite_raised(stages, checked, "multi-head attention")


def default_positions_raised(attend_at_positions: Callable[[], object]) -> list[str]:
    """Attention with RoPE raised without ``token_positions``: does it run with them given?"""
    if raises(attend_at_positions, tries=1):
        return []
    return [
        "your attention with RoPE runs with token_positions given (0..seq-1) but raised "
        "without them: when token_positions is None, rotate by the positions 0..seq-1"
    ]


def sdpa_raised(adapters: ModuleType, q, k, v, mask) -> list[str]:
    """Scaled dot-product attention raised: the simplest of these inputs it runs on says where
    the error lies: without the mask, as many keys as queries, every size equal."""
    attend = adapters.run_scaled_dot_product_attention
    if not raises(lambda: attend(q, k, v, mask), tries=1):
        return []
    square = min(q.shape[-2], k.shape[-2])
    size = min(square, q.shape[-1], v.shape[-1])
    probes = [
        (
            "without the mask",
            lambda: attend(q, k, v),
            "the masking step (the mask is (..., queries, keys), True where a query may attend)",
        ),
        (
            "without a mask, on as many keys as queries",
            lambda: attend(q[..., :square, :], k[..., :square, :], v[..., :square, :]),
            "an axis taken for another: the scores are (..., queries, keys), one per query and key",
        ),
        (
            "without a mask, with queries, keys, d_k and d_v all of one size",
            lambda: attend(q[..., :size, :size], k[..., :size, :size], v[..., :size, :size]),
            "which axes each product contracts: the scores contract d_k (Q K^T), the output the "
            "keys (weights @ V)",
        ),
    ]
    given = f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}"
    for probe, run, where in probes[mask is None :]:
        if not raises(run, tries=1):
            return [f"your attention raised on {given}, but runs {probe}: look at {where}"]
    return []


def weights_not_softmax(weights: torch.Tensor, q: torch.Tensor, k: torch.Tensor, mask) -> str:
    """``""`` when the attention weights are softmax(q.k / sqrt(d_k)) with masked scores at
    -inf; else how far off they are (for weights whose rows, mask and scale are not at fault)."""
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    off = largest(weights - torch.softmax(scores, -1).nan_to_num())
    if off <= 1e-4:
        return ""
    return (
        f"your attention weights (read off with the identity as values) sum to 1 in each row "
        f"and are 0 where masked, yet differ from softmax(q.k / sqrt(d_k)) by up to {off:.3g} "
        "and are not that softmax at any other scale: look at the scores, one q.k per query "
        "and key, over d_k"
    )


def top_p_raised(top_p_filter: Callable) -> list[str]:
    """top-p raised: does it run where nothing is cut (top_p = 1) and raise where it cuts?"""
    probabilities = torch.tensor([0.25, 0.125, 0.5, 0.125], dtype=torch.float64)
    if raises(lambda: top_p_filter(probabilities, 1.0), tries=1):
        return []
    if not raises(lambda: top_p_filter(probabilities, 0.6), tries=1):
        return []
    return [
        f"your top_p_filter runs with top_p=1 (every token kept) but raises with top_p=0.6 on "
        f"{probabilities.tolist()}: the error is in the cut itself (sort, the mass before each "
        "token, zero the tokens after the nucleus, put them back in vocabulary order, "
        "renormalize)"
    ]


def sampling_raised(
    sample: Callable, softmax: Callable, top_p_filter: Callable, logits: torch.Tensor
) -> list[str]:
    """sample_next_token raised: only at temperature 0 (which must be the argmax), or at every
    temperature while the softmax and top-p it builds on run alone on the same logits."""

    def sampled(temperature: float, top_p: float) -> Callable[[], object]:
        return lambda: sample(logits, temperature, top_p, torch.Generator().manual_seed(0))

    if not raises(sampled(1e-4, 1.0), tries=1):
        if not raises(sampled(0.0, 1.0), tries=1):
            return []
        return [
            "your sample_next_token runs at temperature 1e-4 but raises at temperature 0: "
            "logits / 0 are inf or NaN, so temperature 0 needs its own path (greedy: the argmax)"
        ]
    if not raises(sampled(1.0, 0.9), tries=1):
        return []
    if raises(lambda: top_p_filter(softmax(logits.double(), -1), 0.9), tries=1):
        return []
    return [
        "your softmax and top_p_filter run alone on these logits, but sample_next_token raises "
        "at every temperature (1, 1e-4): the error is in how it joins them (logits / T, a "
        "softmax over the vocabulary, top-p, one draw with the generator, returned as an int)"
    ]


def generate_raised(sample: Callable, model: torch.nn.Module, prompt: list[int]) -> list[str]:
    """generate raised: do the model's forward pass and one sampling step on its last logits
    run alone?"""
    try:
        with torch.no_grad():
            logits = model(torch.tensor([prompt]))[0, -1]
    except Exception:  # noqa: BLE001  (the forward pass raises: not generate's loop)
        return []
    if raises(lambda: sample(logits, 1.0, 1.0, torch.Generator().manual_seed(0)), tries=1):
        return []
    return [
        "your model's forward pass and sample_next_token on its last position's logits run "
        "alone, but generate raised: the error is in generate's own loop (a batch of one "
        "sequence, the last position's logits, each drawn token appended, the stop at eos_id)"
    ]


def greedy_difference(
    model: torch.nn.Module, prompt: list[int], got: list[int], expected: list[int]
) -> list[str]:
    """Where greedy tokens ``got`` leave ``expected`` (decoding step by step): how many came
    back, the first step that differs, and which position's logits its token is the argmax of."""
    if len(got) != len(expected):
        count = f"{len(got)} token{'s' * (len(got) != 1)}"
        return [f"generate returned {count} for max_new_tokens={len(expected)}"]
    step = next((i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b), None)
    if step is None:
        return []
    sequence = prompt + expected[:step]
    with torch.no_grad():
        argmaxes = model(torch.tensor([sequence]))[0].argmax(-1).tolist()
    line = (
        (f"your first {step} tokens match decoding step by step; " if step else "")
        + f"at step {step} you drew {got[step]}, the argmax of the last position's logits is "
        f"{expected[step]}"
    )
    elsewhere = [p for p, token in enumerate(argmaxes) if token == got[step]]
    if elsewhere:
        line += (
            f"; yours is the argmax at position {elsewhere[-1]} of the {len(sequence)} "
            "(the prompt and every token drawn so far)"
        )
    return [line]


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


# --- dispatch -------------------------------------------------------------------------------

LOCALIZERS: dict[str, Callable[[ModuleType, Bundle], list[str]]] = {
    "transformer_lm": lambda adapters, inputs: localize_lm(adapters),
    "transformer_block": lambda adapters, inputs: localize_block(adapters),
    "multihead_self_attention": lambda adapters, inputs: localize_attention(
        adapters, rope="theta" in inputs
    ),
    "swiglu": localize_swiglu,
    "scaled_dot_product_attention": localize_sdpa,
    "cross_entropy": localize_cross_entropy,
    "checkpoint": checkpoint_restored,
}
MAIN_OUTPUT = {"cross_entropy": "loss", "checkpoint": "resumed"}
# The expected value a main output is checked against, where its name differs: training on
# after loading must reach the parameters of training on without saving.
COMPARED_WITH = {"checkpoint": "continued"}


def localize(
    component: str, adapters: ModuleType, inputs: Bundle, outputs: Bundle, expected: Bundle
) -> str:
    """``diagnosis:`` lines for a failed public case: measured from its outputs, or, for a
    component with a localizer, only when its main output is clearly off (by more than a
    float32 computation could be); ``""`` when nothing was measured."""
    measured = OUTPUT_DIAGNOSES.get(component)
    localizer = LOCALIZERS.get(component)
    key = MAIN_OUTPUT.get(component, "out")
    wanted = COMPARED_WITH.get(component, key)
    if measured is not None:
        return as_lines(lambda: measured(inputs, outputs, expected))
    if localizer is None or key not in outputs or wanted not in expected:
        return ""
    if not stage_error(outputs[key], to_array(expected[wanted])):
        return ""
    return as_lines(lambda: localizer(adapters, inputs))


def as_lines(diagnose: Callable[[], list[str]]) -> str:
    try:
        lines = diagnose()
    except Exception:  # noqa: BLE001  (a diagnosis must never break the test it explains)
        return ""
    return "".join(f"\n  diagnosis: {line}" for line in lines)


# Diagnoses read off the outputs alone (the inputs, outputs and expected values of the case).
OUTPUT_DIAGNOSES: dict[str, Callable[[Bundle, Bundle, Bundle], list[str]]] = {
    "cosine_schedule": schedule_phases,
    "gradient_clipping": clipping_norms,
    "adamw": adamw_steps,
    "get_batch": window_layout,
    "rope": rope_positions,
    "rmsnorm": rmsnorm_axis,
    "silu": silu_ratio,
    "softmax": softmax_rows,
    "train_bpe": bpe_training_lines,
}


# --- when the case's call raised ----------------------------------------------------------------


@contextmanager
def diagnosed_if_raised(diagnose: Callable[[], list[str]]) -> Iterator[None]:
    """An exception raised inside gets ``diagnose``'s lines as a note (its traceback stays);
    not ``NotImplementedError``: code not written yet has nothing to locate."""
    try:
        yield
    except Exception as error:
        note = "" if isinstance(error, NotImplementedError) else as_lines(diagnose).lstrip("\n")
        if note:
            error.add_note(note)
        raise


def get_batch_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """get_batch raised: its rows measured on a longer dataset of distinct ids, with the same
    batch size and context length."""
    size, length, batch = len(inputs["dataset"]), inputs["context_length"], inputs["batch_size"]
    longer = torch.arange(100, 100 + size + 1000 * (length + 1))
    try:
        x, y = (
            torch.as_tensor(t) for t in adapters.run_get_batch(longer.numpy(), batch, length, "cpu")
        )
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    lines = window_lines(longer, x, y, length)
    if not raises(lambda: adapters.run_get_batch(inputs["dataset"].numpy(), batch, length, "cpu")):
        return []  # it does not raise on the case's own dataset (or only seldom): not located
    if lines:
        return [f"on a dataset of {len(longer)} tokens your get_batch runs, and there " + lines[0]]
    shapes_right = x.shape == (batch, length) and y.shape == x.shape
    if not shapes_right or not run_starts(longer, x) or not run_starts(longer, y):
        return []
    return [
        f"your get_batch raised on {size} tokens with context_length={length} (valid window "
        f"starts 0 .. {size - length - 1}), but its windows are right on {len(longer)} tokens: "
        "look at the ends of the start range (a window holds context_length + 1 tokens)"
    ]


def raises(call: Callable[[], object], tries: int = 3) -> bool:
    """Whether ``call`` raises in one of ``tries`` calls (random code may raise only sometimes)."""
    for _ in range(tries):
        try:
            call()
        except Exception:  # noqa: BLE001  (student code: any exception)
            return True
    return False


def schedule_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """The schedule raised: at which iteration, and the phases that differ (raising counts as
    differing)."""
    args = [inputs[k] for k in ("max", "min", "warmup", "cycle")]
    lrs, raised = [], []
    for it in inputs["its"]:
        try:
            lrs.append(float(adapters.run_get_lr_cosine_schedule(it, *args)))
        except Exception as error:  # noqa: BLE001  (student code: any exception)
            lrs.append(None)
            raised.append(f"{type(error).__name__} at it={it}")
    phases = schedule_phases(inputs, {"lrs": lrs}, expected)
    if not raised or len(raised) == len(lrs) or not phases:
        return []  # raising everywhere locates nothing
    return [
        f"your schedule raised {raised[0]} (warmup_iters={args[2]}, cosine_cycle_iters="
        f"{args[3]}); {phases[0]}"
    ]


def adamw_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """AdamW raised: at which step, and whether in the Python-float arithmetic of the scalars
    computed from the step count (a division by zero, a square root of a negative number)."""
    for step in range(1, inputs["steps"] + 1):
        try:
            adamw_formula.call(adapters, inputs | {"steps": step})
        except (ZeroDivisionError, ValueError) as error:
            if isinstance(error, ValueError) and "math domain" not in str(error):
                return []
            b1, b2 = inputs["defaults"]["betas"]
            return [
                f"your AdamW raised {type(error).__name__} in float arithmetic at step t={step} "
                f"(counting from 1): the scalars computed from t must stay positive, the bias "
                f"corrections 1 - beta1^t = {1 - b1**step:.4g} and 1 - beta2^t = {1 - b2**step:.4g} "
                "and the square root of the second"
            ]
        except Exception:  # noqa: BLE001  (another kind of error: nothing located)
            return []
    return []


def clipping_raised(clip: Callable) -> list[str]:
    """Clipping raised: does it run when no scaling is needed, and raise when it is?"""

    def runs(values: list[float], max_norm: float) -> bool:
        parameter = torch.nn.Parameter(torch.zeros(len(values)))
        parameter.grad = torch.tensor(values)
        return not raises(lambda: clip([parameter], max_norm), tries=1)

    if not runs([0.3, 0.4], 1.0) or runs([3.0, 4.0], 1.0):
        return []
    return [
        "your gradient clipping runs when the global norm is within max_l2_norm (0.5 of 1) and "
        "raises when it exceeds it (5 of 1): the error is in the scaling step"
    ]


def linear_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Linear raised: with a square weight (d_in = d_out), does it run, and compute x W^T?"""
    weight, x = inputs["weight"], inputs["x"]
    d_out, d_in = weight.shape
    if d_out < d_in:
        return []
    square = weight[:d_in]
    try:
        out = adapters.run_linear(d_in, d_in, square, x)
    except Exception:  # noqa: BLE001  (it raises there too: nothing located)
        return []
    x64, w64 = to_array(x), to_array(square)
    if not stage_error(out, x64 @ w64.T):
        return [
            f"your linear runs with a square weight ({d_in}, {d_in}) but raised with weight "
            f"({d_out}, {d_in}): somewhere d_in and d_out are mixed up (the weight is stored "
            "(d_out, d_in))"
        ]
    if not stage_error(out, x64 @ w64):
        return [
            "with a square weight your linear returns x @ W, not x @ W.T: the weight is stored "
            "(d_out, d_in), so y = x W^T"
        ]
    return []


def right_on_one_row(
    call: Callable[[torch.Tensor], object], x: torch.Tensor, want: object, dim: int
) -> bool:
    """Whether ``call`` gives the expected output on the first 1-D row of ``x`` along ``dim``."""
    row = x.movedim(dim, -1).reshape(-1, x.shape[dim])[0]
    wanted_row = np.moveaxis(to_array(want), dim, -1).reshape(-1, x.shape[dim])[0]
    try:
        return not stage_error(call(row), wanted_row)
    except Exception:  # noqa: BLE001  (it raises on a row too: nothing located)
        return False


def row_raised_line(name: str, x: torch.Tensor, along: str) -> list[str]:
    return [
        f"your {name} is right on one row alone (a 1-D tensor) but raised on shape "
        f"{tuple(x.shape)}: each row's {along} must broadcast back along its axis (keep that axis, "
        "with size 1)"
    ]


def softmax_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Softmax raised: is it right on one row alone, a 1-D tensor?"""
    x, dim = inputs["x"], inputs["dim"]
    if "out" not in expected or not right_on_one_row(
        lambda row: adapters.run_softmax(row, dim=0), x, expected["out"], dim
    ):
        return []
    return row_raised_line(f"softmax (dim={dim})", x, "max and sum")


def rmsnorm_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """RMSNorm raised: is it right on one position alone, a 1-D vector of features?"""
    x, weight = inputs["x"], inputs["weight"]
    call = lambda row: adapters.run_rmsnorm(len(weight), inputs["eps"], weight, row)  # noqa: E731
    if "out" not in expected or not right_on_one_row(call, x, expected["out"], -1):
        return []
    return row_raised_line("RMSNorm", x, "root mean square")


def cross_entropy_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Cross-entropy raised: on uniform logits (every loss is log(vocab_size)), from one row to a
    batch to leading dimensions, the first shape where it raises or is wrong."""
    vocab = inputs["logits"].shape[-1]
    rows = max(2, inputs["logits"].shape[0])
    shapes = [("one row", (1,)), (f"{rows} rows", (rows,)), ("leading dims (2, 3)", (2, 3))]
    right_on = None
    for described, shape in shapes:
        try:
            got = float(
                adapters.run_cross_entropy(
                    torch.zeros(*shape, vocab), torch.zeros(shape, dtype=torch.long)
                )
            )
        except Exception:  # noqa: BLE001  (where it raises is the measurement)
            if right_on is None:
                return []
            return [
                f"on uniform logits your cross_entropy is right on {right_on} but raised on "
                f"{described}: what changes between them is how many rows are reduced and "
                "broadcast back (every axis but the last is a batch axis)"
            ]
        if not math.isclose(got, math.log(vocab), rel_tol=1e-5):
            return [
                f"on uniform logits (all 0) over {vocab} classes, {described}, your loss is "
                f"{got:.6g}, not log({vocab}) = {math.log(vocab):.6g}: the log of the sum of the "
                "exps over the last axis, minus the target's logit"
            ]
        right_on = described
    return []


def composite_raised(stages: list, checked: str, composite: str) -> list[str]:
    """A composite raised: the first of its stages that is off; or, when every stage runs and is
    right alone, that the error lies in how the composite builds or joins them."""
    off = first_off(stages)
    if off:
        return [stage_line(*off, checked)]
    try:
        right = all(not stage_error(run(), expected) for _, run, expected in stages)
    except Exception:  # noqa: BLE001  (a stage's own adapter fails: nothing located)
        return []
    if not right or not stages:
        return []
    return [
        f"{checked} are each right alone (your own adapters on the reference's input to each), "
        f"but your {composite} raised: the error is in how it builds or joins them (the sizes it "
        "configures, the shapes it passes on)"
    ]


# --- BPE training and the tokenizer ---------------------------------------------------------

SINGLE_BYTES = {i: bytes([i]) for i in range(256)}
# How many of a case's words are encoded one by one to find one that raises.
WORDS_TRIED = 5000


def tokenizer_probes(adapters: ModuleType) -> list[tuple[str, Callable[[], object]]]:
    """Small calls, each using one more part of a tokenizer than the one before."""

    def build(merges: list, specials: list[str] | None = None):
        vocab = SINGLE_BYTES | {256 + k: a + b for k, (a, b) in enumerate(merges)}
        if specials is None:
            return adapters.get_tokenizer(vocab, merges)
        return adapters.get_tokenizer(vocab, merges, specials)

    return [
        ("building from the 256 single bytes", lambda: build([])),
        ("encoding 'hi there' without merges", lambda: build([]).encode("hi there")),
        ("decoding the ids of 'hi'", lambda: build([]).decode([104, 105])),
        (
            "applying the merge (b'h', b'i') to 'hi hi'",
            lambda: build([(b"h", b"i")]).encode("hi hi"),
        ),
        (
            "encoding 'a<|endoftext|>b' with that special token",
            lambda: build([], ["<|endoftext|>"]).encode("a<|endoftext|>b"),
        ),
        (
            "running encode_iterable on ['hi ', 'there']",
            lambda: list(build([]).encode_iterable(["hi ", "there"])),
        ),
    ]


def first_raising_step(steps: list[tuple[str, Callable[[], object]]], who: str) -> list[str]:
    """The first step that raises after the ones before it ran (silent when the first raises
    too, or none does: nothing located)."""
    ran = []
    for doing, call in steps:
        try:
            call()
        except Exception as error:  # noqa: BLE001  (student code: any exception)
            if not ran:
                return []
            return [
                f"{who} ran {', '.join(ran)}; it raised {type(error).__name__} on the next "
                f"step, {doing}: the error is in that step"
            ]
        ran.append(doing)
    return []


def tokenizer_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """The tokenizer raised: located by small probes on a 256-byte vocab, or, when they all
    run, by the first word of the case's texts that raises alone, with and without merges."""
    lines = first_raising_step(tokenizer_probes(adapters), "on a 256-byte vocab your tokenizer")
    if lines or "texts" not in inputs or raises(tokenizer_probes(adapters)[0][1], tries=1):
        return lines
    return raising_word(adapters, inputs)


def raising_word(adapters: ModuleType, inputs: Bundle) -> list[str]:
    """The first whitespace-led word of the case's texts whose encoding raises alone, and
    whether it still raises without the merges."""
    tokenizer = build_tokenizer(adapters, inputs)
    words = (w for text in inputs["texts"].values() for w in regex.findall(r"\s*\S+", text))
    word = next(
        (
            w
            for w in itertools.islice(words, WORDS_TRIED)
            if raises(lambda w=w: tokenizer.encode(w), 1)
        ),
        None,
    )
    if word is None:
        return []
    bare = build_tokenizer(adapters, inputs | {"merges": []})
    stage = (
        "runs without the merges: the error is in applying the merges to it"
        if not raises(lambda: bare.encode(word), tries=1)
        else "raises without the merges too"
    )
    return [f"your encode raises on the word {word!r} alone, and {stage}"]


def train_bpe_probes(adapters: ModuleType, scratch: Path) -> list[tuple[str, Callable[[], object]]]:
    """Small trainings, each using one more part of a trainer than the one before."""

    def train(text: str, vocab_size: int, specials: list[str]) -> Callable[[], object]:
        def run() -> object:
            path = scratch / "corpus.txt"
            path.write_bytes(text.encode("utf-8"))
            return adapters.run_train_bpe(os.fspath(path), vocab_size, specials)

        return run

    return [
        ("training with no merge (vocab_size=256) on 'ab ab'", train("ab ab", 256, [])),
        ("making one merge in 'ab' (the pair alone in its pre-token)", train("ab", 257, [])),
        (
            "making one merge in 'ab ab xaby' (a pair with neighbours on either side)",
            train("ab ab xaby", 257, []),
        ),
        ("making two merges in 'ab ab xaby'", train("ab ab xaby", 258, [])),
        ("merging a pair that occurs twice in one pre-token ('abab')", train("abab", 257, [])),
        (
            "training with a special token, on 'ab<|endoftext|>ab'",
            train("ab<|endoftext|>ab", 258, [END_OF_TEXT]),
        ),
        ("training until nothing is left to merge (vocab_size=1000)", train("abc abc", 1000, [])),
    ]


def train_bpe_raised(adapters: ModuleType, inputs: Bundle, expected: Bundle) -> list[str]:
    """Training raised: the first small training that raises after the ones before it ran."""
    with tempfile.TemporaryDirectory() as scratch:
        return first_raising_step(train_bpe_probes(adapters, Path(scratch)), "your train_bpe")


RAISED_DIAGNOSES: dict[str, Callable[[ModuleType, Bundle, Bundle], list[str]]] = {
    "transformer_lm": lambda adapters, inputs, expected: lm_raised(adapters),
    "transformer_block": lambda adapters, inputs, expected: composite_raised(
        block_stages(adapters, Shipped()), BLOCK_STAGES, "transformer_block"
    ),
    "get_batch": get_batch_raised,
    "linear": linear_raised,
    "softmax": softmax_raised,
    "checkpoint": checkpoint_raised,
    "cross_entropy": cross_entropy_raised,
    "adamw": adamw_raised,
    "rmsnorm": rmsnorm_raised,
    "multihead_self_attention": lambda adapters, inputs, expected: attention_raised(
        adapters, rope="theta" in inputs
    ),
    "scaled_dot_product_attention": lambda adapters, inputs, expected: sdpa_raised(
        adapters, inputs["q"], inputs["k"], inputs["v"], inputs.get("mask")
    ),
    "cosine_schedule": schedule_raised,
    "gradient_clipping": lambda adapters, inputs, expected: clipping_raised(
        adapters.run_gradient_clipping
    ),
    "tokenizer": tokenizer_raised,
    "train_bpe": train_bpe_raised,
}


def localize_raised(
    component: str, adapters: ModuleType, inputs: Bundle, expected: Bundle
) -> list[str]:
    """Lines for a public case whose call raised (``[]`` when nothing was measured)."""
    diagnose = RAISED_DIAGNOSES.get(component)
    return diagnose(adapters, inputs, expected) if diagnose else []
