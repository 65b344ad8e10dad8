"""Decoding: top-p and temperature at their boundaries, then ``run_generate``: it continues a
prompt exactly as your model's own logits say, stops at the end token, and samples from the
tempered top-p nucleus.

- top-p: the nucleus is the *smallest* set of most likely tokens whose mass reaches ``top_p``,
  so mass exactly equal to ``top_p`` closes it (inclusive), and of tied tokens only as many as
  needed are kept; probabilities are dyadic (0.5, 0.25, ...), so sums are exact in float32 and
  float64;
- temperature: samples follow ``softmax(logits / T)``; as ``T -> 0`` sampling becomes argmax."""

from __future__ import annotations

import math

import pytest
import torch

from .hints import diagnosis_lines
from .lazy_adapters import (
    get_transformer_lm,
    run_generate,
    run_sample_next_token,
    run_softmax,
    run_top_p_filter,
)
from .localize import as_lines, diagnosed_if_raised
from .localize.decoding import generate_raised, greedy_difference, sampling_raised, top_p_raised

PROMPT = [11, 7, 300, 42]
# A nucleus this small keeps only the most likely token: sampling becomes greedy decoding
# without asking for a temperature of 0 (which the handout does not define).
GREEDY = dict(temperature=1.0, top_p=1e-9)


