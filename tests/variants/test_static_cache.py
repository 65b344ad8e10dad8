"""The static (preallocated, written in place) KV cache and the compiled single-token decoding
step: the same logits as the plain forward over the whole sequence, the same greedy tokens as
uncached decoding (alone and batched, with per-row stop tokens), for every attention and
position-encoding kind, and one compiled graph for a whole generation (static shapes)."""

from __future__ import annotations

import pytest
import torch

from .adapters import (
    get_variant_lm,
    run_generate_batch_static,
    run_transformer_lm_variant_static_cached,
)
from .decoding_cases import PROMPTS, greedy_alone, stops_and_expected

TINY = dict(vocab_size=61, context_length=24, d_model=32, num_layers=2, num_heads=4, d_ff=48)
VARIANTS = {
    "mha rope": {},
    "gqa": dict(num_kv_heads=2),
    "mqa qk-norm": dict(num_kv_heads=1, qk_norm=True),
    "fused attention": dict(num_kv_heads=2, fused_attention=True),
    "mla": dict(attention="mla", kv_lora_rank=12, qk_rope_head_dim=4),
    "rope linear scaling": dict(rope_scaling={"rope_type": "linear", "factor": 2.0}),
    "nope": dict(position_encoding="none"),
    "learned positions": dict(position_encoding="learned"),
    "sinusoidal positions": dict(position_encoding="sinusoidal"),
}


def tiny_model(variant: str) -> torch.nn.Module:
    # float64, so a different summation order (over the padded cache) cannot flip a near-tie
    return get_variant_lm({**TINY, **VARIANTS[variant]}, seed=0).double()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_static_cache_logits_equal_the_full_forward(variant: str) -> None:
    model = tiny_model(variant)
    tokens = torch.randint(
        0, TINY["vocab_size"], (2, 11), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        full = model(tokens)
    cached, _ = run_transformer_lm_variant_static_cached(model, tokens, 4, max_length=16)
    torch.testing.assert_close(cached, full, rtol=1e-10, atol=1e-10)


def test_static_cache_holds_its_preallocated_size() -> None:
    model = tiny_model("gqa")
    tokens = torch.randint(
        0, TINY["vocab_size"], (3, 5), generator=torch.Generator().manual_seed(2)
    )
    _, cache_bytes = run_transformer_lm_variant_static_cached(model, tokens, 2, max_length=16)
    # layers x (keys, values) x batch x kv_heads x max_length x head_dim x float64
    assert cache_bytes == 2 * 2 * 3 * 2 * 16 * (32 // 4) * 8


def test_static_cache_refuses_more_tokens_than_it_holds() -> None:
    model = tiny_model("mha rope")
    tokens = torch.zeros(1, 9, dtype=torch.long)
    with pytest.raises(ValueError):
        run_transformer_lm_variant_static_cached(model, tokens, 4, max_length=8)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_static_cache_batched_greedy_equals_uncached_decoding(variant: str) -> None:
    model = tiny_model(variant)
    expected = [greedy_alone(model, prompt, 9) for prompt in PROMPTS]
    assert run_generate_batch_static(model, PROMPTS, 9) == expected
    assert run_generate_batch_static(model, PROMPTS[:1], 9) == expected[:1]


class CountingBackend:
    """A ``torch.compile`` backend that runs each captured graph as it is and counts them."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs) -> object:
        self.graphs += 1
        return graph_module.forward


# Tracing a graph takes seconds: plain pytest traces one kind; `pytest -m ""` (CI) all four.
@pytest.mark.parametrize(
    "variant",
    # Each traces the decoding step with torch.compile (tens of seconds of CPU): slow, in CI.
    [pytest.param(v, marks=pytest.mark.slow) for v in ("gqa", "mla", "learned positions", "nope")],
)
def test_compiled_decoding_equals_uncached_and_compiles_one_graph(variant: str) -> None:
    torch.compiler.reset()  # graphs of earlier tests must not count against the recompile limit
    model, backend = tiny_model(variant), CountingBackend()
    expected = [greedy_alone(model, prompt, 10) for prompt in PROMPTS]
    assert run_generate_batch_static(model, PROMPTS, 10, compile_backend=backend) == expected
    # Static shapes: one graph serves every position of the generation, and a second one
    # with the same batch and length reuses it.
    assert backend.graphs == 1
    again = [[4, 4], [1], [6, 5, 4, 3], [2, 1, 2]]
    assert run_generate_batch_static(model, again, 10, compile_backend=backend) == [
        greedy_alone(model, prompt, 10) for prompt in again
    ]
    assert backend.graphs == 1


@pytest.mark.parametrize("compile_backend", [None, pytest.param("eager", marks=pytest.mark.slow)])
def test_static_and_compiled_decoding_stop_each_row_at_its_own_stop_token(compile_backend) -> None:
    torch.compiler.reset()
    model = tiny_model("gqa")
    stops, expected = stops_and_expected(model, PROMPTS, 8)
    reported: list[tuple[int, int]] = []
    batched = run_generate_batch_static(
        model,
        PROMPTS,
        8,
        eos_ids=stops,
        compile_backend=compile_backend,
        on_token=lambda row, token: reported.append((row, token)),
    )
    assert batched == expected
    # on_token saw every new token of every row, in each row's order
    for row, tokens in enumerate(expected):
        assert [token for r, token in reported if r == row] == tokens


def test_static_decoding_respects_each_rows_context_window() -> None:
    model = tiny_model("mha rope")
    prompts = [list(range(1, 21)), [4, 2], list(range(20, 50))]  # 20, 2 and 30 > 24 tokens
    batched = run_generate_batch_static(model, prompts, 10)
    assert batched == [greedy_alone(model, prompt, 10) for prompt in prompts]
    assert [len(tokens) for tokens in batched] == [4, 10, 1]
