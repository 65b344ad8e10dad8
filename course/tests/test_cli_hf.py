"""``cs336 generate --hf-model`` and ``cs336 export-hf`` as subprocesses, on directories that
``transformers`` itself writes and reads (tiny random models, offline)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from course.tests.cli_workspace import CLI, REPO
from tests.variants.test_hf_tokenizer import build

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

PROMPT = "the cat sat"


def cs336(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> tuple[transformers.PreTrainedModel, Path]:
    """A random Llama saved by ``transformers`` with a byte-level BPE ``tokenizer.json``."""
    directory = tmp_path_factory.mktemp("hf")
    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(
        ["the cat sat on the mat and the dog sat on the log. " * 20], trainer
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),  # every id the model can emit decodes
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim > 1 else 1.0)
    model.save_pretrained(directory)
    return model, directory


def test_generate_hf_model_prints_hf_greedy_tokens(hf_dir) -> None:
    from cs336_basics.variants.hf.checkpoint import load_pretrained

    model, directory = hf_dir
    tokenizer = load_pretrained(directory).tokenizer
    prompt = torch.tensor([tokenizer.encode(PROMPT)])
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=0)
    expected = PROMPT + tokenizer.decode(out[0, prompt.shape[1] :].tolist())
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(expected) > len(PROMPT) + 4  # a real continuation, not an immediate end
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


def test_generate_hf_model_without_tokenizer_is_one_line_error(tmp_path: Path, hf_dir) -> None:
    model, _ = hf_dir
    model.save_pretrained(tmp_path / "bare")
    result = cs336("generate", "--hf-model", str(tmp_path / "bare"), "--prompt", PROMPT)
    assert result.returncode == 2
    assert "no tokenizer.json" in result.stderr and "--tokenizer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_export_hf_writes_a_directory_transformers_loads(tmp_path: Path, hf_dir) -> None:
    from cs336_basics.builder import build_model
    from cs336_basics.checkpoint import save_checkpoint
    from cs336_basics.config import ModelConfig
    from cs336_basics.variants.hf.checkpoint import load_pretrained

    config = ModelConfig(
        vocab_size=hf_dir[0].config.vocab_size,
        context_length=16,
        d_model=16,
        num_layers=2,
        num_heads=2,
        d_ff=32,
    )
    torch.manual_seed(1)
    ours = build_model(config).eval()
    save_checkpoint(ours, None, 0, tmp_path / "ckpt.pt", config=config.to_dict())
    (tmp_path / "tok").mkdir()
    load_pretrained(hf_dir[1]).tokenizer.save(
        tmp_path / "tok" / "vocab.json", tmp_path / "tok" / "merges.txt"
    )
    out = tmp_path / "hf"
    args = ("export-hf", str(tmp_path / "ckpt.pt"), str(out), "--tokenizer", str(tmp_path / "tok"))
    result = cs336(*args)
    assert result.returncode == 0, result.stderr
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert hf.config.model_type == "llama"
    ids = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)).abs().max() < 2e-5
    assert (out / "vocab.json").is_file() and (out / "merges.txt").is_file()

    again = cs336(*args)
    assert again.returncode == 2 and "--force" in again.stderr
    assert cs336(*args, "--force").returncode == 0


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
HUB_PROMPT = "It's 2026: THE cat's 12345 toys\n\n  café 日本"


def hub_directory(directory: Path, family: str) -> Path:
    """A directory as a hub download looks: config.json, generation_config.json, sharded
    safetensors with their index, tokenizer.json, tokenizer_config.json, special_tokens_map.json.
    ``llama``: a Llama-3-style tokenizer whose template puts <|begin_of_text|> first;
    ``qwen3_moe``: a Qwen2-style one (NFC, digits one by one), a dense layer among MoE ones."""
    style, specials = (
        ("llama3", LLAMA3_SPECIALS) if family == "llama" else ("qwen2", QWEN2_SPECIALS)
    )
    tokenizer = build(style, specials=specials)
    bos, eos = (specials[0], specials[1]) if family == "llama" else (None, specials[0])
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))]
        )
    named = {"bos_token": bos, "eos_token": eos} if bos else {"eos_token": eos}
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **named).save_pretrained(
        directory
    )
    (directory / "special_tokens_map.json").write_text(json.dumps(named))
    shape = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=tokenizer.token_to_id(eos),
        tie_word_embeddings=False,
    )
    if family == "llama":
        config = transformers.LlamaConfig(**shape, bos_token_id=tokenizer.token_to_id(bos))
    else:
        config = transformers.Qwen3MoeConfig(
            **shape, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
            mlp_only_layers=[1], norm_topk_prob=True,
        )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim > 1 else 1.0)
    model.save_pretrained(directory, max_shard_size="100KB")
    return directory


@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_generate_hf_model_on_a_hub_directory_gives_hf_greedy_text(
    tmp_path: Path, family: str
) -> None:
    """What a user does with a download: HF's own tokenizer, model and generate (from the same
    directory) against ``cs336 generate --hf-model``."""
    directory = hub_directory(tmp_path, family)
    assert (directory / "model.safetensors.index.json").is_file()
    assert len(list(directory.glob("model-*.safetensors"))) > 1
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    prompt = tokenizer(HUB_PROMPT, return_tensors="pt").input_ids
    if family == "llama":
        assert prompt[0, 0] == tokenizer.bos_token_id  # the template's token, first
    with torch.no_grad():
        out = hf.generate(prompt, max_new_tokens=12, do_sample=False)
    new = out[0, prompt.shape[1] :]
    assert len(new) == 12
    expected = HUB_PROMPT + tokenizer.decode(new, skip_special_tokens=False)
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", HUB_PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


def test_generate_hf_model_stops_at_the_directorys_eos(tmp_path: Path) -> None:
    """generation_config.json's eos_token_id ends the sample, as it ends HF's: the end token's
    output row is made 1% larger than that of the third greedy token, so it wins there."""
    directory = hub_directory(tmp_path, "llama")
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    prompt = tokenizer(HUB_PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        free = hf.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None)
        third = free[0, prompt.shape[1] + 2]
        hf.lm_head.weight[hf.config.eos_token_id] = 1.01 * hf.lm_head.weight[third]
        hf.save_pretrained(directory, max_shard_size="100KB")
        out = hf.generate(prompt, max_new_tokens=12, do_sample=False)
    new = out[0, prompt.shape[1] :]
    assert len(new) < 12 and new[-1] == hf.config.eos_token_id
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", HUB_PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = HUB_PROMPT + tokenizer.decode(new, skip_special_tokens=False)
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


def test_export_hf_of_a_moe_checkpoint_writes_the_hubs_per_expert_layout(tmp_path: Path) -> None:
    """A Qwen3-MoE-shaped training checkpoint: the directory holds one tensor per expert, with
    exactly the names ``transformers`` writes for the model it loads from it."""
    from safetensors import safe_open

    from cs336_basics.checkpoint import save_checkpoint
    from cs336_basics.variants.builders import build_variant_model
    from cs336_basics.variants.config import AttentionConfig, MoEConfig, VariantConfig

    config = VariantConfig(
        vocab_size=97, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=24,
        attention=AttentionConfig(qk_norm=True),
        ffn=MoEConfig(num_experts=4, top_k=2, dense_layers=[0], dense_d_ff=40),
    )  # fmt: skip
    torch.manual_seed(2)
    ours = build_variant_model(config).eval()
    save_checkpoint(ours, None, 0, tmp_path / "ckpt.pt", config=config.to_dict())
    out = tmp_path / "hf"
    result = cs336("export-hf", str(tmp_path / "ckpt.pt"), str(out))
    assert result.returncode == 0, result.stderr
    assert "qwen3_moe" in result.stdout
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    hf.save_pretrained(tmp_path / "again")

    def names(directory: Path) -> set[str]:
        with safe_open(directory / "model.safetensors", "pt") as file:
            return set(file.keys())

    assert names(out) == names(tmp_path / "again")
    assert "model.layers.1.mlp.experts.3.down_proj.weight" in names(out)
    ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)).abs().max() < 2e-5


def test_generate_hf_model_with_a_sentencepiece_tokenizer_is_one_line_error(
    tmp_path: Path, hf_dir
) -> None:
    model, _ = hf_dir
    model.save_pretrained(tmp_path)
    tokenizer = HFTokenizer(models.BPE(byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    result = cs336("generate", "--hf-model", str(tmp_path), "--prompt", PROMPT)
    assert result.returncode == 2
    assert "tokenizer.json" in result.stderr and "byte_fallback" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_export_lists_the_families_the_converter_knows() -> None:
    from cs336_basics.runner.commands import export_hf
    from cs336_basics.variants import hf_convert

    assert export_hf.FAMILIES == hf_convert.FAMILIES
