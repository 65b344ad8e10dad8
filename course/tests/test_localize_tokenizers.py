"""The diagnoses of BPE training's merges and of a tokenizer that raises (tests/measure.py,
tests/localize/tokenizers.py): silent on the reference's outputs and where their evidence does not hold,
naming the property a wrong output breaks."""

from __future__ import annotations

import pytest

from course.cases.truths.tokenizers import naive_train_bpe
from course.tests.test_localize import public_run, with_adapter
from tests import adapters as reference
from tests import measure
from tests.cases import CASES
from tests.cases.tokenizer_diff import bytes_difference, decode_difference, stream_difference
from tests.localize.tokenizers import tokenizer_raised, train_bpe_raised


@pytest.fixture(scope="module")
def handout_run():
    return public_run(CASES["train_bpe", "handout_example"])


def with_merges(outputs: dict, merges: list[tuple[bytes, bytes]]) -> dict:
    return outputs | {"merges": [[a.hex(), b.hex()] for a, b in merges]}


def reference_merges(outputs: dict) -> list[tuple[bytes, bytes]]:
    return [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in outputs["merges"]]


def test_bpe_training_lines_are_silent_on_the_reference(handout_run):
    inputs, outputs, expected = handout_run
    assert measure.bpe_training_lines(inputs, outputs, expected) == []
    assert measure.bpe_training_lines(inputs, outputs | {"merges": "none"}, expected) == []


@pytest.mark.parametrize(
    "merges, named",
    [
        # (e, st) before (s, t) made st.
        ([(b"e", b"st"), (b"s", b"t")], "joins b'st', which is neither a byte nor the result"),
        ([(b"s", b"t"), (b"s", b"t")], "makes b'st', a token that already exists"),
        # "w" then "<" from the special token that separates the words.
        ([(b"w", b"<")], "makes b'w<', which is inside no pre-token of the corpus"),
        # A tie at 9 broken toward the smaller pair: the hand-worked counts say so.
        ([(b"e", b"s")], "the expected ('s', 't') occurs 9 times and your ('e', 's') 9 times"),
    ],
)
def test_bpe_training_lines_name_the_broken_merge_property(handout_run, merges, named):
    inputs, outputs, expected = handout_run
    lines = measure.bpe_training_lines(inputs, with_merges(outputs, merges), expected)
    assert len(lines) == 1 and named in lines[0], lines


def test_merge_order_names_a_reordering_and_a_merge_never_made():
    wanted = [(b"a", b"b"), (b"c", b"d"), (b"e", b"f")]
    assert measure.merge_order_line(wanted, wanted) == ""
    assert measure.merge_order_line(wanted[:2], wanted) == ""  # a prefix: the count says so
    line = measure.merge_order_line([wanted[0], wanted[2], wanted[1]], wanted)
    assert "your first 1 merges are the expected ones; your merge #1" in line
    assert "is the expected merge #2: from #1 on your trainer picks pairs in another order" in line
    line = measure.merge_order_line([(b"x", b"y")], wanted)
    assert "your merge #0 (b'x', b'y') is not among the 3 expected merges" in line


def test_pretokens_split_on_specials_before_the_pattern():
    pretokens = measure.pretokens_of("a cat<|x|> sat", ["<|x|>"])
    assert pretokens == {b"a", b" cat", b" sat"}
    assert measure.merge_outside_pretokens_line([(b" ", b"c"), (b"a", b"t")], pretokens) == ""
    assert "#1 makes b't<'" in measure.merge_outside_pretokens_line(
        [(b"a", b"t"), (b"t", b"<")], pretokens
    )


def test_a_tokenizer_is_silent_when_every_probe_runs_or_the_first_raises():
    assert tokenizer_raised(reference, {}, {}) == []

    def never_builds(*args):
        raise ValueError("no")

    assert tokenizer_raised(with_adapter("get_tokenizer", never_builds), {}, {}) == []


