"""The BPE tokenizer beyond the graded cases: round trips, streaming, files, bad input."""

from __future__ import annotations

import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .adapters import get_tokenizer
from .cases.shipped import Shipped
from .cases.tokenizer_diff import stream_difference
from .expect import raises_an_error
from .localize import as_lines, graded_case_located

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = FIXTURES / "corpora" / "stories-400k.txt"
SAMPLES = sorted((FIXTURES / "samples").glob("*.txt"))
EOT = "<|endoftext|>"


def read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # bytes, so "\r\n" survives


@pytest.fixture(scope="module")
def vocab_and_merges():
    return Shipped().vocab_and_merges


@pytest.fixture(scope="module")
def tokenizer(vocab_and_merges):
    vocab, merges = vocab_and_merges
    return get_tokenizer(dict(vocab), list(merges), [EOT])


def test_tokenizer_empty_string(tokenizer):
    assert tokenizer.encode("") == []
    assert tokenizer.decode([]) == ""
    assert list(tokenizer.encode_iterable([])) == []
    assert list(tokenizer.encode_iterable(["", ""])) == []


@graded_case_located("tokenizer")
def test_tokenizer_works_with_any_id_layout(vocab_and_merges, tokenizer):
    """Ids are only names: the same vocabulary under shuffled ids must encode to the shuffled
    ids (so nothing may assume that byte b has id b, or that merges follow the bytes)."""
    vocab, merges = vocab_and_merges
    ids = list(vocab)
    shuffled = dict(zip(ids, random.Random(0).sample(ids, len(ids)), strict=True))
    renamed = get_tokenizer({shuffled[i]: t for i, t in vocab.items()}, list(merges), [EOT])
    text = read_text(FIXTURES / "samples" / "special_tokens.txt") + " caf\u00e9 \U0001f642"
    expected = [shuffled[i] for i in tokenizer.encode(text)]
    assert renamed.encode(text) == expected
    assert renamed.decode(expected) == text


# --- special tokens ------------------------------------------------------------------------


@graded_case_located("tokenizer")
def test_tokenizer_special_token_gets_its_id(tokenizer, vocab_and_merges):
    vocab, _ = vocab_and_merges
    eot_id = next(i for i, t in vocab.items() if t == EOT.encode())
    ids = tokenizer.encode(f"Hi.{EOT}{EOT} Bye")
    assert ids.count(eot_id) == 2
    assert tokenizer.decode(ids) == f"Hi.{EOT}{EOT} Bye"


def test_tokenizer_adds_missing_special_tokens_to_vocab(vocab_and_merges):
    vocab, merges = vocab_and_merges
    tok = get_tokenizer(dict(vocab), list(merges), [EOT, "<|pad|>"])
    ids = tok.encode("a<|pad|>b")
    assert len(ids) == 3
    assert ids[1] not in vocab, (
        f"'<|pad|>', not in the vocab, encoded as id {ids[1]}\nhint: a special token missing "
        f"from the vocab gets a fresh id; yours reuses {ids[1]}, the vocab's id of "
        f"{vocab[ids[1]]!r}"
    )
    assert tok.decode(ids) == "a<|pad|>b"


@graded_case_located("tokenizer")
def test_tokenizer_overlapping_special_tokens_longest_first(vocab_and_merges):
    vocab, merges = vocab_and_merges
    double = EOT + EOT
    tok = get_tokenizer(dict(vocab), list(merges), [EOT, double])
    single_id, double_id = tok.encode(EOT)[0], tok.encode(double)[0]
    assert single_id != double_id
    assert tok.encode(double) == [double_id]
    assert tok.encode(EOT * 3) == [double_id, single_id]
    assert tok.decode(tok.encode(f"x{EOT * 3}y")) == f"x{EOT * 3}y"


# --- decode ------------------------------------------------------------------------------


@graded_case_located("tokenizer")
def test_tokenizer_decode_replaces_malformed_utf8(tokenizer, vocab_and_merges):
    byte_id = {t: i for i, t in vocab_and_merges[0].items()}
    # The first two bytes of "€" (e2 82 ac), then "a": one replacement character, then "a".
    assert tokenizer.decode([byte_id[b"\xe2"], byte_id[b"\x82"], byte_id[b"a"]]) == "\ufffda"
    assert tokenizer.decode([byte_id[b"\xff"]]) == "\ufffd"


