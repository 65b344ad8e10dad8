"""The generic diagnosis of a failed snapshot comparison (``tests/snapshots.py``), on outputs
constructed to stand in each relation to the expected one — and on unrelated outputs, which must
get no relation hint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course.cases.truths import special_tokens as special_token_truths
from course.cases.truths.tokenizers import naive_encode, naive_train_bpe, tiktoken_of
from tests.cases import special_tokens
from tests.cases.shipped import Shipped
from tests.cases.special_tokens import merges_from_special_text
from tests.cases.tokenizers import merges_to_wire
from tests.hints import close, dtype_kept, softmax_mistakes
from tests.snapshots import (
    GENERIC_HINTS,
    Snapshot,
    describe_mismatch,
    relation_tolerance,
    sign_pattern_hint,
)

RNG = np.random.default_rng(0)


def diagnosis(actual: np.ndarray, expected: np.ndarray) -> str:
    snapshot = Snapshot(expected, expected.astype(np.float32), 1e-6, hints={})
    message = describe_mismatch("constructed", actual, snapshot, exact=False)
    assert message is not None, "the constructed output should not match"
    return message


def hints_of(message: str) -> list[str]:
    """The generic ``diagnosis:`` lines, then the catalogue's ``hint:`` lines, in order."""
    return [
        line.split(":", 1)[1].strip()
        for line in message.splitlines()
        if line.strip().startswith(("diagnosis:", "hint:"))
    ]


@pytest.mark.parametrize(
    "factor, named",
    [
        (1 / math.sqrt(16), "1/sqrt(16)"),
        (math.sqrt(16), "sqrt(16)"),
        (16.0, "16 (the last dimension"),
        (1 / 16, "1/16 (the last dimension"),
        (2.0, "= 2."),
        (0.5, "= 1/2."),
        (1 / math.sqrt(7), "1/sqrt(7) (sqrt of a dimension of size 7)"),
        (0.731, "x 0.731."),
    ],
)
def test_constant_factor_is_named(factor, named) -> None:
    expected = RNG.normal(size=(3, 7, 16))
    (hint,) = hints_of(diagnosis(expected * factor, expected))
    assert "times a constant" in hint and named in hint, hint


def test_one_value_is_never_called_a_multiple_but_its_sign_flip_is_named() -> None:
    expected = np.array([1.7])
    for factor in (0.731, 2.0):
        hints = hints_of(diagnosis(expected * factor, expected))
        assert not any("times a constant" in h for h in hints), hints
    assert any("sign flipped" in h for h in hints_of(diagnosis(-expected, expected)))


def test_a_constant_factor_needs_an_output_the_call_computed() -> None:
    """Clipping's expected gradients are the given ones times a constant, so gradients left as
    given (a generator consumed before the scaling loop) stand in that relation too: that is
    no evidence of a wrong scale factor, and the diagnosis says what holds instead."""
    given = RNG.normal(size=(4, 6))
    expected = given * 0.163
    snapshot = Snapshot(expected, expected.astype(np.float32), 1e-6, hints={})
    untouched = describe_mismatch("g", given.copy(), snapshot, exact=False, given=given)
    assert hints_of(untouched) == [
        "your output is the input the call was given, unchanged: nothing was done to it"
    ]
    # Scaled by a wrong factor, the same output keeps its constant-factor diagnosis.
    (hint,) = hints_of(describe_mismatch("g", given * 0.5, snapshot, exact=False, given=given))
    assert "times a constant" in hint


def test_sign_flip() -> None:
    expected = RNG.normal(size=(4, 8))
    (hint,) = hints_of(diagnosis(-expected, expected))
    assert "sign flipped" in hint


def test_partial_sign_flip_names_the_columns() -> None:
    expected = RNG.normal(size=(5, 8))
    actual = expected.copy()
    actual[:, 1::2] *= -1  # e.g. a rotation in the wrong direction
    (hint,) = hints_of(diagnosis(actual, expected))
    assert "wrong sign at 20 of 40" in hint and "[1, 3, 5, 7]" in hint, hint


