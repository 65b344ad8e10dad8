"""The localizing diagnoses (tests/localize/, tests/measure.py) stay silent on right answers
and name the stage or property a wrong one breaks."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from tests import adapters as reference
from tests import measure
from tests.cases import CASES
from tests.cases.core import normalize
from tests.cases.public import public_expected, public_inputs
from tests.cases.shipped import Shipped
from tests.localize import LOCALIZERS, OUTPUT_DIAGNOSES, localize
from tests.localize.attention import attention_weights, localize_sdpa, weights_hints
from tests.localize.composites import (
    block_probes,
    block_stages,
    lm_probes,
    lm_stages,
    localize_block,
    localize_lm,
    localize_swiglu,
)
from tests.localize.losses import localize_cross_entropy
from tests.localize.multihead import attention_probes, attention_stages
from tests.localize.stages import first_off, first_probe_off

SHIPPED = Shipped()
DIAGNOSED = sorted(set(LOCALIZERS) | set(OUTPUT_DIAGNOSES))


def with_adapter(name: str, replacement) -> SimpleNamespace:
    """The reference adapters with one replaced."""
    names = {n: getattr(reference, n) for n in dir(reference) if n.startswith(("run_", "get_"))}
    return SimpleNamespace(**(names | {name: replacement}))


def public_run(case, adapters=reference):
    inputs = public_inputs(case, SHIPPED)
    return inputs, normalize(case.call(adapters, inputs)), public_expected(case)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES.values() if c.component in DIAGNOSED and c.public_inputs],
    ids=lambda c: f"{c.component}-{c.name}",
)
def test_right_outputs_get_no_diagnosis(case):
    inputs, outputs, expected = public_run(case)
    assert localize(case.component, reference, inputs, outputs, expected) == []


def test_every_stage_and_probe_matches_with_the_reference_adapters():
    for rope in (False, True):
        assert first_off(attention_stages(reference, SHIPPED, rope)) is None
        assert first_probe_off(attention_probes(reference, SHIPPED, rope)) is None
    assert first_off(block_stages(reference, SHIPPED)) is None
    assert first_probe_off(block_probes(reference, SHIPPED)) is None
    assert first_off(lm_stages(reference, SHIPPED)) is None
    assert first_probe_off(lm_probes(reference, SHIPPED)) is None
    q, k, mask = (SHIPPED.inputs[n] for n in ("q", "k", "mask"))
    weights = attention_weights(reference, q, k, mask)
    assert weights_hints(weights, q, k, mask) == []
    inputs = public_inputs(CASES["cross_entropy", "leading_dims"], SHIPPED)
    assert localize_cross_entropy(reference, inputs) == []


def sdpa(fill: float, scale) -> object:
    def attend(q, k, v, mask=None):
        scores = q @ k.transpose(-1, -2) * scale(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, fill)
        return torch.softmax(scores, -1) @ v

    return attend


@pytest.mark.parametrize(
    ("fill", "scale", "named"),
    [
        (0.0, lambda d: d**-0.5, "masked positions get attention weight"),
        (-math.inf, lambda d: 1 / d, "= 1/d_k"),
        (-math.inf, lambda d: 1.0, "1 (no scaling)"),
    ],
)
def test_attention_weights_name_the_property_that_fails(fill, scale, named):
    q, k, mask = (SHIPPED.inputs[n] for n in ("q", "k", "mask"))
    wrong = with_adapter("run_scaled_dot_product_attention", sdpa(fill, scale))
    assert named in localize_sdpa(wrong, {"q": q, "k": k, "mask": mask})[0]


def test_composites_name_the_first_wrong_stage_or_connection():
    def silu_doubled(x):
        return 2 * reference.run_silu(x)

    inputs = public_inputs(CASES["swiglu", "basic"], SHIPPED)
    assert (
        "SiLU(W1 x) (run_silu)"
        in localize_swiglu(with_adapter("run_silu", silu_doubled), inputs)[0]
    )

    def tied(*args):
        weights = dict(args[-2]) | {"lm_head.weight": args[-2]["token_embeddings.weight"]}
        return reference.run_transformer_lm(*args[:-2], weights, args[-1])

    assert "final norm and LM head" in localize_lm(with_adapter("run_transformer_lm", tied))[0]

    def extra_residual(*args):
        return reference.run_transformer_block(*args) + args[-1]

    line = localize_block(with_adapter("run_transformer_block", extra_residual))[0]
    assert "does not return its input" in line


def test_cross_entropy_names_the_axis_it_sums_over():
    def summed(logits, targets):
        return reference.run_cross_entropy(logits, targets) * targets.numel()

    inputs = public_inputs(CASES["cross_entropy", "leading_dims"], SHIPPED)
    line = localize_cross_entropy(with_adapter("run_cross_entropy", summed), inputs)[0]
    assert line.startswith("repeating the batch (axis 0)")


def test_clipping_names_the_norm_it_used():
    case = CASES["gradient_clipping", "large_norm"]
    inputs, outputs, expected = public_run(case)
    grads = [inputs[f"g{i}"].double() for i in range(inputs["count"])]
    total = sum(float(g.norm()) for g in grads)
    wrong = {f"round0.g{i}": g * (1.0 / total) for i, g in enumerate(grads)}
    assert (
        "the sum of the per-parameter norms" in measure.clipping_norms(inputs, wrong, expected)[0]
    )
    per_parameter = {f"round0.g{i}": g / g.norm() for i, g in enumerate(grads)}
    assert "different factors" in measure.clipping_norms(inputs, per_parameter, expected)[0]


def test_adamw_names_the_step_and_the_term():
    case = CASES["adamw", "formula"]
    inputs, outputs, expected = public_run(case)
    out = outputs["out"].clone()
    b1, b2 = inputs["defaults"]["betas"]
    lr, wd = inputs["defaults"]["lr"], inputs["defaults"]["weight_decay"]
    start = torch.cat([inputs[f"p{i}"].flatten() for i in range(len(inputs["group_of"]))])
    sign = torch.cat([inputs[f"g{i}"][0].sign().flatten() for i in range(len(inputs["group_of"]))])
    out[0] = start - lr * (1 - b1) / math.sqrt(1 - b2) * sign - lr * wd * start
    assert "no bias correction" in measure.adamw_steps(inputs, {"out": out}, expected)[0]
    later = outputs["out"].clone()
    later[3:] += 0.1
    assert "first differ after step 4" in measure.adamw_steps(inputs, {"out": later}, expected)[0]


def test_schedule_names_the_phase():
    case = CASES["cosine_schedule", "handout"]
    inputs, outputs, expected = public_run(case)
    lrs = list(outputs["lrs"])
    lrs[9] += 0.01
    line = measure.schedule_phases(inputs, {"lrs": lrs}, expected)[0]
    assert "cosine (7 <= it <= 21): 1 rates off, first at it=9" in line
    assert "right in warm-up, after the cycle" in line


def test_tokenizer_differences_point_at_the_first_id_or_character():
    from tests.cases.tokenizer_diff import encode_difference, text_difference

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"oo", 257: b"ooo"}
    merges = [(b"o", b"o"), (b"oo", b"o")]
    x, o = ord("x"), ord("o")
    assert encode_difference([x, 257], [x, 257], vocab, merges) == ""
    split = encode_difference([x, 256, o], [x, 257], vocab, merges)
    assert "merge #1 (b'oo', b'o'), which yours did not apply here" in split
    assert text_difference("same", "same", "decode") == ""
    assert "character 2: got 'x'" in text_difference("abx", "abc", "decode")


def test_attention_weights_that_are_not_finite_get_no_verdict():
    def over_queries(q, k, v, mask=None):
        scores = (q @ k.transpose(-1, -2)).masked_fill(~mask, -math.inf)
        return torch.softmax(scores, -2) @ v

    q, k, mask = (SHIPPED.inputs[n] for n in ("q", "k", "mask"))
    wrong = with_adapter("run_scaled_dot_product_attention", over_queries)
    assert localize_sdpa(wrong, {"q": q, "k": k, "mask": mask}) == []
