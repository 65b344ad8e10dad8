"""``cs336 generate --hf-model`` and ``cs336 export-hf`` as subprocesses, on directories that
``transformers`` itself writes and reads (tiny random models, offline)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
import transformers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from course.tests.cli_workspace import CLI, REPO

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
    from cs336_basics.variants.hf_checkpoint import load_pretrained

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
    from cs336_basics.variants.hf_checkpoint import load_pretrained

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
