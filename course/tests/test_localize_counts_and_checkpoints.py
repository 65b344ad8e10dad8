"""The term-by-term diagnoses of parameter and FLOP counts, the checkpoint probes and the
training step's (tests/localize/accounting.py and training.py, tests/measure.py): silent on
right answers and where their evidence does not hold, naming the term, the restored state or
the part of a step that is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from course.tests.test_localize import public_run, with_adapter
from cs336_basics import checkpoint as reference_checkpoint
from tests import adapters as reference
from tests import measure
from tests.cases import CASES
from tests.localize import localize, localize_raised
from tests.localize.accounting import flop_terms, parameter_terms
from tests.localize.training import (
    evaluation_raised,
    prefixed_key,
    saved_file_lines,
    training_step_raised,
)
from tests.variants.test_variants import loss_terms_line


def handout_parameters(vocab_size, context_length, d_model, num_layers, num_heads, d_ff, **off):
    """The handout's count, term by term, with ``off`` replacing some terms."""
    d = d_model
    terms = {
        "embedding": vocab_size * d,
        "attention": num_layers * 4 * d * d,
        "ffn": num_layers * 3 * d * d_ff,
        "norms": num_layers * 2 * d,
        "final_norm": d,
        "lm_head": vocab_size * d,
    }
    return sum((terms | off).values())


def handout_flops(
    vocab_size, context_length, d_model, num_layers, num_heads, d_ff, batch_size, sequence_length
):
    tokens, d = batch_size * sequence_length, d_model
    per_layer = 8 * tokens * d * d + 4 * batch_size * sequence_length**2 * d + 6 * tokens * d * d_ff
    return num_layers * per_layer + 2 * tokens * d * vocab_size


def test_right_counts_get_no_line():
    assert parameter_terms(handout_parameters) == []
    assert flop_terms(handout_flops) == []
    assert parameter_terms(reference.run_count_parameters) == []
    assert flop_terms(reference.run_forward_flops) == []


def test_a_count_returned_as_a_float_or_a_tensor_is_read_exactly():
    assert flop_terms(lambda **shape: float(handout_flops(**shape))) == []
    assert parameter_terms(lambda **shape: torch.tensor(handout_parameters(**shape))) == []


@pytest.mark.parametrize(
    "off, expected",
    [
        (  # tied embeddings: one vocab_size x d_model matrix
            lambda s: {"lm_head": 0},
            "grows by 32 per vocab entry, the handout's by 2 d_model = 64",
        ),
        (
            lambda s: {"ffn": s["num_layers"] * 2 * s["d_model"] * s["d_ff"]},
            "grows by 128 per unit of d_ff, the handout's by 3 d_model num_layers = 192",
        ),
        (  # three projections per layer: 3 * 32^2 + 2 * 32
            lambda s: {"attention": s["num_layers"] * 3 * s["d_model"] ** 2},
            "each layer adds 3,136 parameters to your count, the handout's 4 d_model^2 + 2 "
            "d_model = 4,160",
        ),
        (
            lambda s: {"final_norm": 0},
            "your count holds 0, the handout's d_model = 32: the final norm's gain",
        ),
        (
            lambda s: {"attention": s["num_layers"] * 4 * s["d_model"] * s["num_heads"]},
            "each layer adds",
        ),
    ],
)
def test_a_wrong_parameter_term_is_named(off, expected):
    def count(**shape):
        return handout_parameters(**shape, **off(shape))

    lines = parameter_terms(count)
    assert len(lines) == 1 and expected in lines[0], lines


def test_a_parameter_count_that_grows_with_the_heads_is_named():
    def count(**shape):
        return handout_parameters(**shape) + shape["num_heads"]

    (line,) = parameter_terms(count)
    assert "changes by 4 when num_heads and context_length double, the handout's by 0" in line


def shifted_flops(extra):
    def count(**shape):
        return handout_flops(**shape) + extra(shape)

    return count


