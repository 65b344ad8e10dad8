"""Boundary cases the ordinary tests step around: exact thresholds, ties, limits, wrappers.

- top-p: the nucleus is the *smallest* set of most likely tokens whose mass reaches ``top_p``,
  so mass exactly equal to ``top_p`` closes it (inclusive), and of tied tokens only as many as
  needed are kept;
- temperature: samples follow ``softmax(logits / T)``; as ``T -> 0`` sampling becomes argmax;
- gradient clipping: a norm equal to the maximum is left alone; the scale is
  ``max / (norm + 1e-6)``, whose ``eps`` matters for tiny norms (checked against
  ``torch.nn.utils.clip_grad_norm_``);
- BPE training to exhaustion: a pair whose every occurrence was absorbed by another merge is
  never merged later (worked out by hand below);
- checkpoints of a ``torch.compile``-d or ``DistributedDataParallel``-wrapped model hold the
  plain model's state dict (no ``_orig_mod.`` / ``module.`` prefixes), so they load into an
  unwrapped model and back.

Probabilities are dyadic (0.5, 0.25, ...), so sums are exact in float32 and float64.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import lazy_adapters
from .hints import diagnosis_lines
from .lazy_adapters import (
    run_gradient_clipping,
    run_load_checkpoint,
    run_sample_next_token,
    run_save_checkpoint,
    run_softmax,
    run_top_p_filter,
    run_train_bpe,
)
from .localize import diagnosed_if_raised, graded_case_located
from .localize.decoding import sampling_raised, top_p_raised
from .localize.raised import clipping_raised
from .localize.tokenizers import train_bpe_raised
from .localize.training import saved_file_lines
from .measure import clipping_lines, exhaustion_line, merge_order_line

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


def implied_temperature(logits: torch.Tensor, counts: torch.Tensor, temperature: float) -> str:
    """The temperature the drawn frequencies fit: log(count) against the logits has slope 1/T."""
    seen = counts > 0
    if int(seen.sum()) < 2:
        return f"only token(s) {seen.nonzero().flatten().tolist()} were drawn"
    x, y = logits.double()[seen], counts[seen].log()
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    if slope <= 0:
        return "larger logits must be drawn more often; yours are drawn less often"
    return (
        f"your frequencies fit a temperature of about {1 / slope:.3g}, not {temperature:g}: "
        "sample from softmax(logits / T)"
    )


# --- gradient clipping ------------------------------------------------------------------------


def parameters_with_gradients(*gradients: list[float]) -> list[torch.nn.Parameter]:
    parameters = []
    for values in gradients:
        parameter = torch.nn.Parameter(torch.zeros(len(values)))
        parameter.grad = torch.tensor(values)
        parameters.append(parameter)
    return parameters


def clipped(gradients: list[list[float]], max_l2_norm: float) -> list[torch.Tensor]:
    """The student's clipping of ``gradients``; raising gets a note on what a probe measured."""
    parameters = parameters_with_gradients(*gradients)
    with diagnosed_if_raised(lambda: clipping_raised(run_gradient_clipping)):
        run_gradient_clipping(parameters, max_l2_norm)
    return [p.grad for p in parameters]


def clipping_diagnosis(gradients: list[list[float]], got: list[torch.Tensor], max_norm) -> str:
    lines = clipping_lines([torch.tensor(g) for g in gradients], got, max_norm)
    return diagnosis_lines(lines)


def test_gradient_clipping_norm_equal_to_max_is_left_alone() -> None:
    gradients = [[3.0, 0.0], [4.0]]  # global norm exactly 5
    got = clipped(gradients, 5.0)
    # 5 / (5 + 1e-6) would change them by 2e-7 relative, which the upstream handout allows.
    assert torch.allclose(torch.cat(got), torch.tensor([3.0, 0.0, 4.0]), rtol=1e-6, atol=0), (
        f"gradients of norm exactly max_l2_norm=5 became {torch.cat(got).tolist()}; only norms "
        "above the maximum are scaled" + clipping_diagnosis(gradients, got, 5.0)
    )


@pytest.mark.parametrize("norm, max_l2_norm", [(2e-6, 1e-6), (3e-3, 1e-3), (0.5, 0.25)])
def test_gradient_clipping_eps_in_the_scale_matches_torch(norm, max_l2_norm) -> None:
    direction = torch.tensor([0.6, -0.8, 0.0])
    gradients = [(direction * norm).tolist()]
    (ours,) = clipped(gradients, max_l2_norm)
    theirs = parameters_with_gradients(*gradients)
    torch.nn.utils.clip_grad_norm_(theirs, max_l2_norm)  # scales by max / (norm + 1e-6)
    missing_eps = direction * max_l2_norm
    assert torch.allclose(ours, theirs[0].grad, rtol=1e-5, atol=0), (
        f"norm {norm:g} clipped to max {max_l2_norm:g}: got {ours.tolist()}, torch "
        f"gives {theirs[0].grad.tolist()}"
        + (
            "\nhint: scale by max / (norm + 1e-6); the eps matters when the norm is tiny"
            if torch.allclose(ours, missing_eps, rtol=1e-5)
            else clipping_diagnosis(gradients, [ours], max_l2_norm)
        )
    )


def test_gradient_clipping_zero_gradients_stay_zero() -> None:
    parameters = parameters_with_gradients([0.0, 0.0], [0.0])
    run_gradient_clipping(parameters, 1.0)
    assert all(torch.equal(p.grad, torch.zeros_like(p.grad)) for p in parameters)


# --- checkpoints of wrapped models ------------------------------------------------------------


