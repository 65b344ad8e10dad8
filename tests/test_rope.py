"""Rotary position embeddings: snapshot, the rotation's invariants, and bad input."""

from __future__ import annotations

import pytest
import torch

from .adapters import run_rope
from .cases.shipped import Shipped
from .expect import raises_an_error
from .hints import diagnosis_lines, dtype_kept
from .lazy_adapters import get_transformer_lm
from .localize import graded_case_located
from .localize.multihead import rope_tables_in_state_dict

THETA, MAX_SEQ_LEN = 10000.0, 16


@graded_case_located("rope")
def test_rope(snapshot, inputs):
    x = inputs["in_embeddings"]
    out = run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x, inputs["token_positions"])
    snapshot.assert_match(out, "rope")


def test_rope_preserves_norms_of_every_pair(inputs):
    x = inputs["in_embeddings"]
    out = run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x, inputs["token_positions"])
    pair_norms = lambda t: t.reshape(*t.shape[:-1], -1, 2).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pair_norms(out), pair_norms(x))


def test_rope_scores_depend_only_on_relative_position():
    d_k = 32
    q, k = torch.randn(d_k, dtype=torch.float64), torch.randn(d_k, dtype=torch.float64)

    def score(m: int, n: int) -> torch.Tensor:
        rq = run_rope(d_k, THETA, MAX_SEQ_LEN, q.float()[None], torch.tensor([m]))
        rk = run_rope(d_k, THETA, MAX_SEQ_LEN, k.float()[None], torch.tensor([n]))
        return (rq * rk).sum()

    for offset in (0, 1, 3, 7):
        scores = torch.stack([score(m + offset, m) for m in range(MAX_SEQ_LEN - offset)])
        torch.testing.assert_close(scores, scores[0].expand_as(scores), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(score(3, 0), score(0, 3)), (
        "RoPE scores must depend on the sign of m - n"
    )


def test_rope_position_zero_is_identity(inputs):
    x = inputs["in_embeddings"]
    out = run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x, torch.zeros(x.shape[:-1], dtype=torch.long))
    torch.testing.assert_close(out, x)


def test_rope_broadcasts_positions_over_leading_dims(inputs):
    x = inputs["in_embeddings"][:2]  # (batch, seq, d_k)
    heads = x[:, None].expand(2, 3, *x.shape[1:])  # (batch, heads, seq, d_k)
    positions = torch.arange(x.shape[1])
    out = run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, heads, positions)
    assert out.shape == heads.shape
    torch.testing.assert_close(
        out[:, 1], run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x, positions.expand(2, -1))
    )


@pytest.mark.robustness
def test_rope_bfloat16_in_bfloat16_out(inputs):
    x = inputs["in_embeddings"]
    positions = inputs["token_positions"]
    out = run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x.bfloat16(), positions)
    assert not dtype_kept(out, torch.bfloat16), dtype_kept(out, torch.bfloat16)
    torch.testing.assert_close(
        out.float(), run_rope(x.shape[-1], THETA, MAX_SEQ_LEN, x, positions), atol=0.05, rtol=0.02
    )


@pytest.mark.robustness
def test_rope_rejects_odd_d_k():
    with raises_an_error():
        run_rope(7, THETA, MAX_SEQ_LEN, torch.randn(2, 7), torch.arange(2))


@pytest.mark.robustness
@pytest.mark.parametrize("position", [MAX_SEQ_LEN, -1])
def test_rope_rejects_positions_outside_max_seq_len(position):
    with raises_an_error():
        run_rope(8, THETA, MAX_SEQ_LEN, torch.randn(2, 8), torch.tensor([0, position]))


def test_rope_tables_stay_out_of_the_state_dict():
    """RoPE's cos/sin tables are computed from theta and d_k, not learned: a model holding your
    RoPE loads the handout's weights, which have no entry for them, strictly. (The rope adapter
    returns rotated tensors only, so the tables are looked for in a small LM that holds it,
    built without weights.)"""
    lines = rope_tables_in_state_dict(get_transformer_lm, Shipped())
    assert not lines, "RoPE's tables are in your model's state dict" + diagnosis_lines(lines)
