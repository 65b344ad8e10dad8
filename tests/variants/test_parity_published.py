"""Parity with HF on the configuration fields of released models, each with a tiny model of the
family built from its HF config class: few layers and small widths, but the real structure
(e.g. Qwen3-0.6B's head_dim of 128 with hidden_size / num_heads = 64, here 16 vs 8)."""

from __future__ import annotations

import torch
import transformers

from ..adapters import (
    get_variant_lm,
    run_config_from_hf,
    run_from_hf,
    run_generate_variant,
    run_variant_accounting,
)
from .test_parity_hf import LLAMA, hf_model, max_logit_error, token_ids

TOLERANCE = 1e-4


def assert_greedy_tokens_equal(hf: torch.nn.Module, config: dict, family: str) -> None:
    model = get_variant_lm(config)
    model.load_state_dict(run_from_hf(hf.state_dict(), config, family))
    prompt = token_ids(config["vocab_size"], seq=5)[:1]
    with torch.no_grad():
        expected = hf.generate(prompt, max_new_tokens=10, do_sample=False, eos_token_id=None)
    ours = run_generate_variant(model, prompt[0].tolist(), 10, use_kv_cache=True)
    assert ours == expected[0, 5:].tolist()


def test_decoupled_head_dim_qwen3() -> None:
    hf = hf_model(transformers.Qwen3Config, **LLAMA, head_dim=16)  # 2 x hidden / heads
    config = run_config_from_hf(hf.config)
    assert (config["head_dim"], config["qk_norm"]) == (16, True)
    assert max_logit_error(hf, config, "qwen3") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "qwen3")
    counts = run_variant_accounting(config, batch_size=1, seq_len=8)["parameters"]
    assert sum(counts.values()) == sum(p.numel() for p in hf.parameters())


def test_decoupled_head_dim_llama_with_tied_embeddings() -> None:
    hf = hf_model(
        transformers.LlamaConfig, **{**LLAMA, "tie_word_embeddings": True}, head_dim=4
    )  # narrower heads than hidden / heads
    config = run_config_from_hf(hf.config)
    assert (config["head_dim"], config["tie_embeddings"]) == (4, True)
    assert max_logit_error(hf, config, "llama") < TOLERANCE
    assert_greedy_tokens_equal(hf, config, "llama")
