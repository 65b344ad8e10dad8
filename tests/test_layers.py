"""Linear, Embedding, RMSNorm, SiLU, SwiGLU and softmax: snapshots plus the properties the
handout asks for (any leading dims, RMSNorm in float32); dtype and error extras are advice."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from .adapters import run_embedding, run_linear, run_rmsnorm, run_silu, run_softmax, run_swiglu
from .expect import raises_an_error
from .hints import assert_close_or_hint, close, dtype_kept, matching_hints, softmax_mistakes
from .localize import as_lines, graded_case_located
from .measure import float32_line


@graded_case_located("linear")
def test_linear(snapshot, inputs, state_dict):
    weight = state_dict["layers.0.ffn.w1.weight"]
    d_out, d_in = weight.shape
    snapshot.assert_match(run_linear(d_in, d_out, weight, inputs["in_embeddings"]), "linear")


def test_linear_any_leading_dims(state_dict):
    weight = state_dict["layers.0.ffn.w1.weight"]
    x = torch.randn(2, 3, 5, weight.shape[1])
    out = on_any_rank(lambda x: run_linear(*weight.shape[::-1], weight, x), x, "run_linear")
    torch.testing.assert_close(out, F.linear(x, weight))


def test_linear_square_weight(state_dict):
    # With d_in == d_out, x @ W (the weight not transposed) runs: compare with what it gives.
    weight = state_dict["layers.0.attn.q_proj.weight"].double()
    x = torch.randn(3, weight.shape[1], dtype=torch.float64)
    out = run_linear(weight.shape[1], weight.shape[0], weight, x)
    assert_close_or_hint(
        out,
        F.linear(x, weight),
        {"the weight is (d_out, d_in): compute x @ W.T, not x @ W": x @ weight},
    )


@pytest.mark.robustness
def test_linear_bfloat16_in_bfloat16_out(state_dict):
    weight = state_dict["layers.0.ffn.w1.weight"]
    x = torch.randn(2, 3, 5, weight.shape[1])
    out = F.linear(x, weight)
    out_bf16 = run_linear(weight.shape[1], weight.shape[0], weight.bfloat16(), x.bfloat16())
    assert not dtype_kept(out_bf16, torch.bfloat16), dtype_kept(out_bf16, torch.bfloat16)
    torch.testing.assert_close(out_bf16.float(), out, atol=0.1, rtol=0.05)


@graded_case_located("embedding")
def test_embedding(snapshot, inputs, state_dict):
    weight = state_dict["token_embeddings.weight"]
    snapshot.assert_match(run_embedding(*weight.shape, weight, inputs["in_indices"]), "embedding")


@pytest.mark.robustness
@pytest.mark.parametrize("bad_id", [-1, 512, 10_000])
def test_embedding_rejects_ids_outside_vocabulary(state_dict, bad_id):
    weight = state_dict["token_embeddings.weight"]
    with raises_an_error():
        run_embedding(*weight.shape, weight, torch.tensor([[0, bad_id]]))


@graded_case_located("rmsnorm")
def test_rmsnorm(snapshot, inputs, state_dict):
    gain = state_dict["layers.0.ln1.weight"]
    snapshot.assert_match(
        run_rmsnorm(gain.shape[0], 1e-5, gain, inputs["in_embeddings"]), "rmsnorm"
    )


def on_any_rank(call, x: torch.Tensor, adapter: str) -> torch.Tensor:
    """``call(x)``, failing with what the handout asks when the layer refuses ``x``'s rank."""
    try:
        return call(x)
    except NotImplementedError:
        raise  # not written yet: no rank to blame
    except Exception as error:
        raise AssertionError(
            f"{adapter} raised on a {x.dim()}-D input: {error!r}\n"
            "hint: the layer takes any number of leading dimensions (the graded cases give it "
            "inputs of 2 to 4 dimensions), not exactly (batch, sequence)"
        ) from error


