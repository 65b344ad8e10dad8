"""Decoding with a KV cache: the prompt runs once, then every step feeds only the newest token."""

from __future__ import annotations

import torch

from cs336_basics.generation import decoding_window, generate, sample_next_token
from cs336_basics.model import TransformerLM
from cs336_basics.variants.kv_cache import caching_layers, kv_caches


@torch.no_grad()
def generate_cached(
    model: TransformerLM,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
) -> list[int]:
    """``generate`` (same parameters, same samples) with the KV caches of ``kv_caches``, so a
    step costs one position instead of the whole sequence. A model without cache-capable
    attention (the handout's ``TransformerLM``) is decoded by ``generate`` itself."""
    if not caching_layers(model):
        return generate(model, prompt_ids, max_new_tokens, temperature, top_p, eos_id, generator)
    pending, budget = decoding_window(model, prompt_ids, max_new_tokens)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    new_tokens: list[int] = []
    with kv_caches(model):
        for _ in range(budget):
            logits = model(torch.tensor([pending], device=device))[0, -1]
            token = sample_next_token(logits, temperature, top_p, generator)
            new_tokens.append(token)
            pending = [token]
            if token == eos_id:
                break
    model.train(was_training)
    return new_tokens
