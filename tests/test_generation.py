"""Decoding: ``run_generate`` continues a prompt exactly as your model's own logits say, stops
at the end token, and samples from the tempered top-p nucleus."""

from __future__ import annotations

import pytest
import torch

from .lazy_adapters import get_transformer_lm, run_generate, run_sample_next_token
from .localize import as_lines, diagnosed_if_raised
from .localize.decoding import generate_raised, greedy_difference

PROMPT = [11, 7, 300, 42]
# A nucleus this small keeps only the most likely token: sampling becomes greedy decoding
# without asking for a temperature of 0 (which the handout does not define).
GREEDY = dict(temperature=1.0, top_p=1e-9)


@pytest.fixture
def model(state_dict, model_config):
    keys = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff")
    return get_transformer_lm(
        *(model_config[k] for k in keys), model_config["rope_theta"], state_dict
    )


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


def test_generate_samples_from_the_tempered_nucleus(model):
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
    assert not outside, f"sampled tokens {outside} lie outside the top-p nucleus"
    frequencies = counts / draws
    spread = 5 * (expected * (1 - expected) / draws).sqrt() + 1e-3
    wrong = (frequencies - expected).abs() > spread
    assert not wrong.any(), (
        f"sample frequencies {frequencies[expected > 0].tolist()} differ from the tempered, "
        f"renormalised nucleus {expected[expected > 0].tolist()}\n"
        "hint: divide the logits by the temperature before the softmax, then renormalise the "
        "kept probabilities"
    )