@pytest.mark.parametrize("leading", [(7,), (2, 2, 3)], ids=["2-D", "4-D"])
def test_rmsnorm_any_leading_dims(state_dict, leading):
    # Small values, as some graded inputs have, where the eps given changes the output.
    gain = state_dict["layers.0.ln1.weight"]
    x = 0.1 * torch.randn(*leading, gain.shape[0])
    out = on_any_rank(lambda x: run_rmsnorm(gain.shape[0], 1e-5, gain, x), x, "run_rmsnorm")
    wide = x.double()
    expected = wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + 1e-5) * gain.double()
    torch.testing.assert_close(
        out.double(),
        expected,
        atol=1e-5,
        rtol=1e-5,
        msg=lambda message: (
            message + "\nhint: normalise over the last axis, whatever the "
            "input's rank, with the eps given (on inputs this small it shows)"
        ),
    )


def check_rmsnorm_in_float32(state_dict, dtype: torch.dtype) -> None:
    gain = state_dict["layers.0.ln1.weight"].to(dtype)
    # The statistics are computed in float32; the result comes back in the input's dtype.
    x = (300 * torch.randn(3, 7, gain.shape[0])).to(dtype)
    out = run_rmsnorm(gain.shape[0], 1e-5, gain, x)
    assert not dtype_kept(out, dtype), dtype_kept(out, dtype)
    # RMSNorm's definition in float64 (F.rms_norm is torch 2.4+; Intel Macs have torch 2.2).
    wide = x.double()
    expected = wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + 1e-5) * gain.double()

    def in_float32(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        return run_rmsnorm(gain.shape[0], 1e-5, gain, x)

    torch.testing.assert_close(
        out.double(),
        expected,
        atol=0.05,
        rtol=0.02,
        msg=lambda message: message + as_lines(lambda: float32_line(in_float32, x, gain, out)),
    )


def test_rmsnorm_bfloat16_is_computed_in_float32(state_dict):
    check_rmsnorm_in_float32(state_dict, torch.bfloat16)


def test_rmsnorm_float16_is_computed_in_float32(state_dict):
    # In float16, x**2 overflows past |x| = 256: these inputs reach about 1,000.
    check_rmsnorm_in_float32(state_dict, torch.float16)


@graded_case_located("silu")
def test_silu(snapshot, inputs):
    snapshot.assert_match(run_silu(inputs["in_embeddings"]), "silu")


def test_silu_matches_torch_on_extremes():
    x = torch.tensor([-1e4, -80.0, -1.0, 0.0, 1.0, 80.0, 1e4])
    torch.testing.assert_close(run_silu(x), F.silu(x))


@graded_case_located("swiglu")
def test_swiglu(snapshot, inputs, state_dict):
    w1, w2, w3 = (state_dict[f"layers.0.ffn.{n}.weight"] for n in ("w1", "w2", "w3"))
    d_ff, d_model = w1.shape
    snapshot.assert_match(run_swiglu(d_model, d_ff, w1, w2, w3, inputs["in_embeddings"]), "swiglu")


def test_swiglu_any_leading_dims(state_dict):
    w1, w2, w3 = (state_dict[f"layers.0.ffn.{n}.weight"] for n in ("w1", "w2", "w3"))
    d_ff, d_model = w1.shape
    x = torch.randn(2, 2, 3, d_model)
    out = on_any_rank(lambda x: run_swiglu(d_model, d_ff, w1, w2, w3, x), x, "run_swiglu")
    torch.testing.assert_close(out, F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2))


def test_softmax(snapshot, inputs):
    snapshot.assert_match(run_softmax(inputs["in_logits"], dim=-1), "softmax")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_is_stable_for_large_inputs(dim):
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [88.0, 89.0, 90.0]])
    out = run_softmax(x, dim=dim)
    hints = matching_hints(out, softmax_mistakes(x, dim), close)
    assert torch.isfinite(out).all(), "softmax gave NaN or inf" + hints
    # Any float32 route loses about |x| * eps relative precision at |x| = 1000 (e.g. through
    # exp(x - logsumexp(x))), so the tolerance scales with the inputs.
    rtol = 4 * torch.finfo(torch.float32).eps * x.abs().max().item()
    torch.testing.assert_close(
        out, F.softmax(x, dim=dim), rtol=rtol, atol=1e-5, msg=lambda text: text + hints
    )
    torch.testing.assert_close(run_softmax(x + 100.0, dim=dim), out, rtol=rtol, atol=1e-5)