def test_a_tokenizer_raising_only_with_merges_is_located():
    class MergesBreakEncode:
        def __init__(self, vocab, merges, specials=None):
            self.inner = reference.get_tokenizer(vocab, merges, specials)
            self.merges = merges

        def encode(self, text):
            if self.merges:
                raise KeyError("rank")
            return self.inner.encode(text)

        def decode(self, ids):
            return self.inner.decode(ids)

    adapters = with_adapter("get_tokenizer", MergesBreakEncode)
    line = tokenizer_raised(adapters, {}, {})[0]
    assert (
        "encoding 'hi there' without merges, decoding the ids of 'hi'; it raised KeyError" in line
    )
    assert "the next step, applying the merge (b'h', b'i') to 'hi hi': the error is in" in line


def test_a_trainer_raising_only_with_two_merges_is_located():
    def one_merge_only(path, vocab_size, special_tokens):
        if vocab_size - 256 - len(special_tokens) > 1:
            raise IndexError("heap")
        return reference.run_train_bpe(path, vocab_size, special_tokens)

    adapters = with_adapter("run_train_bpe", one_merge_only)
    line = train_bpe_raised(adapters, {}, {})[0]
    assert "(a pair with neighbours on either side); it raised IndexError on the next" in line
    assert "step, making two merges in 'ab ab xaby': the error is in that step" in line
    assert train_bpe_raised(reference, {}, {}) == []


def test_ids_that_do_not_spell_the_text_are_named():
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    assert bytes_difference([256, 99], b"abc", vocab) == ""
    line = bytes_difference([256, 256], b"abc", vocab)
    assert "your ids spell 4 bytes, the text has 3: they first differ at byte 2" in line
    assert bytes_difference([256, 999], b"abc", vocab).startswith("1 of your ids are not in")


def test_decode_difference_holds_the_joined_bytes_to_one_decode():
    vocab = {0: b"\xe2", 1: b"\x82", 2: b"a"}
    assert decode_difference("\ufffda", [0, 1, 2], vocab) == ""
    line = decode_difference("\ufffd\ufffda", [0, 1, 2], vocab)
    assert "decoded once with errors='replace', give '\ufffda'" in line
    assert line.endswith("yours equals decoding each id's bytes on its own")
    assert "on its own" not in decode_difference("?a", [0, 1, 2], vocab)


def test_overlapping_specials_hint_what_was_encoded():
    inputs, outputs, expected = public_run(CASES["tokenizer", "overlapping_specials"])
    check = CASES["tokenizer", "overlapping_specials"].check
    assert check(outputs, expected, inputs) is None
    wrong = outputs | {"triple": outputs["single"] * 3}
    assert "hint: the longest special token matches first: EEE must be" in check(
        wrong, expected, inputs
    )


def test_a_trainer_refusing_only_the_smallest_vocab_is_located(monkeypatch, tmp_path):
    from tests import test_train_bpe

    path = test_train_bpe.write(tmp_path, "aaaa")
    assert test_train_bpe.refused_only_at_the_smallest_size(path) == []  # the reference runs

    def refuses_257(path, vocab_size, special_tokens):
        if vocab_size <= 257:
            raise ValueError("vocab_size too small")
        return reference.run_train_bpe(path, vocab_size, special_tokens)

    monkeypatch.setattr(test_train_bpe, "run_train_bpe", refuses_257)
    line = test_train_bpe.refused_only_at_the_smallest_size(path)[0]
    assert "raised at vocab_size=257 with 1 special token" in line
    assert "but runs at 258: the smallest valid vocab_size is 256 + the number" in line

    def refuses_all(path, vocab_size, special_tokens):
        raise ValueError("never")

    monkeypatch.setattr(test_train_bpe, "run_train_bpe", refuses_all)
    assert test_train_bpe.refused_only_at_the_smallest_size(path) == []