def test_transpose_of_square_last_axes() -> None:
    expected = RNG.normal(size=(2, 6, 6))
    (hint,) = hints_of(diagnosis(expected.swapaxes(-1, -2), expected))
    assert "transposed" in hint


def test_transpose_with_a_shape_mismatch() -> None:
    expected = RNG.normal(size=(2, 5, 7))
    message = diagnosis(expected.swapaxes(-1, -2), expected)
    assert "differs from the expected shape" in message and "transposed" in message


def test_permuted_axes() -> None:
    expected = RNG.normal(size=(2, 3, 4, 5))
    message = diagnosis(expected.transpose(0, 2, 1, 3), expected)
    assert "permuted to (0, 2, 1, 3)" in message


@pytest.mark.parametrize(
    "layout, named",
    [
        (np.arange(8).reshape(4, 2).T.reshape(-1), "rotate-half vs interleaved"),
        (np.arange(8).reshape(-1, 2)[:, ::-1].reshape(-1), "adjacent pairs swapped"),
        (np.roll(np.arange(8), 4), "halves swapped"),
        (np.array([0, 1, 2, 3, 4, 5, 7, 6]), "element 6 holds expected element 7"),
    ],
)
def test_last_dimension_permutation(layout, named) -> None:
    expected = RNG.normal(size=(3, 5, 8))
    (hint,) = hints_of(diagnosis(expected[..., layout], expected))
    assert "wrong order along the last dimension" in hint and named in hint, hint


@pytest.mark.parametrize("step", [1, -1])
def test_shift_by_one_along_the_sequence(step) -> None:
    expected = RNG.normal(size=(2, 10, 4))
    actual = np.roll(expected, step, axis=1)
    actual[:, 0 if step == 1 else -1] = RNG.normal(size=(2, 4))  # what rolled in is unrelated
    (hint,) = hints_of(diagnosis(actual, expected))
    assert f"shifted by {step:+d} along axis 1" in hint, hint


def test_wrong_only_above_the_diagonal() -> None:
    expected = RNG.normal(size=(2, 6, 6))
    actual = expected + np.triu(RNG.normal(size=(6, 6)), k=1)
    (hint,) = hints_of(diagnosis(actual, expected))
    assert "above the diagonal" in hint and "causal mask" in hint, hint


def test_wrong_only_at_trailing_positions() -> None:
    expected = RNG.normal(size=(2, 10, 4))
    actual = expected.copy()
    actual[:, 7:] = 0.0  # padded positions zeroed
    (hint,) = hints_of(diagnosis(actual, expected))
    assert "trailing indices 7..9 along axis 1" in hint, hint


@pytest.mark.parametrize("dtype, name", [(torch.float16, "float16"), (torch.bfloat16, "bfloat16")])
def test_low_precision_rounding(dtype, name) -> None:
    expected = RNG.normal(size=(4, 32))
    actual = torch.from_numpy(expected).to(dtype).double().numpy()
    (hint,) = hints_of(diagnosis(actual, expected))
    assert f"only to {name} precision" in hint and f"exactly a {name}" in hint, hint


def test_nan_rows_point_at_a_fully_masked_softmax() -> None:
    expected = RNG.normal(size=(2, 4, 4))
    actual = expected.copy()
    actual[0, 0] = np.nan
    message = diagnosis(actual, expected)
    assert "4 NaN" in message and "whole rows" in message and "fully masked" in message


def test_inf_points_at_an_overflow() -> None:
    expected = RNG.normal(size=(3, 5)) * 1e5
    actual = expected.copy()
    actual[1, 2] = np.inf
    assert "overflow" in diagnosis(actual, expected)


@pytest.mark.parametrize(
    "actual",
    [
        RNG.normal(size=(3, 7, 16)),  # unrelated
        np.zeros((3, 7, 16)),
    ],
)
def test_unrelated_outputs_get_no_relation_hint(actual) -> None:
    expected = RNG.normal(size=(3, 7, 16))
    assert hints_of(diagnosis(actual, expected)) == []


def test_small_wrong_term_is_not_called_low_precision() -> None:
    expected = RNG.normal(size=(4, 32))
    actual = expected * (1 + 1e-5)  # e.g. an eps in the wrong place: far below float16 rounding
    message = diagnosis(actual + RNG.normal(size=expected.shape) * 1e-5, expected)
    assert "precision" not in message