# --- encode_iterable ---------------------------------------------------------------------


def assert_streams_like_encode(tok, chunks: list[str], specials: list[str]) -> None:
    """encode_iterable(chunks) gives encode's ids of the joined chunks; a failure says where they
    first differ and whether a chunk ends there (the vocab's ids, and the specials' own)."""
    got, want = list(tok.encode_iterable(chunks)), tok.encode("".join(chunks))

    def difference() -> list[str]:
        named = dict(Shipped().vocab_and_merges[0])
        for special in specials:
            ids = tok.encode(special)
            if len(ids) == 1:
                named.setdefault(ids[0], special.encode("utf-8"))
        return [stream_difference(chunks, got, want, named)]

    assert got == want, "encode_iterable's ids differ from encode's" + as_lines(difference)


def split_at(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=False)]


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 64, 1000])
@graded_case_located("tokenizer")
def test_tokenizer_encode_iterable_matches_encode(tokenizer, chunk_size):
    text = "".join(read_text(p) for p in SAMPLES)
    chunks = [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)]
    assert_streams_like_encode(tokenizer, chunks, [EOT])


def test_tokenizer_encode_iterable_reads_files(tokenizer):
    with open(FIXTURES / "samples" / "special_tokens.txt", encoding="utf-8", newline="") as file:
        ids = list(tokenizer.encode_iterable(file))
    assert ids == tokenizer.encode(read_text(FIXTURES / "samples" / "special_tokens.txt"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pieces=st.lists(
        st.sampled_from(
            ["a", "b", " ", "  ", "\n", "'", "s", "ll", "1", "é", "🙂", EOT, "<|", "|>", "\t"]
        ),
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 200), max_size=12),
)
def test_tokenizer_encode_iterable_any_chunking(vocab_and_merges, pieces, cuts):
    vocab, merges = vocab_and_merges
    tok = get_tokenizer(dict(vocab), list(merges), [EOT, EOT + EOT])  # overlapping specials too
    assert_streams_like_encode(tok, split_at("".join(pieces), cuts), [EOT, EOT + EOT])


# Run in a fresh interpreter that loads only the tokenizer (unpickled, so only its own module is
# imported): a process that has imported torch has too much slack in its address space.
_MEMORY_SCRIPT = textwrap.dedent(
    """
    import pickle, resource, sys
    sys.path.insert(0, sys.argv[1])
    with open(sys.argv[2], "rb") as file:
        tokenizer = pickle.load(file)
    with open(sys.argv[3], encoding="utf-8") as file:
        story = file.read(100_000)
    tokenizer.encode(story)  # warm the cache and the allocator

    def chunks(total):  # about `total` characters, cut at odd sizes (inside words and specials)
        sent, sizes = 0, [4093, 7, 1, 65_537, 333]
        while sent < total:
            for size in sizes:
                start = sent % len(story)
                piece = story[start : start + size]
                sent += len(piece)
                yield piece

    with open("/proc/self/status") as status:
        vm_bytes = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    limit = vm_bytes + int(sys.argv[4]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(sum(1 for _ in tokenizer.encode_iterable(chunks(int(sys.argv[5])))))
    """
)
# Encoding 8 M characters at once needs about 30 MB (the text, then a pointer per id); streaming
# them must fit in 16 MB beyond the interpreter's size after warming up.
MEMORY_BUDGET_MB = 16
STREAM_CHARS = 8_000_000


