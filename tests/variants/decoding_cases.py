"""Shared pieces of the decoding tests: prompts of different lengths, the uncached greedy
reference every faster path must reproduce, and per-row stop tokens chosen from it."""

from __future__ import annotations

import torch

from .adapters import run_generate_variant

PROMPTS = [[3, 1, 4], [5], [2, 7, 1, 8, 2, 8], [9, 9]]


def greedy_alone(model: torch.nn.Module, prompt: list[int], max_new_tokens: int) -> list[int]:
    """The reference: uncached greedy decoding, the whole sequence through the model each step."""
    return run_generate_variant(model, prompt, max_new_tokens, use_kv_cache=False)


def stops_and_expected(
    model: torch.nn.Module, prompts: list[list[int]], max_new_tokens: int
) -> tuple[list[int | None], list[list[int]]]:
    """Per-row stop tokens (the third token each row emits alone; the last row has none) and
    what each row must then produce: its tokens up to and including its stop token."""
    alone = [greedy_alone(model, prompt, max_new_tokens) for prompt in prompts]
    stops: list[int | None] = [tokens[2] for tokens in alone[:-1]] + [None]
    expected = [
        tokens[: tokens.index(stop) + 1]
        for tokens, stop in zip(alone[:-1], stops[:-1], strict=True)
    ]
    expected.append(alone[-1])
    assert all(len(tokens) <= 3 for tokens in expected[:-1])  # the stops really cut the rows
    return stops, expected