def test_relation_diagnosis_comes_before_the_catalogue_hint() -> None:
    expected = RNG.normal(size=(3, 4))
    wrong = 2 * expected
    snapshot = Snapshot(
        expected, expected.astype(np.float32), 1e-6, hints={"double": ("doubled it", wrong)}
    )
    message = describe_mismatch("constructed", wrong, snapshot, exact=False)
    lines = [line.strip() for line in message.splitlines()]
    assert lines[-2].startswith("diagnosis: your output is the expected one times a constant")
    assert lines[-1] == "hint: doubled it"


# --- Silence: no diagnosis fires on an output it does not describe ------------------------------


def related_outputs(expected: np.ndarray) -> dict[str, np.ndarray]:
    """One output standing in each relation to ``expected``, keyed by the diagnosis that owns it."""
    shifted = np.roll(expected, 1, axis=1)
    shifted[:, 0] = RNG.normal(size=expected.shape[2])
    flipped = expected.copy()
    flipped[..., :5] *= -1  # (flipping a minority of columns is also "right except at" them)
    partial = expected.copy()
    partial[:, -2:] += 3.0
    return {
        "constant_factor_hint": 2 * expected,
        "low_precision_hint": torch.from_numpy(expected).bfloat16().double().numpy(),
        "axes_hint": expected.swapaxes(-1, -2),
        "last_dim_permutation_hint": expected[..., ::-1],
        "shift_hint": shifted,
        "sign_pattern_hint": flipped,
        "partial_agreement_hint": partial,
        "unrelated": RNG.normal(size=expected.shape),
        "near_miss": expected * (1 + 1e-5) + RNG.normal(size=expected.shape) * 1e-6,
    }


@pytest.mark.parametrize("diagnose", GENERIC_HINTS, ids=lambda f: f.__name__)
def test_each_generic_diagnosis_fires_only_on_its_own_relation(diagnose) -> None:
    expected = RNG.normal(size=(3, 8, 8))
    tolerance = relation_tolerance(1e-6, expected)
    outputs = related_outputs(expected)
    assert diagnose.__name__ in outputs, f"no output with {diagnose.__name__}'s relation to test"
    for owner, actual in outputs.items():
        hint = diagnose(actual, expected, tolerance)
        if owner == diagnose.__name__:
            assert hint, f"{owner} stayed silent on its own relation"
        else:
            assert not hint, f"{diagnose.__name__} fired on a {owner} output: {hint}"


def test_no_sign_error_is_reported_without_a_flipped_element() -> None:
    # Issue 26: RMSNorm with eps outside the square root was told "the wrong sign at 0 of 3072
    # elements". A near miss gets the near-miss diagnosis, and no sign sentence.
    expected = RNG.normal(size=(4, 12, 64)) * 3
    actual = expected * (1 - 5e-6)
    message = diagnosis(actual, expected)
    assert "sign" not in message and "close to the expected one" in message, message
    assert sign_pattern_hint(actual, expected, relation_tolerance(1e-6, expected)) == ""


def test_near_catalogued_mistake_matches_only_an_output_much_closer_to_it() -> None:
    expected = RNG.normal(size=(4, 16))
    near = expected * (1 + 4e-5)  # a mistake a few tolerances away (e.g. eps placement)
    snapshot = Snapshot(expected, expected.astype(np.float32), 1e-5, hints={"n": ("near", near)})
    assert "hint: near" in describe_mismatch("c", near + 1e-7, snapshot, exact=False)
    halfway = expected * (1 + 2e-5)  # as close to the truth as to the mistake: no evidence
    assert "hint:" not in describe_mismatch("c", halfway, snapshot, exact=False)


