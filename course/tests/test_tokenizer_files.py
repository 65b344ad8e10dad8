"""(Instructor tests of support code, not shipped.) Tokenizer files (GPT-2 format, ours and
Hugging Face's), the parallel file encoder and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cs336_basics.runner.cli import main as cs336
from cs336_basics.runner.encode_file import encode_file
from cs336_basics.tokenizer import Tokenizer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TOKENIZER_DIR = FIXTURES / "tokenizer"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
SAMPLES = sorted((FIXTURES / "samples").glob("*.txt"))
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_files(TOKENIZER_DIR / "vocab.json", TOKENIZER_DIR / "merges.txt", [EOT])


def test_tokenizer_files_save_reproduces_fixture_files(tmp_path, tokenizer):
    tokenizer.save(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert (tmp_path / "vocab.json").read_bytes() == (TOKENIZER_DIR / "vocab.json").read_bytes()
    assert (tmp_path / "merges.txt").read_bytes() == (TOKENIZER_DIR / "merges.txt").read_bytes()


def test_tokenizer_files_load_hugging_face_files(tmp_path):
    # A byte-level BPE trained and saved by Hugging Face tokenizers, offline.
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models, pre_tokenizers, trainers

    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = CORPUS.read_bytes().decode("utf-8")[:100_000] + "".join(
        p.read_bytes().decode("utf-8") for p in SAMPLES
    )
    hf.train_from_iterator([text], trainer)
    hf.model.save(str(tmp_path))
    ours = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt", [EOT])
    for path in SAMPLES:
        sample = path.read_bytes().decode("utf-8")
        assert ours.encode(sample) == hf.encode(sample).ids, path.name
        assert ours.decode(ours.encode(sample)) == sample


@pytest.mark.parametrize("num_workers", [1, 2])
def test_tokenizer_encode_file_matches_encode(tmp_path, tokenizer, num_workers):
    out = tmp_path / "tokens.npy"
    count = encode_file(tokenizer, CORPUS, out, num_workers=num_workers)
    ids = np.load(out, mmap_mode="r")
    assert ids.dtype == np.uint16 and ids.shape == (count,)
    assert ids.tolist() == tokenizer.encode(CORPUS.read_bytes().decode("utf-8"))


def test_tokenizer_encode_file_uses_uint32_for_big_vocabularies(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: b"<|big|>"}
    big = Tokenizer(vocab, [], ["<|big|>"])
    (tmp_path / "in.txt").write_text("a<|big|>b", encoding="utf-8")
    encode_file(big, tmp_path / "in.txt", tmp_path / "out.npy", num_workers=1)
    ids = np.load(tmp_path / "out.npy")
    assert ids.dtype == np.uint32 and ids.tolist() == [97, 70_000, 98]


def test_tokenizer_encode_file_bad_input_leaves_no_output(tmp_path, tokenizer):
    (tmp_path / "bad.txt").write_bytes(b"fine text\n" * 10 + b"caf\xe9\n")
    with pytest.raises(ValueError, match=r"bad\.txt.*offset 103"):
        encode_file(tokenizer, tmp_path / "bad.txt", tmp_path / "out.npy", num_workers=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        encode_file(tokenizer, tmp_path / "missing.txt", tmp_path / "out.npy")


# --- the commands --------------------------------------------------------------------------


def test_tokenizer_cli_train_bpe_then_encode(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(CORPUS.read_bytes()[:60_000].rsplit(b"\n", 1)[0])
    out_dir = tmp_path / "tok"
    assert (
        cs336(
            [
                "train-bpe",
                str(corpus),
                "--vocab-size",
                "300",
                "--out-dir",
                str(out_dir),
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads((out_dir / "special_tokens.json").read_text()) == [EOT]
    assert (
        cs336(
            [
                "encode",
                str(corpus),
                "--tokenizer",
                str(out_dir),
                "--out",
                str(tmp_path / "ids.npy"),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "tokens" in capsys.readouterr().out
    trained = Tokenizer.from_files(out_dir / "vocab.json", out_dir / "merges.txt", [EOT])
    assert len(trained.vocab) == 300
    assert np.load(tmp_path / "ids.npy").tolist() == trained.encode(
        corpus.read_text(encoding="utf-8")
    )
