"""Decoding with a KV cache: the prompt runs once, then every step feeds only the newest token.

``generate_batch`` decodes several prompts at once, with or without the cache.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

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


@torch.no_grad()
def generate_batch(
    model: TransformerLM,
    prompts: list[list[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    eos_ids: int | Sequence[int | None] | None = None,
    generator: torch.Generator | None = None,
    use_kv_cache: bool = True,
) -> list[list[int]]:
    """The new token ids continuing each prompt, decoded as one batch.

    Prompts may differ in length. No padding and no attention mask are needed: every row
    advances one position per model call in lockstep from the shortest prompt's length, and a
    row still inside its prompt is fed its next prompt token instead of a sample. Each row stops
    on its own: after ``max_new_tokens``, after its stop token (``eos_ids``: one id for every
    row, or one id or ``None`` per row), or when it fills the context window (prompts are cut
    as ``generate`` cuts them); a stopped row is fed its last token until all rows stop.
    Greedy rows (``temperature=0``) equal ``generate`` on each prompt alone, except for MoE
    models with capacity limits, where rows compete for expert slots. Sampled rows draw from
    ``generator`` in row order. Without ``use_kv_cache``, or for a model with no cache-capable
    attention, every call runs the whole sequence so far.
    """
    if not prompts:
        raise ValueError("generate_batch needs at least one prompt")
    windows = [decoding_window(model, prompt, max_new_tokens) for prompt in prompts]
    stops = _per_row_stop_ids(eos_ids, len(prompts))
    rows = [
        _Row(list(sequence), budget, stop)
        for (sequence, budget), stop in zip(windows, stops, strict=True)
    ]
    cached = use_kv_cache and bool(caching_layers(model))
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    fed = min(len(row.prompt) for row in rows)
    inputs = [row.prompt[:fed] for row in rows]
    with kv_caches(model) if cached else contextlib.nullcontext():
        while not all(row.done for row in rows):
            logits = model(torch.tensor(inputs, device=device))[:, -1]
            choose = _chooser(logits, temperature, top_p, generator)
            column = [row.advance(fed, functools.partial(choose, i)) for i, row in enumerate(rows)]
            fed += 1
            inputs = (
                [[token] for token in column]
                if cached
                else [sequence + [token] for sequence, token in zip(inputs, column, strict=True)]
            )
    model.train(was_training)
    return [row.new_tokens for row in rows]


class _Row:
    """One prompt of a batch: its (cut) prompt, what it has generated, and when it stops."""

    def __init__(self, prompt: list[int], budget: int, stop_id: int | None) -> None:
        self.prompt, self.budget, self.stop_id = prompt, budget, stop_id
        self.new_tokens: list[int] = []
        self.done = budget == 0

    def advance(self, fed: int, choose: Callable[[], int]) -> int:
        """The token this row feeds next after its first ``fed`` tokens; ``choose`` picks a new
        token from the model's logits there (called only when the row generates one)."""
        if fed < len(self.prompt):
            return self.prompt[fed]
        if not self.done:
            token = choose()
            self.new_tokens.append(token)
            self.done = token == self.stop_id or len(self.new_tokens) == self.budget
        return self.new_tokens[-1] if self.new_tokens else self.prompt[-1]


def _chooser(
    logits: Float[Tensor, "batch vocab"],
    temperature: float,
    top_p: float,
    generator: torch.Generator | None,
) -> Callable[[int], int]:
    """Row ``i``'s next token from ``logits[i]``, as ``sample_next_token`` picks it. Greedy
    picks are made for all rows at once: one argmax and one copy to the host per step."""
    if temperature == 0:
        picks = logits.argmax(dim=-1).tolist()
        return lambda i: picks[i]
    return lambda i: sample_next_token(logits[i], temperature, top_p, generator)


def _per_row_stop_ids(eos_ids: int | Sequence[int | None] | None, rows: int) -> list[int | None]:
    if eos_ids is None or isinstance(eos_ids, int):
        return [eos_ids] * rows
    stops = list(eos_ids)
    if len(stops) != rows:
        raise ValueError(
            f"eos_ids has {len(stops)} entries for {rows} prompts; give one per prompt"
        )
    return stops
