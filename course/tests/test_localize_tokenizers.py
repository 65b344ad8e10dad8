"""The diagnoses of BPE training's merges and of a tokenizer that raises (tests/measure.py,
tests/localize.py): silent on the reference's outputs and where their evidence does not hold,
naming the property a wrong output breaks."""

from __future__ import annotations

import pytest

from course.tests.test_localize import public_run, with_adapter
from tests import adapters as reference
from tests import localize, measure
from tests.cases import CASES


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
    assert localize.tokenizer_raised(reference, {}, {}) == []

    def never_builds(*args):
        raise ValueError("no")

    assert localize.tokenizer_raised(with_adapter("get_tokenizer", never_builds), {}, {}) == []


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
    line = localize.tokenizer_raised(adapters, {}, {})[0]
    assert "encodes 'hi there' without merges, decodes the ids of 'hi', but raised KeyError" in line
    assert "when it applies the merge (b'h', b'i') to 'hi hi': the error is in that step" in line
