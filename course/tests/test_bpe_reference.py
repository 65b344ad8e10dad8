"""(Instructor tests of the reference BPE trainer's extras, not shipped): parallel
pre-tokenization, chunk boundaries and timings are our implementation's, not the handout's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cs336_basics.bpe import _descending_key, train_bpe
from cs336_basics.chunking import find_chunk_boundaries
from cs336_basics.pretokenization import count_pretokens

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpora" / "stories-400k.txt"
EOT = "<|endoftext|>"


def test_train_bpe_same_result_for_any_worker_count():
    assert train_bpe(CORPUS, 500, [EOT], num_workers=1) == train_bpe(
        CORPUS, 500, [EOT], num_workers=2
    )


def test_chunk_boundaries_preserve_pretoken_counts():
    data = CORPUS.read_bytes()
    whole = count_pretokens(data.decode("utf-8"), [EOT])
    for num_chunks in (2, 7, 64):
        boundaries = find_chunk_boundaries(CORPUS, num_chunks, [EOT])
        assert (
            boundaries[0] == 0
            and boundaries[-1] == len(data)
            and boundaries == sorted(set(boundaries))
        )
        assert len(boundaries) > num_chunks // 2
        total: Counter[bytes] = Counter()
        for start, end in zip(boundaries, boundaries[1:], strict=False):
            total += count_pretokens(data[start:end].decode("utf-8"), [EOT])
        assert total == whole


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(
        st.sampled_from(
            list("ab '\n\t.é") + ["<|x|>", "<|x", "|>", "<|x|><|y|>", "<|y|>", "<| s |>", "<|\n|>"]
        ),
        max_size=80,
    ),
    num_chunks=st.integers(2, 50),
    specials=st.sampled_from(
        [["<|x|>", "<|x|><|y|>"], ["<|y|>", "<|x|><|y|>"], ["<| s |>", "<|\n|>", "<|y|>"]]
    ),
)
def test_chunk_boundaries_with_nested_specials(tmp_path, pieces, num_chunks, specials):
    # A special that is a prefix of another, one inside another at a non-zero offset, and
    # specials holding a space or a newline.
    text = "".join(pieces)
    path = tmp_path / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    data = path.read_bytes()
    boundaries = find_chunk_boundaries(path, num_chunks, specials)
    total: Counter[bytes] = Counter()
    for start, end in zip(boundaries, boundaries[1:], strict=False):
        total += count_pretokens(data[start:end].decode("utf-8"), specials)
    assert total == count_pretokens(text, specials)


def test_train_bpe_reports_timings(tmp_path):
    (tmp_path / "c.txt").write_text("hello hello world")
    timings: dict[str, float] = {}
    train_bpe(tmp_path / "c.txt", 260, [], timings=timings)
    assert set(timings) == {"pretokenize", "merge", "total"}
    assert all(t >= 0 for t in timings.values())


def test_train_bpe_messages_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-corpus.txt"):
        train_bpe(tmp_path / "no-such-corpus.txt", 300, [EOT])
    (tmp_path / "latin1.txt").write_bytes(b"hello w\xf6rld")
    with pytest.raises(ValueError, match=r"latin1\.txt.*offset 7"):
        train_bpe(tmp_path / "latin1.txt", 300, [EOT])
    (tmp_path / "empty.txt").write_text(EOT)
    with pytest.raises(ValueError, match="empty corpus"):
        train_bpe(tmp_path / "empty.txt", 300, [EOT])


# Tokens over a few bytes, the extremes included, so that prefixes and equal parts are common.
_TOKENS = st.lists(st.sampled_from([0, 1, 97, 254, 255]), min_size=1, max_size=3).map(bytes)


@given(pairs=st.lists(st.tuples(_TOKENS, _TOKENS), min_size=2, max_size=30))
def test_descending_keys_order_pairs_of_bytes_in_reverse(pairs):
    # The merge heap breaks ties by these keys: a pair's key is its tokens' keys joined, and the
    # smallest key must be the greatest pair of bytes (prefixes included: (b"a", b"b") < (b"a", b"bc")).
    def pair_key(pair):
        return _descending_key(pair[0]) + _descending_key(pair[1])

    assert sorted(pairs, key=pair_key) == sorted(pairs, reverse=True)
    # A merged token's key is its parts' keys joined without the first one's end mark.
    assert all(
        _descending_key(a + b) == _descending_key(a)[:-1] + _descending_key(b) for a, b in pairs
    )
