"""Cutting text into whitespace-led words (the tokenizer's cache keys) never moves a pre-token boundary."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cs336_basics.pretokenization import GPT2_PRETOKENIZER, split_words

pytestmark = pytest.mark.instructor

# Whitespace of every kind the GPT-2 pattern knows (and \x1c, which str.isspace calls whitespace but
# the pattern does not), letters, digits, apostrophes and non-ASCII characters.
ALPHABET = st.sampled_from(list(" \t\n\r\x0b\x0c\x1c\xa0\u3000'sdtlmvreA1.,!é日"))


@settings(max_examples=200, deadline=None)
@given(text=st.text(ALPHABET, max_size=40) | st.text(max_size=40))
@example(text="a  b\n\n c ")
@example(text="it's  'll\u3000x\xa0 y")
def test_pretokens_of_words_are_pretokens_of_text(text: str) -> None:
    words = split_words(text)
    assert "".join(words) == text
    assert all(words)
    # Compare with the pattern applied to the whole text, independently of the word split.
    assert [
        p for word in words for p in GPT2_PRETOKENIZER.findall(word)
    ] == GPT2_PRETOKENIZER.findall(text)


def test_words_are_whitespace_then_non_whitespace() -> None:
    assert split_words("Once upon\n\na time,  there ") == [
        "Once",
        " upon",
        "\n\na",
        " time,",
        "  there",
        " ",
    ]
    assert split_words("héllo\u3000wörld") == ["héllo", "\u3000wörld"]
