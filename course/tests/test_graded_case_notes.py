"""A shipped test's failure gets the diagnosis of its component's failing graded case
(tests/localize graded_case_lines, graded_case_located): the first failure of a test file run
alone then names the stage or property too. Silent when the graded cases pass, and for code not
written yet."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from tests import adapters as reference
from tests.hints import labelled_lines
from tests.localize import graded_case_lines, graded_case_located


def with_adapter(name: str, replacement) -> SimpleNamespace:
    """The reference adapters with one replaced."""
    names = {n: getattr(reference, n) for n in dir(reference) if n.startswith(("run_", "get_"))}
    return SimpleNamespace(**(names | {name: replacement}))


def untransposed_linear(d_in, d_out, weights, in_features):
    return in_features @ weights


def unwritten_linear(d_in, d_out, weights, in_features):
    raise NotImplementedError


@pytest.mark.parametrize("component", ["linear", "rmsnorm", "get_batch", "cosine_schedule"])
def test_passing_graded_cases_give_no_note(component):
    assert graded_case_lines(component, reference) == []


def test_a_failing_graded_case_gives_its_diagnosis_naming_the_case():
    lines = graded_case_lines("linear", with_adapter("run_linear", untransposed_linear))
    assert lines and lines[0].startswith("on the graded case linear-public-")
    assert "x @ W.T" in " ".join(lines)


def test_a_graded_case_that_raised_gives_what_simpler_inputs_measured():
    from course.tests.test_localize_properties import column_lookup

    lines = graded_case_lines("embedding", with_adapter("run_embedding", column_lookup))
    assert lines and lines[0].startswith("on the graded case embedding-public-basic: with a square")
    assert graded_case_lines("embedding", reference) == []


def test_code_not_written_yet_gets_no_note():
    assert graded_case_lines("linear", with_adapter("run_linear", unwritten_linear)) == []


def test_the_note_goes_on_the_tests_own_failure_and_never_on_not_implemented():
    wrong = with_adapter("run_linear", untransposed_linear)

    @graded_case_located("linear", wrong)
    def fails(tolerance):
        torch.testing.assert_close(torch.zeros(2), torch.ones(2), atol=tolerance, rtol=0)

    with pytest.raises(AssertionError) as failure:
        fails(0.5)
    assert "diagnosis: on the graded case linear-public-" in "\n".join(failure.value.__notes__)

    with pytest.raises(NotImplementedError) as unwritten, graded_case_located("linear", wrong):
        raise NotImplementedError
    assert not getattr(unwritten.value, "__notes__", None)

    with pytest.raises(AssertionError) as right, graded_case_located("linear", reference):
        raise AssertionError("off")
    assert not getattr(right.value, "__notes__", None)


def lossy_tokenizer(vocab, merges, special_tokens=None):
    """The reference tokenizer, but decode drops the bytes that are not UTF-8."""
    inner = reference.get_tokenizer(vocab, merges, special_tokens)

    class Lossy:
        def __getattr__(self, name):
            return getattr(inner, name)

        def decode(self, ids):
            return inner.decode(ids).replace("\ufffd", "")

    return Lossy()


def test_a_case_without_a_measured_diagnosis_gives_the_lines_its_check_wrote():
    lines = graded_case_lines("tokenizer", with_adapter("get_tokenizer", lossy_tokenizer))
    assert lines and lines[0].startswith("on the graded case tokenizer-public-decode_malformed: ")
    assert "errors='replace'" in lines[0]


def test_labelled_lines_are_the_hint_and_diagnosis_lines_without_their_labels():
    message = "got 2, expected 3\n  diagnosis: a sum, not a mean \nhint: divide by n\nno hint here"
    assert labelled_lines(message) == ["a sum, not a mean", "divide by n"]
    assert labelled_lines("assert 0 == 2") == []
