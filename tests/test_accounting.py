"""Resource accounting: parameter and FLOP counts against the model and the handout's formulas."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.hints import diagnosis_lines
from tests.localize.accounting import flop_terms, parameter_terms

from .lazy_adapters import get_transformer_lm, run_count_parameters, run_forward_flops

SHAPES = [
    dict(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48),
    dict(vocab_size=7, context_length=4, d_model=8, num_layers=1, num_heads=2, d_ff=24),
    dict(vocab_size=512, context_length=16, d_model=64, num_layers=3, num_heads=4, d_ff=128),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"d{s['d_model']}x{s['num_layers']}")
def test_accounting_parameter_count_matches_model(shape):
    model = get_transformer_lm(**shape, rope_theta=1e4)
    got, want = run_count_parameters(**shape), sum(p.numel() for p in model.parameters())
    d, layers = shape["d_model"], shape["num_layers"]
    parts = {
        "one RMSNorm gain (d_model; the final norm?)": d,
        "the RMSNorm gains of every layer (2 d_model per layer)": 2 * d * layers,
        "one vocab_size x d_model matrix (the token embeddings or the LM head)": shape["vocab_size"]
        * d,
        "one d_model x d_ff matrix per layer (SwiGLU has three)": d * shape["d_ff"] * layers,
        "one d_model x d_model projection per layer (attention has four)": d * d * layers,
    }
    named = [
        f"the count {'misses' if got < want else 'adds'} {n}"
        for n, v in parts.items()
        if abs(got - want) == v
    ]
    if got != want:
        named = parameter_terms(run_count_parameters) or named
    assert got == want, f"{got} parameters, your model has {want}" + diagnosis_lines(named[:1])


def term_difference(got: object, terms: dict[str, int], probed: Callable[[], list[str]]) -> str:
    """MACs counted instead of FLOPs (half the count); else the first term ``probed`` finds off
    on a small shape, one hyperparameter changed at a time; else which term of the handout's
    count ``got`` misses, doubles or halves (at these shapes terms can coincide: d_ff = 4 d_model
    makes SwiGLU's d_model x d_ff matmul as large as two projections); else the count by term.
    ``""`` when ``got`` is right or not an int."""
    total = sum(terms.values())
    if not isinstance(got, int) or got == total:
        return ""
    if 2 * got == total:
        return "\ndiagnosis: your count is half the handout's: multiply-accumulates counted as one FLOP each (a (m x n)(n x p) matmul is 2mnp FLOPs)"
    if found := probed():
        return diagnosis_lines(found[:1])
    shares = ((-1, 1, "misses"), (1, 1, "counts twice"), (-1, 3, "misses a third of"))
    shares += ((-1, 2, "misses half of"),)
    fits = [
        f"{what} the term {name} ({value:,})"
        for name, value in terms.items()
        for numerator, denominator, what in shares
        if (got - total) * denominator == numerator * value
    ]
    if fits:
        return f"\ndiagnosis: your count {' or '.join(fits)}; the rest is right"
    return f"\ndiagnosis: your count is {got:,}, the handout's {total:,}, by term: " + ", ".join(
        f"{n} {v:,}" for n, v in terms.items()
    )


def gpt2_xl_parameter_terms() -> dict[str, int]:
    # 48 layers x (4 x 1600^2 attention + 3 x 1600 x 6400 SwiGLU + 2 x 1600 norms)
    # + 50257 x 1600 embeddings + 50257 x 1600 LM head + 1600 final norm.
    return {
        "token embeddings": 50257 * 1600,
        "attention projections (per layer 4 d_model^2)": 48 * 4 * 1600**2,
        "feed-forward (per layer 3 d_model d_ff)": 48 * 3 * 1600 * 6400,
        "ln1 and ln2 (per layer 2 d_model)": 48 * 2 * 1600,
        "final norm": 1600,
        "LM head": 50257 * 1600,
    }


def test_accounting_gpt2_xl_parameter_count():
    terms = gpt2_xl_parameter_terms()
    assert sum(terms.values()) == 2_127_057_600
    got = run_count_parameters(50257, 1024, 1600, 48, 25, 6400)
    assert got == 2_127_057_600, f"{got} parameters, expected 2,127,057,600" + term_difference(
        got, terms, lambda: parameter_terms(run_count_parameters)
    )


def handout_flop_terms(
    vocab_size, d_model, num_layers, d_ff, batch_size, seq_len
) -> dict[str, int]:
    tokens = batch_size * seq_len
    return {
        "Q, K, V and output projections": num_layers * 4 * 2 * tokens * d_model * d_model,
        "Q K^T and the weighted sum of V": num_layers * 2 * 2 * batch_size * seq_len**2 * d_model,
        "SwiGLU's three matrices": num_layers * 3 * 2 * tokens * d_model * d_ff,
        "the LM head": 2 * tokens * d_model * vocab_size,
    }


@pytest.mark.parametrize(("batch_size", "seq_len"), [(1, 1024), (3, 12)])
def test_accounting_forward_flops(batch_size, seq_len):
    got = run_forward_flops(50257, 1024, 1600, 48, 25, 6400, batch_size, seq_len)
    terms = handout_flop_terms(50257, 1600, 48, 6400, batch_size, seq_len)
    assert got == sum(terms.values()), f"{got} FLOPs" + term_difference(
        got, terms, lambda: flop_terms(run_forward_flops)
    )
    small = SHAPES[0]
    got = run_forward_flops(**small, batch_size=batch_size, sequence_length=seq_len)
    terms = handout_flop_terms(100, 32, 2, 48, batch_size, seq_len)
    assert got == sum(terms.values()), f"{got} FLOPs" + term_difference(
        got, terms, lambda: flop_terms(run_forward_flops)
    )
