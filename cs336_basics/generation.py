"""Decoding: sample a continuation from a language model, one token at a time.

Each step turns the last position's logits into a distribution (temperature, then nucleus /
top-p truncation) and samples from it; temperature 0 means greedy ``argmax``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_basics.functional import softmax
from cs336_basics.model import TransformerLM


def top_p_filter(probabilities: Float[Tensor, " vocab"], top_p: float) -> Float[Tensor, " vocab"]:
    """Keep the smallest set of most likely tokens whose total probability reaches ``top_p``;
    zero the rest and renormalise. ``top_p = 1`` keeps everything."""
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1]; got {top_p}")
    # BEGIN SOLUTION
    if top_p == 1.0:
        return probabilities
    sorted_probabilities, order = probabilities.sort(descending=True)
    mass_before = sorted_probabilities.cumsum(dim=-1) - sorted_probabilities
    sorted_probabilities = sorted_probabilities.masked_fill(mass_before >= top_p, 0.0)
    kept = torch.zeros_like(probabilities).scatter(-1, order, sorted_probabilities)
    return kept / kept.sum()
    # END SOLUTION


def sample_next_token(
    logits: Float[Tensor, " vocab"],
    temperature: float = 1.0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> int:
    """One token id from ``softmax(logits / temperature)`` truncated to its top-p nucleus."""
    if temperature < 0:
        raise ValueError(f"temperature must be non-negative; got {temperature}")
    # BEGIN SOLUTION
    if temperature == 0:
        return int(logits.argmax())
    probabilities = top_p_filter(softmax(logits.double() / temperature, dim=-1), top_p)
    return int(torch.multinomial(probabilities.cpu(), 1, generator=generator))
    # END SOLUTION


@torch.no_grad()
def generate(
    model: TransformerLM,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
) -> list[int]:
    """The new token ids continuing ``prompt_ids`` (the prompt itself is not included).

    Every step runs the model over the whole sequence so far and samples from the last
    position's logits. Stops after ``max_new_tokens``, after emitting ``eos_id`` (which is
    included), or when the sequence fills the model's context window. A prompt longer than the
    window keeps only its last ``context_length - 1`` tokens. Seed ``generator`` for
    reproducible samples.
    """
    sequence, budget = decoding_window(model, prompt_ids, max_new_tokens)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    # BEGIN SOLUTION
    new_tokens: list[int] = []
    for _ in range(budget):
        logits = model(torch.tensor([sequence], device=device))[0, -1]
        token = sample_next_token(logits, temperature, top_p, generator)
        new_tokens.append(token)
        sequence = sequence + [token]
        if token == eos_id:
            break
    # END SOLUTION
    model.train(was_training)
    return new_tokens


def decoding_window(
    model: TransformerLM, prompt_ids: list[int], max_new_tokens: int
) -> tuple[list[int], int]:
    """The prompt cut to fit ``model.context_length`` with room for one new token, and how many
    tokens may follow it. Ids outside the model's vocabulary are an error, caught here on the
    host: the forward checks ids only on the CPU."""
    if not prompt_ids:
        raise ValueError("the prompt must hold at least one token (e.g. the end-of-text token)")
    vocab_size = model.token_embeddings.weight.shape[0]
    if not 0 <= min(prompt_ids) <= max(prompt_ids) < vocab_size:
        bad = min(prompt_ids) if min(prompt_ids) < 0 else max(prompt_ids)
        raise ValueError(
            f"prompt token id {bad} is outside the model's vocabulary [0, {vocab_size})"
        )
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be non-negative; got {max_new_tokens}")
    context_length = model.context_length
    keep = max(context_length - 1, 1)
    sequence = list(prompt_ids[-keep:])
    return sequence, min(max_new_tokens, context_length - len(sequence))


def complete_prompts(
    model: TransformerLM,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    end_token: str = "<|endoftext|>",
    generate_fn: Callable[..., list[int]] = generate,
) -> list[str]:
    """Each text prompt followed by its sampled continuation (up to and including ``end_token``).

    An empty prompt starts a fresh document: it is the end-of-text token alone. ``generate_fn``
    is the decoding loop (``generate``, or a cached one with the same parameters).
    """
    eos_id = tokenizer.special_ids.get(end_token)
    generator = torch.Generator().manual_seed(seed)
    completions = []
    for prompt in prompts:
        prompt_ids = tokenizer.encode(prompt) if prompt else []
        if not prompt_ids:
            if eos_id is None:
                raise ValueError(
                    f"an empty prompt needs the end token {end_token!r} in the tokenizer"
                )
            prompt_ids = [eos_id]
        new_ids = generate_fn(
            model, prompt_ids, max_new_tokens, temperature, top_p, eos_id, generator
        )
        completions.append(prompt + tokenizer.decode(new_ids))
    return completions
