"""The seeded story corpus generator."""

from __future__ import annotations

import regex

from cs336_basics.stories import END_OF_TEXT, generate_stories, write_story_corpus


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
    assert regex.search(r'"[^"]+" \w+ (said|asked|shouted|whispered|cried|laughed|replied|called)\.', text)
    assert regex.search(r"\b\d{2,}\b", text) and "'ll" in text and "'re" in text


def test_stories_file_equals_text(tmp_path):
    path = tmp_path / "sub" / "stories.txt"
    size = write_story_corpus(path, 20_000, seed=5)
    data = path.read_bytes()
    assert len(data) == size
    assert data.decode("utf-8") == generate_stories(20_000, seed=5)
    assert [p.name for p in path.parent.iterdir()] == ["stories.txt"]  # no temporary left behind
