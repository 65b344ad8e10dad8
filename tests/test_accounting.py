"""Resource accounting: parameter and FLOP counts against the model and the handout's formulas."""

from __future__ import annotations

import pytest

from .lazy_adapters import get_transformer_lm, run_count_parameters, run_forward_flops

SHAPES = [
    dict(vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48),
    dict(vocab_size=7, context_length=4, d_model=8, num_layers=1, num_heads=2, d_ff=24),
    dict(vocab_size=512, context_length=16, d_model=64, num_layers=3, num_heads=4, d_ff=128),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"d{s['d_model']}x{s['num_layers']}")
def test_accounting_parameter_count_matches_model(shape):
    model = get_transformer_lm(**shape, rope_theta=1e4)
    assert run_count_parameters(**shape) == sum(p.numel() for p in model.parameters())


def test_accounting_gpt2_xl_parameter_count():
    # 48 layers x (4 x 1600^2 attention + 3 x 1600 x 6400 SwiGLU + 2 x 1600 norms)
    # + 2 x 50257 x 1600 (embeddings, LM head) + 1600 final norm.
    expected = 48 * (4 * 1600**2 + 3 * 1600 * 6400 + 2 * 1600) + 2 * 50257 * 1600 + 1600
    assert run_count_parameters(50257, 1024, 1600, 48, 25, 6400) == expected == 2_127_057_600


def handout_forward_flops(vocab_size, d_model, num_layers, d_ff, batch_size, seq_len) -> int:
    tokens = batch_size * seq_len
    per_layer = (
        4 * 2 * tokens * d_model * d_model  # Q, K, V and output projections
        + 2 * 2 * batch_size * seq_len * seq_len * d_model  # Q K^T and the weighted sum of V
        + 3 * 2 * tokens * d_model * d_ff  # SwiGLU's three matrices
    )
    return num_layers * per_layer + 2 * tokens * d_model * vocab_size  # plus the LM head


@pytest.mark.parametrize(("batch_size", "seq_len"), [(1, 1024), (3, 12)])
def test_accounting_forward_flops(batch_size, seq_len):
    got = run_forward_flops(50257, 1024, 1600, 48, 25, 6400, batch_size, seq_len)
    assert got == handout_forward_flops(50257, 1600, 48, 6400, batch_size, seq_len)
    small = SHAPES[0]
    assert run_forward_flops(**small, batch_size=batch_size, sequence_length=seq_len) == (
        handout_forward_flops(100, 32, 2, 48, batch_size, seq_len)
    )