@pytest.mark.parametrize(
    "extra, expected",
    [
        (  # no LM head: batch 3, seq 8, d_model 32
            lambda s: -2 * s["batch_size"] * s["sequence_length"] * s["d_model"] * s["vocab_size"],
            "grows by 0 per vocab entry, the handout's by 2 batch seq d_model = 1,536",
        ),
        (  # SwiGLU counted as two matmuls: 4 * 3 * 8 * 32 * 2
            lambda s: (
                -2 * s["num_layers"] * s["batch_size"] * s["sequence_length"] * 32 * s["d_ff"]
            ),
            "grows by 6,144 per unit of d_ff, the handout's by 6 batch seq d_model num_layers = "
            "9,216",
        ),
        (  # the scores over the causal half only: (1 + 2) * 3 * 32 per layer
            lambda s: -s["num_layers"] * s["batch_size"] * s["sequence_length"] ** 2 * s["d_model"],
            "the seq^2 term of your count is 288 seq^2, the handout's 4 batch d_model = 384",
        ),
        (  # three projections: 6 * 3 * 32^2
            lambda s: -2 * s["num_layers"] * s["batch_size"] * s["sequence_length"] * 32**2,
            "the seq-linear term of your count is 18,432 seq, the handout's 8 batch d_model^2 = "
            "24,576",
        ),
        (
            lambda s: 7 * s["num_layers"],
            "your count holds 7 FLOPs that do not grow with seq, the handout's 0",
        ),
        (
            lambda s: s["num_layers"] * s["sequence_length"] ** 3,
            "besides the feed-forward, each layer adds 221,696 FLOPs to your count, the handout's "
            "221,184",
        ),
        (
            lambda s: s["num_heads"] * s["batch_size"],
            "changes by 12 when num_heads doubles, the handout's by 0",
        ),
        (  # the final norm counted: 2 FLOPs per value
            lambda s: 2 * s["batch_size"] * s["sequence_length"] * s["d_model"],
            "besides the layers and the LM head your count holds 1,536 FLOPs, the handout's 0",
        ),
    ],
)
def test_a_wrong_flop_term_is_named(extra, expected):
    lines = flop_terms(shifted_flops(extra))
    assert len(lines) == 1 and expected in lines[0], lines


def test_counts_that_refuse_or_are_not_numbers_get_no_line():
    def refuses(**shape):
        raise ValueError("unsupported shape")

    assert parameter_terms(refuses) == []
    assert flop_terms(refuses) == []
    assert flop_terms(lambda **shape: str(handout_flops(**shape))) == []
    # Right on small shapes, wrong only on large ones (a 32-bit overflow): nothing to name there.
    overflowing = lambda **shape: handout_parameters(**shape) % 2**31  # noqa: E731
    assert parameter_terms(overflowing) == []


# --- checkpoints ------------------------------------------------------------------------------

CASE = CASES["checkpoint", "bytesio"]


def adapters_with(**replaced):
    """The reference adapters with those named replaced."""
    adapters = with_adapter("run_save_checkpoint", reference.run_save_checkpoint)
    for name, replacement in replaced.items():
        setattr(adapters, name, replacement)
    return adapters


def diagnosis_of(**replaced) -> str:
    adapters = adapters_with(**replaced)
    inputs, outputs, expected = public_run(CASE, adapters)
    return "\n".join(localize("checkpoint", adapters, inputs, outputs, expected))


def test_a_load_that_skips_the_optimizer_is_named():
    def model_only(src, model, optimizer):
        return reference_checkpoint.load_checkpoint(src, model, None)

    line = diagnosis_of(run_load_checkpoint=model_only)
    assert "the optimizer's learning rate is 0.5, not the saved 0.01" in line


def test_a_load_that_skips_the_model_is_named():
    def optimizer_only(src, model, optimizer):
        saved = torch.load(src, weights_only=True)
        optimizer.load_state_dict(saved["optimizer"])
        return saved["iteration"]

    assert "the model's weights differ from those saved" in diagnosis_of(
        run_load_checkpoint=optimizer_only
    )


def test_a_load_that_loses_the_moments_is_named():
    def groups_only(src, model, optimizer):
        saved = torch.load(src, weights_only=True)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"] | {"state": {}})
        return saved["iteration"]

    line = diagnosis_of(run_load_checkpoint=groups_only)
    assert "the optimizer's state (AdamW's step count and moments) differs" in line


def raised_lines(**replaced) -> list[str]:
    inputs, _, expected = public_run(CASE)
    return localize_raised("checkpoint", adapters_with(**replaced), inputs, expected)


def refuse(*args):
    raise RuntimeError("cannot load")


def test_a_load_that_raises_after_a_right_save_is_located():
    (line,) = raised_lines(run_load_checkpoint=refuse)
    assert "holds the model's and the optimizer's state dicts as saved" in line
    assert "your load raised" in line


def test_a_save_without_the_optimizer_is_named_when_load_raises():
    def without_optimizer(model, optimizer, iteration, out):
        reference_checkpoint.save_checkpoint(model, None, iteration, out)

    (line,) = raised_lines(run_save_checkpoint=without_optimizer, run_load_checkpoint=refuse)
    assert "holds no copy of the optimizer's state dict" in line


def test_checkpoint_probes_say_nothing_without_evidence():
    def json_save(model, optimizer, iteration, out):
        out.write(json.dumps({"iteration": iteration}).encode())

    def save_refuses(model, optimizer, iteration, out):
        raise RuntimeError("disk full")

    assert raised_lines(run_save_checkpoint=json_save, run_load_checkpoint=refuse) == []
    assert raised_lines(run_save_checkpoint=save_refuses) == []
    assert raised_lines() == []  # the reference's load runs on the probe: nothing located


