"""Tokenizer tooling that ships as-is (the story generator, the GPT-2 file format) and the
instructor's fixture generator (instructor tests, not shipped)."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest
import regex

from course.cases.tokenizer_fixtures import write_tokenizer_fixtures
from cs336_basics.runner.stories import END_OF_TEXT, generate_stories, write_story_corpus
from cs336_basics.tokenizer_files import (
    bytes_to_unicode,
    load_merges,
    load_vocab,
    save_merges,
    save_vocab,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


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