def test_merges_diagnosis_names_a_merge_never_made_and_reads_only_byte_pairs():
    from tests.test_train_bpe import merges_diagnosis

    expected = [(b"a", b"b"), (b" ", b"ab")]
    corpus = ([2, 1],)  # each merge's count on "ab ab"
    assert merges_diagnosis(expected, expected, *corpus) == ""
    assert "merge #1 (b' ', b'a') is not among the 2" in merges_diagnosis(
        [(b"a", b"b"), (b" ", b"a")], expected, *corpus
    )
    assert "made 3 merges where only 2 are possible" in merges_diagnosis(
        [*expected, (b"ab", b"ab")], expected, *corpus
    )
    pairs_as_lists = [[b"a", b"b"], [b" ", b"ab"]]
    assert merges_diagnosis(pairs_as_lists, expected, *corpus) == ""
    assert merges_diagnosis(None, expected, *corpus) == ""


def test_the_exhaustion_test_names_single_bytes_missing_from_the_vocab(monkeypatch, tmp_path):
    from tests import test_train_bpe

    def without_the_last_byte(path, vocab_size, special_tokens):
        vocab, merges = reference.run_train_bpe(path, vocab_size, special_tokens)
        return {i: t for i, t in vocab.items() if t != b"\xff"}, merges

    monkeypatch.setattr(test_train_bpe, "run_train_bpe", without_the_last_byte)
    expected = [(b"b", b"c"), (b"a", b"bc"), (b" ", b"abc")]
    with pytest.raises(AssertionError, match=r"lacks 1 of them \(e\.g\. b'\\xff'\)"):
        test_train_bpe.test_train_bpe_to_exhaustion_tracks_changing_counts(
            tmp_path, "abc abc", expected, [2, 2, 1]
        )


def test_decode_of_an_unknown_id_must_name_it():
    from tests import test_tokenizer

    class NamesTheWrongId:
        def decode(self, ids):
            raise ValueError(f"unknown token id {ids[0]}")

    with pytest.raises(AssertionError, match="hint: the error must name the unknown id, 123456"):
        test_tokenizer.test_tokenizer_decode_unknown_id(NamesTheWrongId())


def test_a_special_token_reusing_an_id_names_the_token_it_holds(monkeypatch):
    from tests import test_tokenizer

    class ReusesId1:
        def __init__(self, vocab, merges, specials=None):
            pass

        def encode(self, text):
            return [97, 1, 98]

    monkeypatch.setattr(test_tokenizer, "get_tokenizer", ReusesId1)
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(AssertionError, match=r"yours reuses 1, the vocab's id of b'\\x01'"):
        test_tokenizer.test_tokenizer_adds_missing_special_tokens_to_vocab((vocab, []))


def test_a_tokenizer_raising_on_one_word_of_the_case_names_it():
    inputs, _, _ = public_run(CASES["tokenizer", "stories"])

    class MergesFailOnZ:
        def __init__(self, vocab, merges, specials=None):
            self.inner = reference.get_tokenizer(vocab, merges, specials)
            self.merges = merges

        def encode(self, text):
            if self.merges and "z" in text:
                raise IndexError("ranks")
            return self.inner.encode(text)

        def decode(self, ids):
            return self.inner.decode(ids)

        def encode_iterable(self, texts):
            return self.inner.encode_iterable(texts)

    adapters = with_adapter("get_tokenizer", MergesFailOnZ)
    line = tokenizer_raised(adapters, inputs, {})[0]
    assert line.startswith("your encode raises on the word ")
    assert "z" in line.split("alone")[0]
    assert line.endswith("runs without the merges: the error is in applying the merges to it")
    assert tokenizer_raised(reference, inputs, {}) == []


def test_a_tie_broken_the_other_way_is_named_with_the_deciding_byte():
    # (a, b) and (c, d) both occur 3 times in "ab ab ab cd cd cd": the greater pair, (c, d), first.
    text = "ab ab ab cd cd cd"
    counts: list[int] = []
    _, wanted = naive_train_bpe(text, 258, [], counts=counts)
    assert wanted == [(b"c", b"d"), (b"a", b"b")] and counts == [3, 3]
    line = measure.merge_order_line([(b"a", b"b"), (b"c", b"d")], wanted, counts)
    assert "your merge #0 (b'a', b'b') and the expected (b'c', b'd') both occur 3 times" in line
    assert "a tie" in line and "b'c' (99) > b'a' (97)" in line


