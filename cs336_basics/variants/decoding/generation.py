"""Decoding with a KV cache: the prompt runs once, then every step feeds only the newest token.

``generate_batch`` decodes several prompts at once, with or without the cache, and optionally
over a static (preallocated) cache with a compiled single-token step (``decode_steps.py``);
``generate_cached`` is its one-prompt form with ``generate``'s parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from cs336_basics.generation import decoding_window, sample_next_token
from cs336_basics.model import TransformerLM
from cs336_basics.variants.decoding.decode_steps import (
    CompileOption,
    decode_steps,
    static_cache_length,
)


@torch.no_grad()
def generate_cached(
    model: TransformerLM,
    prompt_ids: list[int],
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
    *,
    static_cache: bool = False,
    compile: CompileOption = False,
    on_token: Callable[[int], None] | None = None,
) -> list[int]:
    """``generate`` (same parameters, same samples) with the KV caches of ``kv_caches``, so a
    step costs one position instead of the whole sequence. A model without cache-capable
    attention (the handout's ``TransformerLM``) runs the whole sequence each step, as
    ``generate`` does. ``static_cache``, ``compile`` and ``on_token`` (called with each new
    token as soon as it is chosen, e.g. to print it) are ``generate_batch``'s."""
    return generate_batch(
        model,
        [prompt_ids],
        max_new_tokens,
        temperature,
        top_p,
        eos_id,
        generator,
        static_cache=static_cache,
        compile=compile,
        on_token=None if on_token is None else lambda row, token: on_token(token),
    )[0]


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
    *,
    static_cache: bool = False,
    compile: CompileOption = False,
    on_token: Callable[[int, int], None] | None = None,
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

    ``static_cache``: preallocate the caches (``StaticKVCache``) for the longest prompt plus
    ``max_new_tokens``, rounded up to a power of two. ``compile`` (implies ``static_cache``):
    run each single-token step compiled, ``True`` for ``torch.compile(mode="reduce-overhead")``
    (CUDA graphs on a GPU), or the name of a ``torch.compile`` backend. ``on_token(row, token)``
    is called with every new token as soon as it is chosen.
    """
    if not prompts:
        raise ValueError("generate_batch needs at least one prompt")
    if (static_cache or compile) and not use_kv_cache:
        raise ValueError("static_cache and compile need the KV cache (use_kv_cache=True)")
    windows = [decoding_window(model, prompt, max_new_tokens) for prompt in prompts]
    stops = _per_row_stop_ids(eos_ids, len(prompts))
    rows = [
        _Row(list(sequence), budget, stop)
        for (sequence, budget), stop in zip(windows, stops, strict=True)
    ]
    static_length = None
    if static_cache or compile:
        needed = max(len(row.prompt) + row.budget for row in rows)
        static_length = static_cache_length(needed, model.context_length)
    was_training = model.training
    model.eval()
    fed = min(len(row.prompt) for row in rows)
    sequences = [row.prompt[:fed] for row in rows]
    with decode_steps(model, use_kv_cache, static_length, compile) as next_logits:
        while not all(row.done for row in rows):
            choose = _chooser(next_logits(sequences), temperature, top_p, generator, on_token)
            for i, (row, sequence) in enumerate(zip(rows, sequences, strict=True)):
                sequence.append(row.advance(fed, functools.partial(choose, i)))
            fed += 1
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
    on_token: Callable[[int, int], None] | None = None,
) -> Callable[[int], int]:
    """Row ``i``'s next token from ``logits[i]``, as ``sample_next_token`` picks it, reported to
    ``on_token``. Greedy picks are made for all rows at once: one argmax and one copy to the
    host per step."""
    if temperature == 0:
        picks = logits.argmax(dim=-1).tolist()

        def pick(i: int) -> int:
            return picks[i]
    else:

        def pick(i: int) -> int:
            return sample_next_token(logits[i], temperature, top_p, generator)

    if on_token is None:
        return pick

    def pick_and_report(i: int) -> int:
        token = pick(i)
        on_token(i, token)
        return token

    return pick_and_report


def _per_row_stop_ids(eos_ids: int | Sequence[int | None] | None, rows: int) -> list[int | None]:
    if eos_ids is None or isinstance(eos_ids, int):
        return [eos_ids] * rows
    stops = list(eos_ids)
    if len(stops) != rows:
        raise ValueError(
            f"eos_ids has {len(stops)} entries for {rows} prompts; give one per prompt"
        )
    return stops
