"""Every KV-cached decoding path against the plain full forward, for every position encoding.

A cache changes how positions are counted (each call continues after the cached tokens), so each
kind of position information gets its own check: RoPE (with full, grouped-query and latent
attention), sinusoidal and learned absolute tables, and none. The reference is decoding by hand
with the uncached model: one full forward over the whole sequence per step, argmax of the last
position. Runs start from a one-token prompt and go on until the sequence fills the context
window, so the first and the last position a cache can hold are both exercised. Models are in
float64, so two correct computations cannot disagree on a near-tie of the argmax.
"""

from __future__ import annotations

import pytest
import torch

from .adapters import (
    get_variant_lm,
    run_generate_batch_variant,
    run_generate_variant,
    run_transformer_lm_variant_cached,
)

TINY = dict(vocab_size=61, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48)
POSITION_KINDS = {
    "rope": {},
    "rope_grouped_query": dict(num_kv_heads=2),
    "rope_latent_attention": dict(
        attention="mla", kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=6, v_head_dim=5
    ),
    "sinusoidal": dict(position_encoding="sinusoidal"),
    "learned": dict(position_encoding="learned"),
    "none": dict(position_encoding="none"),
}
PROMPTS = [[7], [3, 1, 4, 1, 5, 9]]  # a single token, and a longer prompt
LONGER_THAN_THE_WINDOW = 3 * TINY["context_length"]


def tiny_model(kind: str) -> torch.nn.Module:
    return get_variant_lm({**TINY, **POSITION_KINDS[kind]}, seed=1).double()


def greedy_by_full_forward(model: torch.nn.Module, prompt: list[int]) -> list[int]:
    """New tokens until the sequence fills the context window, each the argmax of one uncached
    forward pass over everything so far."""
    sequence = list(prompt)
    with torch.no_grad():
        while len(sequence) < TINY["context_length"]:
            logits = model(torch.tensor([sequence]))[0, -1]
            sequence.append(int(logits.argmax()))
    return sequence[len(prompt) :]


@pytest.mark.parametrize("kind", sorted(POSITION_KINDS))
def test_kv_cache_logits_equal_full_forward_from_one_token_to_the_context_length(kind: str):
    model = tiny_model(kind)
    shape = (2, TINY["context_length"])
    ids = torch.randint(0, TINY["vocab_size"], shape, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        full = model(ids)
    stepwise, _ = run_transformer_lm_variant_cached(model, ids, prefix_length=1)
    torch.testing.assert_close(
        stepwise,
        full,
        rtol=1e-9,
        atol=1e-10,
        msg=lambda m: f"{kind}: cached logits differ from the full forward's\n{m}",
    )


@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: f"prompt{len(p)}")
@pytest.mark.parametrize("kind", sorted(POSITION_KINDS))
def test_kv_cache_greedy_generation_equals_full_forward_decoding(kind: str, prompt: list[int]):
    model = tiny_model(kind)
    expected = greedy_by_full_forward(model, prompt)
    assert len(expected) == TINY["context_length"] - len(prompt)
    cached = run_generate_variant(model, prompt, LONGER_THAN_THE_WINDOW, use_kv_cache=True)
    assert cached == expected, f"{kind}: cached greedy decoding diverges from the full forward's"
    uncached = run_generate_variant(model, prompt, LONGER_THAN_THE_WINDOW, use_kv_cache=False)
    assert uncached == expected


@pytest.mark.parametrize("kind", sorted(POSITION_KINDS))
def test_kv_cache_batched_generation_equals_full_forward_decoding(kind: str):
    model = tiny_model(kind)
    expected = [greedy_by_full_forward(model, prompt) for prompt in PROMPTS]
    batched = run_generate_batch_variant(model, PROMPTS, LONGER_THAN_THE_WINDOW, True)
    assert batched == expected, f"{kind}: cached batched decoding diverges from the full forward's"
