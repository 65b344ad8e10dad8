"""Initialisation: freshly built layers draw their weights as the handout specifies.

Linear: truncated normal, mean 0, variance ``2 / (d_in + d_out)``, cut at ±3σ. Embedding: N(0, 1)
cut at ±3. RMSNorm: gain 1. Every other test loads fixture weights, so only these see the init.

The statistical checks use about a million weights and bounds of six standard errors of each
estimator, computed from the sample size, plus a fixed seed: a correct init cannot fail them
(the chance is below 1e-8 for any seed), while the mistakes they target sit 20 or more
standard errors away.
"""

from __future__ import annotations

import math

import torch

from .lazy_adapters import run_init_embedding, run_init_linear, run_init_rmsnorm

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
    d_in, d_out = 512, 2048
    weight = run_init_linear(d_in, d_out)
    assert tuple(weight.shape) == (d_out, d_in), (
        f"Linear weight shape {tuple(weight.shape)}, expected (d_out, d_in) = {(d_out, d_in)}"
    )
    std = math.sqrt(2 / (d_in + d_out))
    check_truncated_normal(
        weight,
        std,
        "Linear init",
        std_hint=f"the handout's std is sqrt(2 / (d_in + d_out)) = {std:.4g}; passing the "
        f"variance 2 / (d_in + d_out) = {std**2:.4g} as the std is a common slip",
        cut_hint="truncate at ±3σ (a=-3*std, b=3*std), not at ±3: trunc_normal_'s a and b are "
        "absolute bounds",
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
