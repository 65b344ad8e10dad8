"""Linear, Embedding, RMSNorm, SiLU, SwiGLU and softmax: snapshots plus the properties the
handout asks for (any leading dims, RMSNorm in float32); dtype and error extras are advice.

Initialisation (the last section): freshly built layers draw their weights as the handout
specifies. Linear: truncated normal, mean 0, variance ``2 / (d_in + d_out)``, cut at ±3σ.
Embedding: N(0, 1) cut at ±3. RMSNorm: gain 1. Every other test loads fixture weights, so only
these see the init. The statistical checks use about a million weights and bounds of six
standard errors of each estimator, computed from the sample size, plus a fixed seed: a correct
init cannot fail them (the chance is below 1e-8 for any seed), while the mistakes they target
sit 20 or more standard errors away."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from .adapters import run_embedding, run_linear, run_rmsnorm, run_silu, run_softmax, run_swiglu
from .expect import raises_an_error
from .hints import assert_close_or_hint, close, dtype_kept, matching_hints, softmax_mistakes
from .lazy_adapters import run_init_embedding, run_init_linear, run_init_rmsnorm
from .localize import as_lines, graded_case_located
from .measure import float32_line, not_finite_line


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
    out = run_silu(x)
    torch.testing.assert_close(
        out, F.silu(x), msg=lambda message: message + as_lines(lambda: not_finite_line(x, out))
    )


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


@graded_case_located("softmax")
def test_softmax(snapshot, inputs):
    snapshot.assert_match(run_softmax(inputs["in_logits"], dim=-1), "softmax")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_is_stable_for_large_inputs(dim):
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [88.0, 89.0, 90.0]])
    out = run_softmax(x, dim=dim)
    hints = matching_hints(out, softmax_mistakes(x, dim), close)
    assert not dtype_kept(out, x.dtype), dtype_kept(out, x.dtype)
    assert torch.isfinite(out).all(), "softmax gave NaN or inf" + hints
    # Any float32 route loses about |x| * eps relative precision at |x| = 1000 (e.g. through
    # exp(x - logsumexp(x))), so the tolerance scales with the inputs.
    rtol = 4 * torch.finfo(torch.float32).eps * x.abs().max().item()
    torch.testing.assert_close(
        out, F.softmax(x, dim=dim), rtol=rtol, atol=1e-5, msg=lambda text: text + hints
    )
    torch.testing.assert_close(run_softmax(x + 100.0, dim=dim), out, rtol=rtol, atol=1e-5)


# --- initialisation ---------------------------------------------------------------------------

SIGMAS = 6.0  # how many standard errors of an estimator a correct init may stray


def standard_normal_cdf(z: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1 + torch.erf(z / math.sqrt(2)))


def truncated_normal_std(std: float, cut: float) -> float:
    """Standard deviation of N(0, std²) conditioned on |x| <= cut·std (closed form)."""
    density = math.exp(-(cut**2) / 2) / math.sqrt(2 * math.pi)
    mass = math.erf(cut / math.sqrt(2))
    return std * math.sqrt(1 - 2 * cut * density / mass)


def check_truncated_normal(
    weights: torch.Tensor, std: float, what: str, *, std_hint: str, cut_hint: str
) -> None:
    """Assert ``weights`` look like i.i.d. draws of N(0, std²) truncated at ±3·std; the hints
    are appended to a wrong spread and a wrong cut respectively."""
    x = weights.detach().double().flatten()
    n = x.numel()
    expected_std = truncated_normal_std(std, 3.0)
    largest = float(x.abs().max())
    assert largest <= 3 * std * (1 + 1e-6), (
        f"{what}: |weight| reaches {largest:.4g}, beyond the ±3σ = ±{3 * std:.4g} cut\nhint: "
        + beyond_the_cut(x, std, std_hint=std_hint, cut_hint=cut_hint)
    )
    mean_bound = SIGMAS * expected_std / math.sqrt(n)
    assert abs(float(x.mean())) <= mean_bound, (
        f"{what}: mean {float(x.mean()):.3g} is not 0 (allowed ±{mean_bound:.2g} for {n} weights)"
        "\nhint: the weights must be centred on 0: mean 0 and a cut symmetric about it (a = -b)"
    )
    # The sample variance has standard error sqrt((m4 - s^4) / n) <= sqrt(2 / n) * s^2, because a
    # truncated normal is lighter-tailed than the normal (m4 <= 3 s^4).
    variance = float(x.var())
    variance_bound = SIGMAS * math.sqrt(2 / n) * expected_std**2
    assert abs(variance - expected_std**2) <= variance_bound, (
        f"{what}: std {math.sqrt(variance):.5g}, expected {expected_std:.5g} "
        f"(N(0, {std:.4g}²) truncated at ±3σ)\nhint: {std_hint}"
    )
    # Kolmogorov-Smirnov distance to the truncated normal's CDF; P(D > d) <= 2 exp(-2 n d^2).
    sample = x.sort().values / std
    mass = math.erf(3 / math.sqrt(2))
    model_cdf = (standard_normal_cdf(sample) - standard_normal_cdf(torch.tensor(-3.0))) / mass
    ranks = torch.arange(1, n + 1, dtype=torch.float64) / n
    distance = float(torch.maximum(ranks - model_cdf, model_cdf - (ranks - 1 / n)).max())
    distance_bound = math.sqrt(math.log(2 / 1e-9) / (2 * n))
    assert distance <= distance_bound, (
        f"{what}: the weights' distribution is not a truncated normal (KS distance {distance:.4f} "
        f"> {distance_bound:.4f})\nhint: the right mean and spread, but not the shape of "
        "N(0, σ²) cut at ±3σ: draw with torch.nn.init.trunc_normal_"
    )


def beyond_the_cut(x: torch.Tensor, std: float, *, std_hint: str, cut_hint: str) -> str:
    """Weights beyond ±3σ: cut at 3 of their own (wrong) σ, or not at ±3σ at all?"""
    # The σ of the normal the weights were drawn from, read off their spread as if cut at ±3σ.
    spread = float(x.std()) * std / truncated_normal_std(std, 3.0)
    reach = float(x.abs().max()) / spread
    if abs(reach - 3) <= 0.1:
        return f"they are cut at ±3 of their own σ, about {spread:.4g}, not {std:.4g}: {std_hint}"
    return f"they reach ±{reach:.2g} of their own σ, about {spread:.4g}: {cut_hint}"


def test_linear_init_is_truncated_normal_with_glorot_variance() -> None:
    torch.manual_seed(0)
    # A small layer first (the checks' bounds hold at any size): a mean far outside [a, b] makes
    # trunc_normal_ take a second for this one and many minutes for the large one.
    for d_in, d_out in ((8, 24), (512, 2048)):
        weight = run_init_linear(d_in, d_out)
        assert tuple(weight.shape) == (d_out, d_in), (
            f"Linear weight shape {tuple(weight.shape)}, expected (d_out, d_in) = {(d_out, d_in)}"
        )
        std = math.sqrt(2 / (d_in + d_out))
        check_truncated_normal(
            weight,
            std,
            f"Linear init ({d_in} -> {d_out})",
            std_hint=f"the handout's std is sqrt(2 / (d_in + d_out)) = {std:.4g}; passing the "
            f"variance 2 / (d_in + d_out) = {std**2:.4g} as the std is a common slip",
            cut_hint="truncate at ±3σ (a=-3*std, b=3*std), not at ±3: trunc_normal_'s a and b "
            "are absolute bounds",
        )


def test_embedding_init_is_truncated_standard_normal() -> None:
    torch.manual_seed(0)
    vocab_size, d_model = 2048, 512
    weight = run_init_embedding(vocab_size, d_model)
    assert tuple(weight.shape) == (vocab_size, d_model), (
        f"Embedding weight shape {tuple(weight.shape)}, expected {(vocab_size, d_model)}"
    )
    check_truncated_normal(
        weight,
        1.0,
        "Embedding init",
        std_hint="the handout initialises embeddings from N(0, 1) truncated at ±3 (std 1, not "
        "GPT-2's 0.02 and not the Linear layer's Glorot std)",
        cut_hint="truncate the embedding init at ±3",
    )


def test_rmsnorm_init_gain_is_one() -> None:
    gain = run_init_rmsnorm(96)
    assert tuple(gain.shape) == (96,), f"RMSNorm gain shape {tuple(gain.shape)}, expected (96,)"
    assert torch.equal(gain.double(), torch.ones(96, dtype=torch.float64)), (
        f"RMSNorm gain should start at exactly 1, got values in [{float(gain.min())}, "
        f"{float(gain.max())}]"
    )