def test_a_saved_file_with_wrapper_prefixes_is_named_before_what_it_holds():
    model = torch.nn.Linear(2, 2)
    state = model.state_dict()
    prefixed = {"model": {f"_orig_mod.{k}": v for k, v in state.items()}, "optimizer": None}
    (line,) = saved_file_lines(prefixed, state, {"state": {}, "param_groups": []})
    assert "keys like '_orig_mod.weight'" in line
    nested = {"model": state, "optimizer": {"state": {}, "param_groups": []}}
    (line,) = saved_file_lines(nested, state, {"state": {}, "param_groups": [{"lr": 0.1}]})
    assert "holds no copy of the optimizer's state dict" in line
    assert prefixed_key([{"weight": 1}, ("module",)]) == ""


# --- the training step ------------------------------------------------------------------------

WANT = [torch.tensor([[0.5, -1.0], [2.0, 0.25]]), torch.tensor([0.0, 3.0])]


def test_right_accumulated_gradients_get_no_line():
    assert measure.accumulation_lines([w.clone() for w in WANT], WANT, 7.0, 3, 3) == []


@pytest.mark.parametrize(
    "got, forwards, expected",
    [
        ([w * 3 for w in WANT], 3, "your gradients are 3 times the big batch's, for every param"),
        ([w / 3 for w in WANT], 3, "your gradients are 0.3333 times the big batch's"),
        ([w + 7.0 for w in WANT], 3, "the big batch's plus the 7 they held before the call"),
        ([w * 2 / 3 for w in WANT], 2, "ran the model forward 2 times for 3 micro-batches"),
    ],
)
def test_wrong_accumulated_gradients_name_the_property(got, forwards, expected):
    (line,) = measure.accumulation_lines(got, WANT, 7.0, forwards, 3)
    assert expected in line


def test_gradients_off_without_one_account_get_no_line():
    uneven = [WANT[0] * 2, WANT[1] * 3]
    assert measure.accumulation_lines(uneven, WANT, 7.0, 3, 3) == []
    assert measure.accumulation_lines([WANT[0], None], WANT, 7.0, 3, 3) == []
    assert measure.accumulation_lines([WANT[0].T, WANT[1]], WANT, 7.0, 3, 3) == []


TINY = dict(
    vocab_size=32, context_length=8, d_model=16, num_layers=1, num_heads=2, d_ff=32, rope_theta=1e4
)


def training_adapters(**replaced):
    adapters = adapters_with(**replaced)
    adapters.get_transformer_lm = reference.get_transformer_lm
    return adapters


def test_a_raising_training_step_is_located():
    (line,) = training_step_raised(training_adapters(run_accumulate_gradients=refuse), TINY)
    assert "your gradient accumulation (run_accumulate_gradients) raises too" in line
    (line,) = training_step_raised(training_adapters(run_evaluate=refuse), TINY)
    assert "your evaluation (run_evaluate) raises: the error is in the evaluation" in line
    (line,) = training_step_raised(training_adapters(), TINY)
    assert "your gradient accumulation and your evaluation run" in line


def test_training_probes_say_nothing_when_a_part_is_unwired_or_the_loss_raises():
    def unwired(*args):
        raise NotImplementedError

    assert training_step_raised(training_adapters(run_evaluate=unwired), TINY) == []
    assert training_step_raised(training_adapters(run_cross_entropy=refuse), TINY) == []


def test_a_raising_evaluation_is_located():
    model = reference.get_transformer_lm(**TINY)
    data = np.full(200, 5, dtype=np.uint16)
    (line,) = evaluation_raised(training_adapters(), model, data, 3, 8)
    assert "each run alone on this dataset (200 tokens, batch_size=3, context_length=8)" in line
    (line,) = evaluation_raised(training_adapters(run_get_batch=refuse), model, data, 3, 8)
    assert "your get_batch raises alone on this dataset" in line
    assert evaluation_raised(training_adapters(run_cross_entropy=refuse), model, data, 3, 8) == []


def test_a_training_loss_missing_a_term_is_named():
    assert "is the cross-entropy alone" in loss_terms_line(4.0, 4.0, 1.0)
    assert "is the auxiliary loss alone: add the cross-entropy" in loss_terms_line(1.0, 4.0, 1.0)
    assert loss_terms_line(4.5, 4.0, 1.0) == ""


def save_the_module(model, optimizer, iteration, out):
    torch.save({"model": model, "optimizer": optimizer.state_dict(), "iteration": iteration}, out)


def test_a_checkpoint_pickling_the_model_itself_is_named():
    from tests.localize.training import checkpoint_raised, pickled_global

    case = CASES["checkpoint", "path"]
    inputs, _, expected = public_run(case)
    pickling = with_adapter("run_save_checkpoint", save_the_module)
    with pytest.raises(Exception, match="Weights only load failed"):
        case.call(pickling, inputs)  # the case's own load refuses the file
    (line,) = checkpoint_raised(pickling, inputs, expected)
    assert line.startswith("your checkpoint file pickles an object of torch.nn.modules.")
    assert "save model.state_dict() and optimizer.state_dict()" in line
    assert checkpoint_raised(reference, inputs, expected) == []  # its load runs: nothing located
    assert pickled_global(RuntimeError("another error")) == ""