PREFIX_HINT = (
    "save the state dict of the underlying model (model.module for DDP, model._orig_mod for "
    "torch.compile), not the wrapper's, whose keys carry a prefix; load into the underlying "
    "model the same way"
)


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def trained_step(model: torch.nn.Module) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    return optimizer


def check_plain_round_trip(wrapped: torch.nn.Module, plain: torch.nn.Module, path) -> None:
    """Save ``wrapped``; load into a fresh unwrapped model and a fresh wrapped one."""
    # (The step runs the plain model: the parameters are shared, and calling a compiled model
    # would compile it, which takes long.)
    optimizer = trained_step(plain)
    saved = copy.deepcopy((plain.state_dict(), optimizer.state_dict()))
    run_save_checkpoint(wrapped, optimizer, 7, path)
    fresh = tiny_model(seed=1)
    try:
        iteration = run_load_checkpoint(path, fresh, torch.optim.AdamW(fresh.parameters()))
    except Exception as error:
        raise AssertionError(
            f"a checkpoint of a {type(wrapped).__name__} does not load into the plain model: "
            f"{error}" + diagnosis_lines(saved_file_lines_of(path, *saved))
        ) from error
    assert iteration == 7
    for (name, want), got in zip(
        plain.state_dict().items(), fresh.state_dict().values(), strict=True
    ):
        assert torch.equal(got, want), (
            f"{name} differs after loading into an unwrapped model\nhint: {PREFIX_HINT}"
        )
    rewrapped_inner = tiny_model(seed=2)
    rewrapped = compiled(rewrapped_inner)
    assert run_load_checkpoint(path, rewrapped, torch.optim.AdamW(rewrapped.parameters())) == 7
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            plain.state_dict().values(), rewrapped_inner.state_dict().values(), strict=True
        )
    ), "loading into a torch.compile-d model should restore its underlying model"


def saved_file_lines_of(path, model_state: dict, optimizer_state: dict) -> list[str]:
    """What the checkpoint at ``path`` holds, read back with torch.load; ``[]`` when it cannot
    be read that way (a format of your own: nothing measured)."""
    try:
        contents = torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001  (any file the student wrote)
        return []
    return saved_file_lines(contents, model_state, optimizer_state)


def compiled(model: torch.nn.Module) -> torch.nn.Module:
    """``torch.compile(model)``, or the test skipped where this torch cannot compile: torch 2.2,
    the last built for Intel Macs, has no torch.compile on Python 3.12."""
    try:
        return torch.compile(model)
    except RuntimeError as error:
        pytest.skip(f"torch.compile is not available with this torch and Python: {error}")


@graded_case_located("checkpoint")
def test_checkpoint_of_compiled_model_has_no_wrapper_prefix(tmp_path) -> None:
    plain = tiny_model(seed=0)
    check_plain_round_trip(compiled(plain), plain, tmp_path / "compiled.pt")


def test_checkpoint_of_ddp_model_has_no_wrapper_prefix(tmp_path) -> None:
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this build")
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        plain = tiny_model(seed=0)
        check_plain_round_trip(DistributedDataParallel(plain), plain, tmp_path / "ddp.pt")
    finally:
        dist.destroy_process_group()


def test_checkpoint_loads_into_ddp_model(tmp_path) -> None:
    plain = tiny_model(seed=0)
    run_save_checkpoint(plain, trained_step(plain), 3, tmp_path / "plain.pt")
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        inner = tiny_model(seed=1)
        wrapped = DistributedDataParallel(inner)
        assert (
            run_load_checkpoint(
                tmp_path / "plain.pt", wrapped, torch.optim.AdamW(wrapped.parameters())
            )
            == 3
        )
    finally:
        dist.destroy_process_group()
    assert all(
        torch.equal(a, b)
        for a, b in zip(plain.state_dict().values(), inner.state_dict().values(), strict=True)
    )


# --- BPE training until nothing is left ---------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected, counts",
    [
        # Pre-tokens "abc", " abc". Counts (a,b) 2, (b,c) 2, (' ',a) 1. The tie goes to the
        # greater pair (b,c); "a bc" then leaves no (a,b) at all, so (a,b) and (' ',a) never
        # come back once a+bc and ' '+abc are merged.
        ("abc abc", [(b"b", b"c"), (b"a", b"bc"), (b" ", b"abc")], [2, 2, 1]),
        # Pre-tokens "xab", " xa" x2, " ab". (x,a) 3 merges first and takes one (a,b), which
        # drops from 2 to 1 but must still be merged: after ' '+xa (2) the count-1 pairs go
        # greatest first: (xa,b), (a,b), then (' ',ab).
        (
            "xab xa xa ab",
            [(b"x", b"a"), (b" ", b"xa"), (b"xa", b"b"), (b"a", b"b"), (b" ", b"ab")],
            [3, 2, 1, 1, 1],
        ),
    ],
)
def test_train_bpe_to_exhaustion_tracks_changing_counts(tmp_path, text, expected, counts) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    with diagnosed_if_raised(lambda: train_bpe_raised(lazy_adapters, {}, {})):
        vocab, merges = run_train_bpe(corpus, 1000, [])
    assert merges == expected, f"merges on {text!r}: {merges}, expected {expected}\nhint: " + (
        merge_order_line(merges, expected, counts) or exhaustion_line(len(merges), len(expected))
    )
    tokens = set(vocab.values())
    missing = [b for b in range(256) if bytes([b]) not in tokens]
    assert len(vocab) == 256 + len(expected), f"vocab of {len(vocab)} tokens" + (
        f"\nhint: the vocab holds the 256 single bytes; yours lacks {len(missing)} of them "
        f"(e.g. {bytes([missing[0]])!r}), beside the {len(expected)} merged tokens"
        if missing
        else ""
    )
