"""``cs336 generate`` prints text as tokens are produced: whole characters only (a UTF-8
character split across tokens waits for its last byte), flushed per token, and the same text as
the sample printed at the end (``--no-stream``), with or without the static KV cache."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from cs336_basics.checkpoint import save_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.model import transformer_lm
from cs336_basics.runner.cli import main
from cs336_basics.runner.commands.text_stream import TextStream
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.variants.builders import with_cache_capable_attention
from cs336_basics.variants.decoding.kv_cache import caching_layers

TEXT = "héllo wörld, 日本語 🙂!"


class Recorder:
    """A stand-in for stdout that keeps the text written between flushes as separate chunks."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.chunks.append(self.pending)
        self.pending = ""

    @property
    def text(self) -> str:
        return "".join(self.chunks) + self.pending


def test_text_stream_prints_each_character_once_its_last_byte_arrives() -> None:
    data = TEXT.encode()
    vocab = {i: bytes([byte]) for i, byte in enumerate(data)}  # one token per byte
    out = Recorder()
    stream = TextStream(vocab, out)
    for token_id in range(len(data)):
        before = len(out.chunks)
        stream.write(token_id)
        # a chunk appears exactly when this byte completes a character
        completes = _completes_character(data, token_id)
        assert len(out.chunks) == before + completes
    stream.close()
    assert out.chunks == list(TEXT)


def _completes_character(data: bytes, index: int) -> bool:
    """Whether ``data[index]`` is the last byte of a UTF-8 character (the next byte starts a new
    one: it is not a continuation byte 10xxxxxx)."""
    return index + 1 == len(data) or data[index + 1] & 0xC0 != 0x80


def test_text_stream_equals_one_shot_decoding_on_any_bytes() -> None:
    pool = [b"a", b"\xc3", b"\xa9", b"\xe6\x97", b"\xa5", b"\xf0\x9f", b"\x99\x82", b"\xff", b" "]
    vocab = dict(enumerate(pool))
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randrange(len(pool)) for _ in range(rng.randrange(12))]
        out = Recorder()
        stream = TextStream(vocab, out)
        for token_id in ids:
            stream.write(token_id)
        stream.close()
        expected = b"".join(pool[i] for i in ids).decode("utf-8", errors="replace")
        assert out.text == expected and not out.pending


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A byte-level tokenizer whose tokens are pieces of UTF-8 characters, and a checkpoint of a
    random tiny model over it (greedy decoding then emits split and malformed characters)."""
    root = tmp_path_factory.mktemp("streaming")
    pieces = sorted(
        {bytes([b]) for b in range(256)} | {TEXT.encode()[i : i + 2] for i in range(20)}
    )
    vocab = dict(enumerate(pieces))
    Tokenizer(vocab, [], ["<|endoftext|>"]).save(root / "vocab.json", root / "merges.txt")
    config = ModelConfig(
        vocab_size=len(vocab) + 1, context_length=48, d_model=16, num_layers=2, num_heads=2, d_ff=32
    )
    torch.manual_seed(0)
    save_checkpoint(transformer_lm(config), None, 0, root / "model.pt", config=config.to_dict())
    return root


def _generate(run_dir: Path, monkeypatch, *flags: str) -> Recorder:
    out = Recorder()
    monkeypatch.setattr("sys.stdout", out)
    argv = ["generate", "--checkpoint", str(run_dir / "model.pt"), "--tokenizer", str(run_dir)]
    argv += ["--prompt", "héllo", "--prompt", "日本", "--temperature", "0"]
    assert main([*argv, "--max-new-tokens", "30", *flags]) == 0
    return out


def test_generate_streams_the_text_it_prints_at_the_end(run_dir: Path, monkeypatch) -> None:
    at_end = _generate(run_dir, monkeypatch, "--no-stream")
    streamed = _generate(run_dir, monkeypatch)
    assert streamed.text == at_end.text
    assert (
        at_end.text.startswith("--- sample 1 ---\nhéllo")
        and "--- sample 2 ---\n日本" in at_end.text
    )
    # flushed token by token (30 new tokens per sample), not once per sample
    assert len(streamed.chunks) > 20 and len(at_end.chunks) <= 2
    assert _generate(run_dir, monkeypatch, "--static-cache").text == at_end.text
    assert _generate(run_dir, monkeypatch, "--no-kv-cache").text == at_end.text


def test_generate_refuses_a_static_cache_without_the_kv_cache(run_dir: Path, monkeypatch) -> None:
    out = Recorder()
    monkeypatch.setattr("sys.stderr", out)
    argv = ["generate", "--checkpoint", str(run_dir / "model.pt"), "--tokenizer", str(run_dir)]
    assert main([*argv, "--no-kv-cache", "--static-cache"]) == 2
    assert "--no-kv-cache" in out.text


def test_core_model_gets_cache_capable_attention_with_the_same_function() -> None:
    config = ModelConfig(
        vocab_size=50, context_length=16, d_model=16, num_layers=2, num_heads=4, d_ff=32
    )
    torch.manual_seed(0)
    model = transformer_lm(config).double()
    tokens = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        expected = model(tokens)
        names = set(model.state_dict())
        converted = with_cache_capable_attention(model)
        assert len(caching_layers(converted)) == config.num_layers
        assert set(converted.state_dict()) == names
        torch.testing.assert_close(converted(tokens), expected, rtol=1e-12, atol=1e-12)