def lm_from(config: dict, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    keys = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff")
    return get_transformer_lm(*(config[k] for k in keys), config["rope_theta"], weights)


@pytest.fixture
def model(state_dict, model_config):
    return lm_from(model_config, state_dict)


@pytest.fixture
def one_layer_model(state_dict, model_config):
    """The reference model cut to its first block: a test that runs the model thousands of times
    needs real logits, not three blocks' worth of time for each."""
    first_block = {
        name: tensor
        for name, tensor in state_dict.items()
        if not name.startswith("layers.") or name.startswith("layers.0.")
    }
    return lm_from({**model_config, "num_layers": 1}, first_block)


# --- top-p ------------------------------------------------------------------------------------


def top_p_kept(probabilities: torch.Tensor, top_p: float) -> torch.Tensor:
    """The student's top-p filter; raising gets a note on what a probe located."""
    with diagnosed_if_raised(lambda: top_p_raised(run_top_p_filter)):
        return run_top_p_filter(probabilities, top_p)


def nucleus_diagnosis(probabilities: torch.Tensor, top_p: float, kept: torch.Tensor) -> str:
    """What the kept distribution shows at the boundary: the token whose probability brings the
    mass (most likely first) to top_p or more must stay, the ones after it go, and what stays
    sums to 1. ``""`` when none of that is off."""
    order = torch.argsort(probabilities.double(), descending=True, stable=True)
    mass_before = torch.cumsum(probabilities.double()[order], 0) - probabilities.double()[order]
    inside = order[mass_before < top_p]
    boundary = int(inside[-1])
    got = kept.double()
    if not torch.isfinite(got).all():
        return (
            "\ndiagnosis: your kept probabilities hold NaN, as renormalizing nothing (0/0) gives: "
            "the token that brings the mass to top_p always stays, so the most likely token "
            "is kept whatever top_p is"
        )
    lines = []
    if got[boundary] <= 0:
        lines.append(
            f"the token that brings the mass to top_p (p={float(probabilities[boundary]):g}, "
            f"mass before it {float(mass_before[len(inside) - 1]):g}) was dropped: keep the "
            "token that crosses top_p"
        )
    outside = [int(i) for i in order[len(inside) :] if got[int(i)] > 0]
    if outside:
        lines.append(f"tokens {outside} after the one that reaches top_p were kept")
    if not math.isclose(float(got.sum()), 1.0, abs_tol=1e-6):
        lines.append(f"the kept probabilities sum to {float(got.sum()):.6g}: renormalize them")
    return diagnosis_lines(lines)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top_p_mass_exactly_at_threshold_is_inclusive(dtype) -> None:
    probabilities = torch.tensor([0.125, 0.5, 0.0625, 0.25, 0.0625], dtype=dtype)
    kept = top_p_kept(probabilities, 0.75)  # 0.5 + 0.25 reaches 0.75 exactly
    expected = torch.tensor([0.0, 2 / 3, 0.0, 1 / 3, 0.0], dtype=torch.float64)
    assert torch.allclose(kept.double(), expected, atol=1e-6), (
        f"top_p=0.75 on {probabilities.tolist()} kept {kept.tolist()}, expected "
        f"{expected.tolist()}{nucleus_diagnosis(probabilities, 0.75, kept)}\nhint: the nucleus is the smallest set whose mass is >= top_p: "
        "a token that brings the mass to exactly top_p closes it (compare the mass *before* "
        "each token with top_p, keep the token while that is < top_p)"
    )


def test_top_p_keeps_only_as_many_tied_tokens_as_needed() -> None:
    probabilities = torch.tensor([0.125, 0.5, 0.125, 0.125, 0.125], dtype=torch.float64)
    kept = top_p_kept(probabilities, 0.625)  # 0.5 and any one of the four 0.125s
    assert kept[1].item() == pytest.approx(0.8), f"kept {kept.tolist()}"
    assert sorted(kept.tolist()) == pytest.approx([0, 0, 0, 0.2, 0.8]), (
        f"top_p=0.625 on {probabilities.tolist()} kept {kept.tolist()}: the smallest nucleus "
        "is 0.5 plus one of the tied 0.125 tokens"
    )


def test_top_p_limits() -> None:
    probabilities = torch.tensor([0.25, 0.125, 0.5, 0.125], dtype=torch.float64)
    assert torch.allclose(top_p_kept(probabilities, 1.0).double(), probabilities)
    only_best = top_p_kept(probabilities, 1e-9)
    assert torch.allclose(only_best.double(), torch.tensor([0.0, 0, 1, 0], dtype=torch.float64)), (
        f"a tiny top_p keeps just the most likely token, got {only_best.tolist()}"
        + nucleus_diagnosis(probabilities, 1e-9, only_best)
    )
    just_over = top_p_kept(probabilities, 0.5 + 1e-9)  # now 0.5 alone is not enough
    assert torch.allclose(
        just_over.double(), torch.tensor([1 / 3, 0, 2 / 3, 0], dtype=torch.float64)
    ), (
        f"top_p just above 0.5 keeps the two most likely tokens, got {just_over.tolist()}"
        + nucleus_diagnosis(probabilities, 0.5 + 1e-9, just_over)
    )


# --- temperature ------------------------------------------------------------------------------


def sampled_token(logits: torch.Tensor, temperature: float, top_p: float, generator) -> int:
    """The student's sampler; raising gets a note on what a probe located."""

    def located() -> list[str]:
        return sampling_raised(run_sample_next_token, run_softmax, run_top_p_filter, logits)

    with diagnosed_if_raised(located):
        return run_sample_next_token(logits, temperature, top_p, generator)


@pytest.mark.parametrize(
    "temperature",
    [1e-4, pytest.param(0.0, marks=pytest.mark.robustness)],  # 0 itself: beyond the contract
)
def test_sample_next_token_temperature_to_zero_is_greedy(temperature: float) -> None:
    generator = torch.Generator().manual_seed(0)
    for trial in range(20):
        logits = torch.randn(50, generator=generator) * 3
        # The top two logits differ by at least 0.05, so at T = 1e-4 any other token has
        # probability below 50 * exp(-500).
        top2 = logits.topk(2).values
        logits[logits.argmax()] += max(0.0, 0.05 - float(top2[0] - top2[1]))
        best = int(logits.argmax())
        token = sampled_token(logits, temperature, 1.0, generator)
        assert token == best, (
            f"trial {trial}: temperature {temperature} sampled {token}, argmax is {best}"
            "\nhint: temperature 0 means greedy decoding; divide the logits by T (and "
            "subtract the max before exp, or tiny T overflows)"
        )


def test_sample_next_token_large_logits_small_temperature_stay_finite() -> None:
    logits = torch.tensor([1000.0, 999.0, -1000.0])
    assert sampled_token(logits, 0.01, 1.0, torch.Generator().manual_seed(0)) == 0


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_sample_next_token_frequencies_follow_tempered_softmax(temperature) -> None:
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0])
    draws = 4000
    generator = torch.Generator().manual_seed(1)
    counts = torch.bincount(
        torch.tensor([sampled_token(logits, temperature, 1.0, generator) for _ in range(draws)]),
        minlength=4,
    ).double()
    expected = torch.exp(logits.double() / temperature)
    expected /= expected.sum()
    # Each count is Binomial(draws, p): allow six standard deviations.
    bound = 6 * torch.sqrt(draws * expected * (1 - expected)) + 1
    assert torch.all((counts - draws * expected).abs() <= bound), (
        f"at T={temperature} token counts {counts.tolist()} of {draws}, expected about "
        f"{(draws * expected).round().tolist()}\nhint: {implied_temperature(logits, counts, temperature)}"
    )


def fitted_temperature(logits: torch.Tensor, counts: torch.Tensor) -> float | None:
    """The temperature the drawn frequencies fit: log(count) against the logits has slope 1/T
    (a nucleus only rescales the kept tokens' counts); ``None`` when fewer than two tokens were
    drawn, and ``-1`` when larger logits are drawn less often."""
    seen = counts > 0
    if int(seen.sum()) < 2:
        return None
    x, y = logits.double()[seen], counts[seen].log()
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return 1 / slope if slope > 0 else -1.0


def implied_temperature(logits: torch.Tensor, counts: torch.Tensor, temperature: float) -> str:
    """What the drawn frequencies say of the temperature used."""
    fitted = fitted_temperature(logits, counts)
    if fitted is None:
        return f"only token(s) {(counts > 0).nonzero().flatten().tolist()} were drawn"
    if fitted < 0:
        return "larger logits must be drawn more often; yours are drawn less often"
    return (
        f"your frequencies fit a temperature of about {fitted:.3g}, not {temperature:g}: "
        "sample from softmax(logits / T)"
    )