def streams_within_budget(tmp_path, tokenizer, streaming: bool) -> tuple[bool, str]:
    """Encode ``STREAM_CHARS`` of text under a memory budget; return (fitted, details).

    Linux: a fresh interpreter under ``RLIMIT_AS``. Elsewhere: in-process ``tracemalloc`` (which
    counts Python allocations only) with a 4 MB budget.
    """
    if sys.platform == "linux":
        script = _MEMORY_SCRIPT
        if not streaming:
            script = script.replace(
                "sum(1 for _ in tokenizer.encode_iterable(chunks(int(sys.argv[5]))))",
                "len(tokenizer.encode(''.join(chunks(int(sys.argv[5])))))",
            )
            assert script != _MEMORY_SCRIPT
        pickled = tmp_path / "tokenizer.pkl"
        pickled.write_bytes(
            pickle.dumps(tokenizer)
        )  # your Tokenizer must be picklable for this test
        args = [str(ROOT), str(pickled), str(CORPUS), str(MEMORY_BUDGET_MB), str(STREAM_CHARS)]
        result = subprocess.run(
            [sys.executable, "-c", script, *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",  # a traceback in the locale's encoding (Windows) still reads
            timeout=120,
        )
        fitted = result.returncode == 0 and int(result.stdout.strip()) > STREAM_CHARS // 8
        return fitted, result.stderr[-2000:]

    import tracemalloc

    story = read_text(CORPUS)[:100_000]
    tokenizer.encode(story)  # warm the cache
    chunks = (
        story[i : i + 4093]
        for _ in range(STREAM_CHARS // len(story) // 2)
        for i in range(0, len(story), 4093)
    )
    tracemalloc.start()
    try:
        count = (
            sum(1 for _ in tokenizer.encode_iterable(chunks))
            if streaming
            else len(tokenizer.encode("".join(chunks)))
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count > 0 and peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MB"


def test_tokenizer_encode_iterable_memory_is_bounded(tmp_path, tokenizer):
    fitted, details = streams_within_budget(tmp_path, tokenizer, streaming=True)
    assert fitted, f"encode_iterable exceeded its memory budget or failed:\n{details}"


def test_tokenizer_memory_check_catches_a_non_streaming_encoder(tmp_path, tokenizer):
    # The budget is tight enough that encoding everything at once does not fit.
    fitted, _ = streams_within_budget(tmp_path, tokenizer, streaming=False)
    assert not fitted


# --- robustness (advice, not graded): bad input gets a clear error --------------------------


@pytest.mark.robustness
def test_tokenizer_leaves_the_callers_vocab_alone(vocab_and_merges):
    vocab, merges = vocab_and_merges
    given = dict(vocab)
    get_tokenizer(given, list(merges), [EOT, "<|pad|>"]).encode("a<|pad|>b")
    assert given == vocab, "the tokenizer modified the vocab dict it was given"


@pytest.mark.robustness
@pytest.mark.parametrize("specials", [[""], [EOT, EOT]], ids=["empty", "duplicate"])
def test_tokenizer_bad_special_tokens(vocab_and_merges, specials):
    vocab, merges = vocab_and_merges
    with raises_an_error():
        get_tokenizer(dict(vocab), merges, specials)


@pytest.mark.robustness
def test_tokenizer_decode_unknown_id(tokenizer):
    with raises_an_error() as raised:
        tokenizer.decode([1, 2, 123456])
    message = str(raised.value)
    assert "123456" in message, (
        f"decode([1, 2, 123456]) raised {type(raised.value).__name__}: {message!r}\n"
        "hint: the error must name the unknown id, 123456 (ids 1 and 2 are in the vocab); "
        "yours does not mention it"
    )
    with raises_an_error():
        tokenizer.decode([-1])


@pytest.mark.robustness
def test_tokenizer_rejects_merge_outside_vocab(vocab_and_merges):
    vocab, merges = vocab_and_merges
    with raises_an_error():
        get_tokenizer(dict(vocab), [*merges, (b"zz", b"qq")])


def test_tokenizer_merges_stay_inside_pre_tokens():
    """The GPT-2 pattern splits "hello," into "hello" and ","; merges never cross that boundary,
    so the merge of "o" and "," below must not apply (the handout: merges act within each
    pre-token)."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"o,"}
    ids = get_tokenizer(vocab, [(b"o", b",")], []).encode("hello, world")
    crossed = (
        "\nhint: id 256 is 'o,', a merge across the pre-tokens 'hello' and ',': pre-tokenize with "
        "the GPT-2 pattern first and apply merges within each pre-token"
    )
    assert ids == list(b"hello, world"), f"'hello, world' encoded as {ids}" + (
        crossed if 256 in ids else ""
    )