def test_softmax_mistakes_match_only_their_own_outputs() -> None:
    x = torch.tensor([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0], [88.0, 89.0, 90.0]])
    mistakes = softmax_mistakes(x, -1)
    right = torch.softmax(x.double(), dim=-1)
    for hint, output in mistakes.items():
        assert not close(output, right, 1e-5), f"{hint!r} gives the right answer"
        others = [h for h, o in mistakes.items() if h != hint and close(output, o)]
        assert not others or torch.isnan(output).all(), (hint, others)
    # Small inputs: subtracting the global max, or none, gives the right answer: no such hint.
    small = softmax_mistakes(torch.randn(3, 4), -1)
    assert not any("without subtracting" in h or "whole tensor" in h for h in small), small


# --- The special-token cases' hints (tests/cases/special_tokens.py) ------------------------------


def test_special_text_evidence_only_for_merges_made_inside_special_tokens() -> None:
    inputs = {
        "unit": "xy<| a b |>ab<|x|><|y|>",
        "special_tokens": ["<|y|>", "<|x|><|y|>", "<| a b |>"],
    }
    text = inputs["unit"] * 3
    _, right = naive_train_bpe(text, 280, inputs["special_tokens"])
    _, as_text = naive_train_bpe(text, 280, inputs["special_tokens"], "no_special_split")
    expected = {
        "inside_only": special_token_truths.inside_only(inputs["unit"], inputs["special_tokens"])
    }
    assert merges_from_special_text(merges_to_wire(right), expected) == []
    assert merges_from_special_text(merges_to_wire(as_text), expected)


def test_tricky_special_token_hints_name_only_the_mistake_they_reproduce() -> None:
    inputs = special_tokens.tricky_inputs(Shipped())
    expected = special_token_truths.tricky_expected(inputs) | {"reveal": True}
    texts = inputs["texts"]
    right = {"encode": dict(expected["ids"]), "decoded": dict(texts)}
    right["lines"] = {
        name: expected["ids"][name]
        for name, text in texts.items()
        if special_tokens.read_by_lines(text, inputs["special_tokens"])
    }
    # A special token holding a newline keeps its text's lines out of the graded runs.
    assert "lines" not in right["lines"] and right["lines"]
    assert special_tokens.check_tricky(right, expected, inputs) is None
    name = "spaced"
    as_text = expected["mistakes"][name]["as_text"]
    wrong = right | {"encode": right["encode"] | {name: as_text}}
    assert special_tokens.MISTAKES["as_text"] in special_tokens.check_tricky(
        wrong, expected, inputs
    )
    reversed_ids = right | {"lines": right["lines"] | {name: expected["ids"][name][::-1]}}
    message = special_tokens.check_tricky(reversed_ids, expected, inputs)
    assert special_tokens.LINES in message and "hint:" not in message
    # A stream cut short (its last piece never flushed) is charged by the encode_iterable case
    # alone; a streamed special token cut in two is this case's own mistake.
    cut_short = right | {"lines": right["lines"] | {name: expected["ids"][name][:-3]}}
    assert special_tokens.check_tricky(cut_short, expected, inputs) is None
    cut_inside = right | {"lines": right["lines"] | {name: as_text}}
    assert special_tokens.LINES in special_tokens.check_tricky(cut_inside, expected, inputs)


def test_dtype_hint_only_for_an_upcast_that_was_not_cast_back() -> None:
    bf16 = torch.zeros(2, dtype=torch.bfloat16)
    assert dtype_kept(bf16, torch.bfloat16) == ""
    assert "cast the result back" in dtype_kept(bf16.float(), torch.bfloat16)
    assert "hint" not in dtype_kept(bf16.half(), torch.bfloat16)  # another mistake: no hint


def test_the_merge_order_hint_rests_on_a_naive_encoder_that_agrees_with_tiktoken() -> None:
    # The tokenizer tests name "merges applied latest first" when your ids equal the naive
    # encoder's with the merges reversed; in the right order it must give tiktoken's ids.
    vocab, merges = Shipped().vocab_and_merges
    text = Shipped().corpus(5000) + "<|endoftext|> ooo  \n\n"
    right = naive_encode(text, vocab, merges, ["<|endoftext|>"])
    assert right == tiktoken_of(vocab, ["<|endoftext|>"]).encode(text, allowed_special="all")
    assert naive_encode(text, vocab, merges[::-1], ["<|endoftext|>"]) != right