def outside_nucleus_line(logits: torch.Tensor, counts: torch.Tensor, temperature: float) -> str:
    """Tokens outside the nucleus were drawn: was the temperature off (the frequencies fit
    another one, by more than a quarter), or the nucleus cut at the right temperature?"""
    fitted = fitted_temperature(logits, counts)
    if fitted is None:
        return ""
    if fitted < 0 or abs(math.log(fitted / temperature)) > math.log(1.25):
        return implied_temperature(logits, counts, temperature)
    return (
        f"your frequencies fit the temperature {temperature:g} (about {fitted:.3g}), but the "
        "nucleus holds too many tokens: keep the most likely tokens until their mass reaches "
        "top_p, computed on the tempered probabilities"
    )


# --- generate ---------------------------------------------------------------------------------


def step_by_step_greedy(model, prompt: list[int], steps: int) -> list[int]:
    """An independent decoding loop: a full forward pass per step, argmax of the last logits."""
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(torch.tensor([sequence]))[0, -1]
            top2 = logits.double().topk(2).values
            assert top2[0] - top2[1] > 1e-4, "test setup: a near tie in the logits"
            sequence.append(int(logits.argmax()))
    return sequence[len(prompt) :]


def test_generate_greedy_matches_step_by_step_forward(model, model_config):
    steps = model_config["context_length"] - len(PROMPT)
    expected = step_by_step_greedy(model, PROMPT, steps)
    torch.manual_seed(0)
    with diagnosed_if_raised(lambda: generate_raised(run_sample_next_token, model, PROMPT)):
        got = run_generate(model, PROMPT, steps, eos_id=None, **GREEDY)
    assert got == expected, (
        f"generate produced {got}; decoding step by step with your model's forward pass gives "
        f"{expected}\nhint: generate must return only the new tokens, feed back every sampled "
        "token, and take each step's distribution from the last position's logits"
        + as_lines(lambda: greedy_difference(model, PROMPT, got, expected))
    )


def test_generate_stops_at_the_end_token(model):
    greedy = step_by_step_greedy(model, PROMPT, 8)
    eos = greedy[3]
    first = greedy.index(eos)
    torch.manual_seed(0)
    got = run_generate(model, PROMPT, 8, eos_id=eos, **GREEDY)
    assert got in (greedy[: first + 1], greedy[:first]), (
        f"with end token {eos}, generate produced {got}; the greedy continuation is {greedy}, "
        "so decoding must stop right after it draws the end token"
    )


def test_generate_respects_max_new_tokens(model):
    for count in (0, 1, 3):
        torch.manual_seed(0)
        assert len(run_generate(model, PROMPT, count, eos_id=None, **GREEDY)) == count


def nucleus(probabilities: torch.Tensor, top_p: float) -> torch.Tensor:
    """The handout's top-p: the smallest set of most likely tokens whose mass reaches top_p,
    renormalised."""
    sorted_p, order = probabilities.sort(descending=True)
    keep = int((sorted_p.cumsum(0) < top_p).sum()) + 1
    kept = torch.zeros_like(probabilities)
    kept[order[:keep]] = sorted_p[:keep]
    return kept / kept.sum()


def test_generate_samples_from_the_tempered_nucleus(one_layer_model):
    model = one_layer_model
    temperature, draws = 0.7, 1500
    with torch.no_grad():
        logits = model(torch.tensor([PROMPT]))[0, -1].double()
    tempered = torch.softmax(logits / temperature, dim=-1)
    # top_p halfway between the 4th and 5th cumulative masses: exactly 5 tokens survive.
    cumulative = tempered.sort(descending=True).values.cumsum(0)
    top_p = float(cumulative[3] + cumulative[4]) / 2
    expected = nucleus(tempered, top_p)
    assert int((expected > 0).sum()) == 5

    torch.manual_seed(1234)
    counts = torch.zeros_like(expected)
    for _ in range(draws):
        (token,) = run_generate(model, PROMPT, 1, temperature=temperature, top_p=top_p, eos_id=None)
        counts[token] += 1
    outside = sorted(
        set(torch.nonzero(counts).flatten().tolist())
        - set(torch.nonzero(expected).flatten().tolist())
    )
    assert not outside, f"sampled tokens {outside} lie outside the top-p nucleus" + as_lines(
        lambda: [outside_nucleus_line(logits, counts, temperature)]
    )
    frequencies = counts / draws
    spread = 5 * (expected * (1 - expected) / draws).sqrt() + 1e-3
    wrong = (frequencies - expected).abs() > spread
    assert not wrong.any(), (
        f"sample frequencies {frequencies[expected > 0].tolist()} differ from the tempered, "
        f"renormalised nucleus {expected[expected > 0].tolist()}\n"
        "hint: divide the logits by the temperature before the softmax, then renormalise the "
        "kept probabilities"
    )
