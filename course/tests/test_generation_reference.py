"""Decoding: greedy is the argmax; temperature and top-p sample correctly."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from cs336_basics.builder import build_model
from cs336_basics.config import ModelConfig
from cs336_basics.generation import generate, sample_next_token, top_p_filter

CONFIG = ModelConfig(
    vocab_size=50, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=64
)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(CONFIG)


def test_generation_greedy_is_argmax_of_the_full_forward_at_every_step(model):
    prompt = [3, 14, 15, 9, 2, 6]
    generated = generate(model, prompt, 20, temperature=0.0)
    assert len(generated) == 20
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(20):
            sequence.append(int(model(torch.tensor([sequence]))[0, -1].argmax()))
    assert sequence[len(prompt) :] == generated


def test_generation_seeded_sampling_is_reproducible(model):
    def sample(seed):
        return generate(
            model,
            [7],
            15,
            temperature=1.0,
            top_p=0.9,
            generator=torch.Generator().manual_seed(seed),
        )

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)


def test_generation_stops_at_end_token_and_context_window(model):
    greedy = generate(model, [4, 5], 10, temperature=0.0)
    eos = greedy[3]
    stopped = generate(model, [4, 5], 10, temperature=0.0, eos_id=eos)
    assert stopped == greedy[: greedy.index(eos) + 1]
    full = generate(model, list(range(30)), 100, temperature=0.0)
    assert len(full) == CONFIG.context_length - 30
    long_prompt = generate(model, list(range(40)), 5, temperature=0.0)
    assert len(long_prompt) == 1  # kept the last 31 prompt tokens, room for one more
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [], 5)


def test_generation_top_p_keeps_the_smallest_nucleus():
    probabilities = torch.tensor([0.05, 0.5, 0.1, 0.3, 0.05])
    kept = top_p_filter(probabilities, 0.75)  # 0.5 + 0.3 reaches 0.75; nothing else is needed
    torch.testing.assert_close(kept, torch.tensor([0.0, 0.625, 0.0, 0.375, 0.0]))
    kept = top_p_filter(probabilities, 0.85)  # 0.5 + 0.3 = 0.8 < 0.85, so 0.1 joins
    torch.testing.assert_close(kept, torch.tensor([0.0, 0.5, 0.1, 0.3, 0.0]) / 0.9)
    assert torch.equal(top_p_filter(probabilities, 1.0), probabilities)
    assert top_p_filter(probabilities, 0.01).tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_generation_sampling_follows_tempered_softmax():
    logits = torch.tensor([1.0, 2.0, 0.0])
    generator = torch.Generator().manual_seed(0)
    draws = Counter(sample_next_token(logits, 2.0, 1.0, generator) for _ in range(4000))
    expected = torch.softmax(logits / 2.0, dim=-1)
    for token in range(3):
        assert abs(draws[token] / 4000 - expected[token].item()) < 0.03
    assert sample_next_token(logits, 0.0) == 1
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, -1.0)
