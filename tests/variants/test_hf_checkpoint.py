"""HF checkpoint directories in and out, offline: every directory is made here by
``save_pretrained`` of a tiny random ``transformers`` model (never downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from .adapters import get_variant_lm, run_generate_variant, run_load_pretrained, run_save_pretrained
from .test_parity_hf import LLAMA, TOLERANCE, hf_model, token_ids


@pytest.fixture
def llama_dir(tmp_path: Path) -> tuple[torch.nn.Module, Path]:
    hf = hf_model(transformers.LlamaConfig, **LLAMA)
    hf.save_pretrained(tmp_path / "llama")
    return hf, tmp_path / "llama"


def test_load_pretrained_matches_hf_logits_and_greedy_tokens(llama_dir) -> None:
    hf, directory = llama_dir
    model, config, family, tokenizer = run_load_pretrained(directory)
    assert (family, config["num_kv_heads"], tokenizer) == ("llama", 2, None)
    ids = token_ids()
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max() < TOLERANCE
        prompt = ids[:1, :5]
        expected = hf.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0)
    ours = run_generate_variant(model, prompt[0].tolist(), 10, use_kv_cache=True)
    assert ours == expected[0, 5:].tolist()


@pytest.mark.parametrize(
    "case",
    ["llama", "llama-dynamic", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt2"],
)
def test_save_pretrained_round_trip_through_from_pretrained(tmp_path: Path, case: str) -> None:
    family = case.split("-")[0]
    config = dict(vocab_size=97, context_length=32, d_model=32, num_layers=2, num_heads=4, d_ff=48)
    dynamic = dict(rope_type="dynamic", factor=4.0, original_max_position_embeddings=8)
    config |= {
        "llama": dict(num_kv_heads=2, rope_theta=500.0),
        "llama-dynamic": dict(rope_scaling=dynamic),  # the 12 test tokens exceed 8
        "qwen2": dict(qkv_bias=True, tie_embeddings=True),
        "qwen3": dict(qk_norm=True, head_dim=16),
        "deepseek_v2": dict(
            attention="mla",
            kv_lora_rank=12,
            qk_rope_head_dim=4,
            ffn="moe",
            num_experts=4,
            top_k=2,
            normalize_topk=False,
            dense_layers=[0],
            dense_d_ff=40,
            num_shared_experts=1,
            routed_scaling=2.0,
            expert_groups=[2, 1],
        ),
        "deepseek_v3": dict(
            attention="mla",
            q_lora_rank=16,
            kv_lora_rank=12,
            qk_rope_head_dim=4,
            ffn="moe",
            num_experts=4,
            top_k=2,
            dense_layers=[0],
            dense_d_ff=40,
            num_shared_experts=1,
            routed_scaling=2.5,
            expert_groups=[2, 1],
            router_scoring="sigmoid",
        ),
        "qwen3_moe": dict(
            qk_norm=True, ffn="moe", num_experts=4, top_k=2, dense_layers=[1], dense_d_ff=40
        ),
        "gpt2": dict(
            norm="layernorm",
            position_encoding="learned",
            ffn="gelu_tanh",
            bias=True,
            tie_embeddings=True,
        ),
    }[case]
    model = get_variant_lm(config, seed=4)
    for name, tensor in model.state_dict().items():
        if name.endswith("score_correction_bias"):  # DeepSeek-V3's router buffer, zero at init
            tensor.copy_(0.3 * torch.randn(tensor.shape))
    run_save_pretrained(model, config, tmp_path / "out", family)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert hf.config.model_type == family
    if "rope_scaling" in config:  # HF's dynamic scales from max_position_embeddings
        rope = (hf.config.rope_parameters["rope_type"], hf.config.max_position_embeddings)
        assert rope == ("dynamic", 8)
    ids = token_ids()
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max() < TOLERANCE
    hf.save_pretrained(tmp_path / "again")
    back, back_config, _, _ = run_load_pretrained(tmp_path / "again")
    assert back_config == config | {k: v for k, v in back_config.items() if k not in config}
    for name, tensor in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name


def test_save_pretrained_refuses_an_existing_directory(tmp_path: Path) -> None:
    config = dict(vocab_size=97, context_length=32, d_model=32, num_layers=1, num_heads=4, d_ff=48)
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError, match="out"):
        run_save_pretrained(get_variant_lm(config), config, tmp_path / "out", "llama")


def test_sharded_directory_loads_and_a_missing_shard_is_named(tmp_path: Path) -> None:
    hf = hf_model(transformers.LlamaConfig, **LLAMA)
    hf.save_pretrained(tmp_path, max_shard_size="20KB")
    shards = sorted(tmp_path.glob("model-*.safetensors"))
    assert len(shards) > 1 and not (tmp_path / "model.safetensors").exists()
    model, *_ = run_load_pretrained(tmp_path)
    ids = token_ids()
    with torch.no_grad():
        assert (model(ids) - hf(ids).logits).abs().max() < TOLERANCE
    shards[-1].unlink()
    with pytest.raises(FileNotFoundError, match=shards[-1].name):
        run_load_pretrained(tmp_path)


def edit_config(directory: Path, **changes) -> None:
    path = directory / "config.json"
    path.write_text(
        json.dumps(json.loads(path.read_text(encoding="utf-8")) | changes), encoding="utf-8"
    )


def test_bad_directories_are_refused_by_file_and_field(llama_dir) -> None:
    _, directory = llama_dir
    edit_config(directory, intermediate_size=40)
    with pytest.raises(ValueError, match=r"model\.safetensors.*mlp.gate_proj.*config\.json"):
        run_load_pretrained(directory)
    edit_config(directory, intermediate_size=48, model_type="bert")
    with pytest.raises(ValueError, match=r"config\.json.*model_type 'bert'"):
        run_load_pretrained(directory)
    (directory / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        run_load_pretrained(directory)


def byte_level_bpe(vocab_size: int) -> HFTokenizer:
    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = ["the cat sat on the mat, the dog sat on the log. " * 20]
    tokenizer.train_from_iterator(text, trainer)
    return tokenizer


def test_tokenizer_json_is_read_and_checked_against_vocab_size(tmp_path: Path) -> None:
    reference = byte_level_bpe(300)
    hf = hf_model(transformers.LlamaConfig, **{**LLAMA, "vocab_size": 320})
    hf.save_pretrained(tmp_path)
    reference.save(str(tmp_path / "tokenizer.json"))
    _, _, _, tokenizer = run_load_pretrained(tmp_path)
    text = "the cat sat on a log<|endoftext|> mat!"
    assert tokenizer.encode(text) == reference.encode(text).ids
    assert tokenizer.decode(tokenizer.encode(text)) == text
    edit_config(tmp_path, vocab_size=200)
    with pytest.raises(ValueError, match=r"tokenizer\.json.*vocab_size"):
        run_load_pretrained(tmp_path)
