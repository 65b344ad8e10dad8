"""The reference's files and the code that writes and reads them: tokenizer files (GPT-2 format,
ours and Hugging Face's) with the parallel file encoder and the CLI; token arrays (the chunked
min/max pass finds ids anywhere, re-reads a changed file, errors name the file and the fix) and
``get_batch`` on them (a seeded generator makes it reproducible; memmaps with clear errors);
the training loop's checkpoints (they also carry the run's config and RNG states); the story
corpus generator; and the instructor's tokenizer fixture generator.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import regex
import torch

from course.cases.tokenizer_fixtures import write_tokenizer_fixtures
from cs336_basics import token_arrays
from cs336_basics.adamw import AdamW
from cs336_basics.checkpoint import load_checkpoint, read_checkpoint, save_checkpoint
from cs336_basics.data import get_batch
from cs336_basics.errors import InputError, MissingInputError
from cs336_basics.runner.cli import main as cs336
from cs336_basics.runner.encode_file import encode_file
from cs336_basics.runner.stories import END_OF_TEXT, generate_stories, write_story_corpus
from cs336_basics.token_arrays import load_tokens
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.tokenizer_files import (
    bytes_to_unicode,
    load_merges,
    load_vocab,
    save_merges,
    save_vocab,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
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


def test_id_range_scans_every_chunk_and_notices_a_rewritten_file(tmp_path, monkeypatch):
    monkeypatch.setattr(token_arrays, "_SCAN_CHUNK", 7)
    tokens = np.arange(100, dtype=np.int32) % 50
    tokens[93] = 4000  # in the last, partial chunk
    tokens[41] = -3
    np.save(tmp_path / "t.npy", tokens)
    assert token_arrays.id_range(tmp_path / "t.npy") == (-3, 4000)
    tokens[93] = 7
    np.save(tmp_path / "t.npy", tokens)
    stat = os.stat(tmp_path / "t.npy")  # same size: make sure the mtime moves
    os.utime(tmp_path / "t.npy", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert token_arrays.id_range(tmp_path / "t.npy") == (-3, 49)


def test_check_token_array_names_the_problem(tmp_path):
    np.save(tmp_path / "ok.npy", np.arange(20, dtype=np.uint16))
    tokens = token_arrays.load_tokens(tmp_path / "ok.npy")
    token_arrays.check_token_array(tokens, tmp_path / "ok.npy", vocab_size=20, context_length=19)
    with pytest.raises(InputError, match=r"token id 19, outside the model's vocabulary of 19"):
        token_arrays.check_token_array(tokens, tmp_path / "ok.npy", vocab_size=19, context_length=4)
    with pytest.raises(InputError, match=r"holds 20 tokens.*context_length=20 needs at least 21"):
        token_arrays.check_token_array(
            tokens, tmp_path / "ok.npy", vocab_size=20, context_length=20
        )
    np.save(tmp_path / "neg.npy", np.array([0, 1, -1, 2], dtype=np.int64))
    negative = token_arrays.load_tokens(tmp_path / "neg.npy")
    with pytest.raises(InputError, match="token id -1"):
        token_arrays.check_token_array(
            negative, tmp_path / "neg.npy", vocab_size=10, context_length=2
        )
    with pytest.raises(MissingInputError, match="is a directory"):
        token_arrays.load_tokens(tmp_path)


def test_get_batch_seeded_generator_is_reproducible():
    dataset = np.arange(1000)
    a = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    b = get_batch(dataset, 8, 5, "cpu", generator=torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_load_tokens_from_npy_and_raw_files(tmp_path):
    tokens = np.arange(20, dtype=np.uint16)
    np.save(tmp_path / "t.npy", tokens)
    tokens.astype(np.int32).tofile(tmp_path / "t.bin")
    for dataset in (
        load_tokens(tmp_path / "t.npy"),
        load_tokens(tmp_path / "t.bin", dtype="int32"),
    ):
        x, y = get_batch(dataset, 3, 4, "cpu")
        assert torch.equal(y, x + 1) and int(x.max()) < 19
    assert isinstance(load_tokens(tmp_path / "t.npy"), np.memmap)
    assert load_tokens(tmp_path / "t.npy").tolist() == list(range(20))
    assert load_tokens(tmp_path / "t.bin", dtype="int32").tolist() == list(range(20))
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        load_tokens(tmp_path / "missing.npy")
    np.save(tmp_path / "float.npy", np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="integer"):
        load_tokens(tmp_path / "float.npy")
    (tmp_path / "odd.bin").write_bytes(b"\x00" * 5)
    with pytest.raises(ValueError, match="whole number"):
        load_tokens(tmp_path / "odd.bin", dtype="uint16")


def test_get_batch_messages_name_the_problem():
    with pytest.raises(ValueError, match="needs at least 3"):
        get_batch(np.array([5, 6]), 1, 2, "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            get_batch(np.arange(50), 2, 4, "cuda:0")


def test_checkpoint_keeps_config_and_rng_states(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(123)
    save_checkpoint(
        model, optimizer, 7, tmp_path / "c.pt", config={"d_model": 8}, extra={"note": "x"}
    )
    expected = torch.rand(3)
    torch.manual_seed(0)
    assert load_checkpoint(tmp_path / "c.pt", model, optimizer, restore_rng=True) == 7
    assert torch.equal(torch.rand(3), expected)
    contents = read_checkpoint(tmp_path / "c.pt")
    assert contents["config"] == {"d_model": 8} and contents["extra"] == {"note": "x"}


def test_tokenizer_fixtures_regenerate_identically(tmp_path):
    shutil.copytree(FIXTURES / "samples", tmp_path / "samples")
    write_tokenizer_fixtures(tmp_path)
    for relative in [
        "corpora/stories-400k.txt",
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "tokenizer/special_tokens.json",
    ]:
        assert filecmp.cmp(tmp_path / relative, FIXTURES / relative, shallow=False), (
            f"fixtures/{relative} is stale"
        )


# --- the story generator -------------------------------------------------------------------


def test_stories_are_deterministic_and_seeded():
    assert generate_stories(5000, seed=1) == generate_stories(5000, seed=1)
    assert generate_stories(5000, seed=1) != generate_stories(5000, seed=2)


def test_stories_reach_the_requested_size_with_whole_stories():
    for size in (1, 1000, 30_000):
        text = generate_stories(size, seed=0)
        stories = text.split(f"\n{END_OF_TEXT}\n")
        assert len(text.encode("utf-8")) >= size
        assert all(story.strip() and END_OF_TEXT not in story for story in stories)
        shorter = text[: text.rindex(END_OF_TEXT) - 1] if len(stories) > 1 else ""
        assert len(shorter.encode("utf-8")) < size  # the last story was needed


def test_stories_are_varied():
    text = generate_stories(200_000, seed=0)
    stories = text.split(END_OF_TEXT)
    assert len(set(stories)) == len(stories) > 100
    assert len(set(regex.findall(r"named (\w+)", text))) > 100
    assert len(set(regex.findall(r"\w+", text))) > 1000
    assert regex.search(
        r'"[^"]+" \w+ (said|asked|shouted|whispered|cried|laughed|replied|called)\.', text
    )
    assert regex.search(r"\b\d{2,}\b", text) and "'ll" in text and "'re" in text


def test_stories_file_equals_text(tmp_path):
    path = tmp_path / "sub" / "stories.txt"
    size = write_story_corpus(path, 20_000, seed=5)
    data = path.read_bytes()
    assert len(data) == size
    assert data.decode("utf-8") == generate_stories(20_000, seed=5)
    assert [p.name for p in path.parent.iterdir()] == ["stories.txt"]  # no temporary left behind


# --- GPT-2 tokenizer files -------------------------------------------------------------------


def test_tokenizer_files_byte_map_is_gpt2s():
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert (
        table[ord(" ")] == "Ġ"
        and table[ord("\n")] == "Ċ"
        and table[ord("A")] == "A"
        and table[0] == "Ā"
    )
    assert all(not c.isspace() and c.isprintable() for c in table.values())


def test_tokenizer_files_round_trip_awkward_tokens(tmp_path):
    vocab = {i: bytes([i]) for i in range(256)}
    extra = [
        b" \n",
        b"\x00\xff",
        "é🙂".encode(),
        b"a b",
        b"<|end of text|>",
        b"\r\n\t",
        b"\xe2\x82",
    ]
    for token in extra:
        vocab[len(vocab)] = token
    merges = [(b" ", b"\n"), (b"\x00", b"\xff"), (b"a", b" "), (b"\xe2", b"\x82")]
    save_vocab(vocab, tmp_path / "v.json")
    save_merges(merges, tmp_path / "m.txt")
    assert load_vocab(tmp_path / "v.json") == vocab
    assert load_merges(tmp_path / "m.txt") == merges


def test_tokenizer_files_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_vocab(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_merges(tmp_path / "nope.txt")


def test_tokenizer_files_malformed(tmp_path):
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json"):
        load_vocab(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="list.json"):
        load_vocab(tmp_path / "list.json")
    (tmp_path / "bad.txt").write_text("#version: 0.2\nĠ t\nthree parts here\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 3"):
        load_merges(tmp_path / "bad.txt")


# --- the parallel file encoder -----------------------------------------------------------