def test_the_tie_break_reason_names_the_deciding_token_and_byte():
    assert "second tokens differ first at byte 0: b'c' (99) > b'b' (98)" in (
        measure.tie_break_reason((b"a", b"c"), (b"a", b"b"))
    )
    assert "agree until b'a' ends, and the longer is greater" in (
        measure.tie_break_reason((b"ab", b"c"), (b"a", b"bc"))
    )
    assert measure.tie_break_reason((b"a", b"b"), (b"c", b"d")) == ""  # not the greater


def test_a_pair_taken_before_a_more_frequent_one_says_both_counts():
    counts: list[int] = []
    _, wanted = naive_train_bpe("ab ab ab cd cd", 258, [], counts=counts)
    line = measure.merge_order_line([(b"c", b"d")], wanted, counts)
    assert "your merge #0 (b'c', b'd') is the expected merge #1, made at a count of 2" in line
    assert "the expected (b'a', b'b') occurs 3 times there" in line and "tie" not in line


def test_without_counts_or_for_a_pair_never_made_the_order_line_stays_plain():
    wanted, counts = [(b"c", b"d"), (b"a", b"b")], [3, 3]
    assert "picks pairs in another order" in measure.merge_order_line(wanted[::-1], wanted)
    line = measure.merge_order_line([(b"x", b"y")], wanted, counts)
    assert "is not among the 2 expected merges" in line and "tie" not in line


def test_a_trainer_that_does_not_stop_is_named_on_the_case_that_runs_out():
    inputs = {"text": "ab ab", "vocab_size": 1000, "special_tokens": []}
    wanted = [(b"a", b"b"), (b" ", b"ab")]
    expected = {"vocab": [bytes([b]).hex() for b in range(256)] + ["6162", "206162"]}
    expected["merges"] = [[a.hex(), b.hex()] for a, b in wanted]
    outputs = with_merges({"vocab": expected["vocab"] + ["00"]}, [*wanted, (b"ab", b"ab")])
    lines = measure.bpe_training_lines(inputs, outputs, expected)
    assert lines and "made 3 merges where only 2 are possible on this corpus" in lines[0]
    assert measure.bpe_training_lines(inputs, with_merges(outputs, wanted), expected) == []


STREAM_VOCAB = {i: bytes([i]) for i in range(256)} | {256: b" b", 257: b" bu", 258: b"<|eot|>"}


@pytest.mark.parametrize("chunks", [[" bu b"], [" b", "u b"], [" bu", " b"]])
def test_stream_difference_is_silent_where_the_ids_agree(chunks):
    assert stream_difference(chunks, [257, 256], [257, 256], STREAM_VOCAB) == ""
    assert stream_difference(chunks, [257, 999], [257, 256], STREAM_VOCAB) == ""  # an unknown id


def test_stream_difference_names_a_chunk_that_ends_inside_the_differing_bytes():
    line = stream_difference([" b", "u b"], [256, 117, 256], [257, 256], STREAM_VOCAB)
    assert line.startswith("encode_iterable and encode first differ at id 0, byte 0 of the text")
    assert "yours streamed [b' b', b'u'], encode gives [b' bu']" in line
    assert "a chunk ends at byte 2, inside those bytes" in line


def test_stream_difference_claims_no_chunk_where_none_ends_inside():
    line = stream_difference([" bu b"], [256, 117, 256], [257, 256], STREAM_VOCAB)
    assert line.startswith("encode_iterable and encode first differ at id 0")
    assert "chunk" not in line


def test_stream_difference_names_a_tail_never_encoded():
    line = stream_difference([" bu", " b"], [257], [257, 256], STREAM_VOCAB)
    assert line.startswith("encode_iterable stops after 1 ids where encode gives 2")
    assert "from byte 3 on (b' b'...) was never encoded" in line
