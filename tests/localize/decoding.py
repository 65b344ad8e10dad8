"""Decoding in the shipped tests: where top-p, sampling and generation raised, and where
greedy tokens first leave the expected ones."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tests.localize.stages import raises


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
