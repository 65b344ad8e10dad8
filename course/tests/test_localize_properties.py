"""The property diagnoses of get_batch's rows, gradient clipping's factor, RoPE's positions,
RMSNorm's axis and SiLU's shape, and of a public case whose call raised (tests/localize/raised.py,
tests/measure.py): silent on right answers and on evidence that does not hold, naming the
property a wrong answer breaks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course.tests.test_localize import SHIPPED, public_run, with_adapter
from tests import adapters as reference
from tests import measure, snapshots
from tests.cases import CASES
from tests.cases.core import normalize
from tests.cases.public import public_expected, public_inputs
from tests.localize import RAISED_DIAGNOSES, diagnosed_if_raised
from tests.localize.losses import closed_form_lines, cross_entropy_raised
from tests.localize.raised import (
    adamw_raised,
    clipping_raised,
    embedding_raised,
    get_batch_raised,
    linear_raised,
    rmsnorm_raised,
    schedule_raised,
    softmax_raised,
)
from tests.measure import exhaustion_line
from tests.test_generation import implied_temperature, outside_nucleus_line
from tests.test_layers import beyond_the_cut

DATA = torch.arange(10, 30)  # distinct ids


def layer_case(component: str, name: str):
    case = CASES[component, name]
    inputs = public_inputs(case, SHIPPED)
    return inputs, public_expected(case)


def rows(starts: list[int], width: int, shift: int = 0) -> torch.Tensor:
    return torch.stack([DATA[s + shift : s + shift + width] for s in starts])


def test_right_windows_get_no_line():
    assert measure.window_lines(DATA, rows([0, 5, 15], 4), rows([0, 5, 15], 4, 1), 4) == []


@pytest.mark.parametrize(
    "x_width, y_width, shift, expected",
    [
        (3, 3, 1, "x rows are runs of 3 consecutive dataset tokens, not context_length=4"),
        (4, 4, 2, "y rows start 2 token(s) after their x row, not 1"),
        (4, 5, 0, "y rows start 0 token(s) after their x row"),
        (4, 3, 1, "y rows are runs of 3 consecutive dataset tokens, not context_length=4"),
        (0, 4, 1, "x rows are empty"),
    ],
)
def test_wrong_windows_name_the_row_property(x_width, y_width, shift, expected):
    starts = [0, 5, 10]
    lines = measure.window_lines(DATA, rows(starts, x_width), rows(starts, y_width, shift), 4)
    assert any(expected in line for line in lines), lines


def test_windows_starting_too_late_are_named():
    lines = measure.window_lines(DATA, rows([16], 4), rows([16], 3, 1), 4)
    assert "start as late as 16, past the last valid start 15" in lines[0]


def test_rows_that_are_not_runs_of_the_dataset_get_no_line():
    shuffled = torch.tensor([[10, 12, 11, 13]])
    assert measure.window_lines(DATA, shuffled, shuffled + 1, 4) == []


def test_get_batch_raising_only_on_one_window_is_located():
    def no_zero_start(dataset, batch_size, context_length, device):
        starts = torch.randint(1, len(dataset) - context_length, (batch_size,))
        windows = torch.stack(
            [torch.as_tensor(dataset[s : s + context_length + 1]) for s in starts]
        )
        return windows[:, :-1], windows[:, 1:]

    inputs, expected = layer_case("get_batch", "one_window")
    adapters = with_adapter("run_get_batch", no_zero_start)
    line = get_batch_raised(adapters, inputs, expected)[0]
    assert "raised on 5 tokens with context_length=4 (valid window starts 0 .. 0)" in line


def test_get_batch_raising_with_wrong_rows_names_them_from_a_longer_dataset():
    def window_too_long(dataset, batch_size, context_length, device):
        x, y = reference.run_get_batch(dataset[:-1], batch_size, context_length + 1, device)
        return x, y

    inputs, expected = layer_case("get_batch", "one_window")
    adapters = with_adapter("run_get_batch", window_too_long)
    line = get_batch_raised(adapters, inputs, expected)[0]
    assert "x rows are runs of 5 consecutive dataset tokens, not context_length=4" in line


@pytest.mark.parametrize("fails", ["always", "never"])
def test_get_batch_probe_is_silent_without_evidence(fails):
    def always_raises(*args):
        raise RuntimeError("no")

    inputs, expected = layer_case("get_batch", "one_window")
    adapters = with_adapter("run_get_batch", always_raises) if fails == "always" else reference
    assert get_batch_raised(adapters, inputs, expected) == []


def test_schedule_raising_names_the_iteration_and_phase():
    def divides_by_warmup(it, max_lr, min_lr, warmup, cycle):
        if it <= warmup:
            return it / warmup * max_lr
        return reference.run_get_lr_cosine_schedule(it, max_lr, min_lr, warmup, cycle)

    case = CASES["cosine_schedule", "no_warmup"]
    inputs, outputs, expected = public_run(case)
    adapters = with_adapter("run_get_lr_cosine_schedule", divides_by_warmup)
    line = schedule_raised(adapters, inputs, expected)[0]
    assert line.startswith("your schedule raised ZeroDivisionError at it=0")
    assert "cosine (0 <= it <= 10): 1 rates off, first at it=0" in line
    assert schedule_raised(reference, inputs, expected) == []

    def unwritten(*args):
        raise ValueError("raises at every iteration")

    adapters = with_adapter("run_get_lr_cosine_schedule", unwritten)
    assert schedule_raised(adapters, inputs, expected) == []


def test_clipping_raising_only_when_it_scales_is_located():
    def scales_with_a_float(parameters, max_l2_norm):
        grads = [p.grad for p in parameters]
        norm = float(torch.sqrt(sum(g.pow(2).sum() for g in grads)))
        if norm > max_l2_norm:
            for g in grads:
                g.mul_((max_l2_norm / norm).to(g.dtype))  # a float has no .to

    assert "the error is in the scaling step" in clipping_raised(scales_with_a_float)[0]
    assert clipping_raised(reference.run_gradient_clipping) == []

    def always_raises(parameters, max_l2_norm):
        raise RuntimeError("no")

    assert clipping_raised(always_raises) == []


def test_clipping_lines_name_a_growing_or_unscaled_clip_and_stay_silent_when_right():
    grads = [torch.tensor([3.0, 0.0]), torch.tensor([4.0])]  # global norm 5
    right = [g * 1.0 / (5 + 1e-6) for g in grads]
    assert measure.clipping_lines(grads, right, 1.0) == []
    assert measure.clipping_lines(grads, grads, 5.0) == []
    inverse = [g * (5 + 1e-6) / 1.0 for g in grads]
    assert "yours is its inverse" in measure.clipping_lines(grads, inverse, 1.0)[0]
    assert "were not scaled" in measure.clipping_lines(grads, grads, 1.0)[0]
    zero = [torch.zeros(2), torch.tensor([4.0])]
    assert measure.clipping_lines(zero, [torch.zeros(2), torch.tensor([1.0])], 1.0) == []


def test_a_raised_case_gets_the_note_and_keeps_its_exception():
    with pytest.raises(ValueError) as raised, diagnosed_if_raised(lambda: ["measured"]):
        raise ValueError("student code")
    assert raised.value.__notes__ == ["  diagnosis: measured"]
    with pytest.raises(ValueError) as raised, diagnosed_if_raised(lambda: 1 / 0):
        raise ValueError("student code")
    assert not hasattr(raised.value, "__notes__")
    with pytest.raises(NotImplementedError) as raised, diagnosed_if_raised(lambda: ["x"]):
        raise NotImplementedError
    assert not hasattr(raised.value, "__notes__")


def test_windows_from_numpy_rng_get_no_line():
    dataset = np.arange(50, 90)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(dataset) - 7, size=16)
    x = torch.as_tensor(np.stack([dataset[s : s + 7] for s in starts]))
    y = torch.as_tensor(np.stack([dataset[s + 1 : s + 8] for s in starts]))
    assert measure.window_lines(torch.as_tensor(dataset), x, y, 7) == []


@pytest.mark.parametrize("name", ["basic", "heads"])
def test_rope_names_the_positions_it_rotated_for(name):
    inputs, expected = layer_case("rope", name)
    x, d = inputs["x"], inputs["x"].shape[-1]
    by_index = torch.arange(x.shape[-2]).expand(inputs["positions"].shape)
    out = reference.run_rope(d, inputs["theta"], inputs["max_seq_len"], x, by_index)
    line = measure.rope_positions(inputs, {"out": out}, expected)[0]
    assert "positions [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]" in line
    assert "the index in the sequence, not token_positions" in line
    odd = torch.tensor([1.0, -1.0]).repeat(d // 2)  # conjugating rotates the other way
    out = reference.run_rope(
        d, inputs["theta"], inputs["max_seq_len"], x * odd, inputs["positions"]
    )
    assert "sign is flipped" in measure.rope_positions(inputs, {"out": out * odd}, expected)[0]


def test_rope_without_one_position_per_token_gets_no_line():
    inputs, expected = layer_case("rope", "basic")
    x = inputs["x"]
    halves = torch.cat([x[..., 32:], x[..., :32]], dim=-1)  # not a rotation of each pair
    assert measure.rope_positions(inputs, {"out": halves}, expected) == []
    assert measure.rope_positions(inputs, {"out": x[..., :-2]}, expected) == []


def test_rmsnorm_names_the_axis_it_normalized_over():
    inputs, expected = layer_case("rmsnorm", "basic")
    x, weight = inputs["x"].double(), inputs["weight"].double()
    over_batch = x / x.pow(2).mean(0, keepdim=True).add(1e-5).sqrt() * weight
    line = measure.rmsnorm_axis(inputs, {"out": over_batch}, expected)[0]
    assert "and 1 over axis 0: normalize over the last axis" in line
    summed = x / x.pow(2).sum(-1, keepdim=True).sqrt() * weight
    line = measure.rmsnorm_axis(inputs, {"out": summed}, expected)[0]
    assert "yours has 0.125 to 0.125" in line and "axis 0" not in line
    small_weight = inputs | {"weight": weight * 0.01}
    assert measure.rmsnorm_axis(small_weight, {"out": summed}, expected) == []


def test_silu_ratio_is_silent_on_silu_and_names_other_ratios():
    inputs, expected = layer_case("silu", "basic")
    x = inputs["x"]
    assert measure.silu_ratio(inputs, {"out": reference.run_silu(x)}, expected) == []
    assert measure.silu_ratio(inputs, {"out": x * torch.sigmoid(x)}, expected) == []
    line = measure.silu_ratio(inputs, {"out": x / (1 + torch.exp(x))}, expected)[0]
    assert line.startswith("silu(x) / x must be sigmoid(x)") and "yours falls" in line
    line = measure.silu_ratio(inputs, {"out": x.clone()}, expected)[0]
    assert "yours is 1 at x=" in line
    line = measure.silu_ratio(inputs, {"out": x * torch.sigmoid(x) * 1.1}, expected)[0]
    assert "yours is" in line
    narrow = inputs | {"x": x.clamp(-0.5, 0.5)}
    assert measure.silu_ratio(narrow, {"out": narrow["x"].clone()}, expected) == []


def test_softmax_rows_is_silent_on_softmax_and_names_the_broken_property():
    inputs, expected = layer_case("softmax", "basic")
    x, dim = inputs["x"], inputs["dim"]
    assert measure.softmax_rows(inputs, {"out": torch.softmax(x, dim)}, expected) == []
    exps = torch.exp(x - x.amax(dim, keepdim=True))
    line = measure.softmax_rows(inputs, {"out": exps}, expected)[0]
    assert line.startswith(f"softmax along dim={dim} must sum to 1 along it")
    assert "divide each exp by the sum of the exps" in line
    other = 0 if dim % x.dim() != 0 else 1
    line = measure.softmax_rows(inputs, {"out": torch.softmax(x, other)}, expected)[0]
    assert f"and 1 along dim {other}: normalize along the dim given" in line
    flipped = torch.softmax(-x, dim)
    line = measure.softmax_rows(inputs, {"out": flipped}, expected)[0]
    assert "largest x must get its largest probability" in line
    assert measure.softmax_rows(inputs, {"out": flipped[..., :1]}, expected) == []


def test_rmsnorm_that_raises_on_batches_only_is_located():
    inputs, expected = layer_case("rmsnorm", "basic")

    def without_keepdim(d_model, eps, weight, x):
        return x / x.pow(2).mean(-1).add(eps).sqrt() * weight

    adapters = with_adapter("run_rmsnorm", without_keepdim)
    line = rmsnorm_raised(adapters, inputs, expected)[0]
    assert line.startswith("your RMSNorm is right on one row alone")

    def unnormalized(d_model, eps, weight, x):
        if x.dim() > 1:
            raise RuntimeError("no")
        return x * weight

    adapters = with_adapter("run_rmsnorm", unnormalized)
    assert rmsnorm_raised(adapters, inputs, expected) == []


def test_an_output_lacking_axes_is_named_by_the_axes_it_lacks():
    hint = snapshots.missing_axes_hint((64,), (4, 12, 64))
    assert hint.startswith("your output lacks axis 0, 1 (size 4, 12) of the expected shape")
    assert snapshots.missing_axes_hint((4, 64), (4, 12, 64)).startswith("your output lacks axis 1")
    assert snapshots.missing_axes_hint((4, 12, 64), (4, 12, 64)) == ""
    assert snapshots.missing_axes_hint((12, 4), (4, 12, 64)) == ""
    assert snapshots.missing_axes_hint((4, 12, 64, 1), (4, 12, 64)) == ""


def test_cross_entropy_closed_forms_are_silent_on_the_reference_and_name_the_probe_off():
    assert closed_form_lines(reference, 5, 8) == []
    ignoring_target = with_adapter(
        "run_cross_entropy", lambda logits, targets: logits.logsumexp(-1).mean()
    )
    line = closed_form_lines(ignoring_target, 5, 8)[0]
    assert line.startswith(
        "with the target's logit 10 above the others (8 rows, 5 classes) your loss"
    )
    doubled = with_adapter(
        "run_cross_entropy",
        lambda logits, targets: 2 * reference.run_cross_entropy(logits, targets),
    )
    line = closed_form_lines(doubled, 5, 8)[0]
    assert line.startswith("with uniform logits (all 0) (8 rows, 5 classes) your loss is 3.21888")


def test_cross_entropy_that_raises_is_probed_on_uniform_logits():
    inputs, expected = layer_case("cross_entropy", "basic")
    raised = cross_entropy_raised
    assert raised(reference, inputs, expected) == []

    def row_broadcast(logits, targets):
        top = logits.amax(-1)
        return reference.run_cross_entropy(logits - top, targets)

    line = raised(with_adapter("run_cross_entropy", row_broadcast), inputs, expected)[0]
    assert line.startswith("on uniform logits your cross_entropy is right on one row but raised")

    def summed_over_rows(logits, targets):
        lse = logits.exp().sum(-2, keepdim=True).log()
        return (lse - logits.gather(-1, targets.unsqueeze(-1))).mean()

    line = raised(with_adapter("run_cross_entropy", summed_over_rows), inputs, expected)[0]
    vocab = inputs["logits"].shape[-1]
    assert f"over {vocab} classes, one row, your loss is 0, not log({vocab})" in line

    def flat_only(logits, targets):
        if logits.dim() > 2:
            raise RuntimeError("no")
        return reference.run_cross_entropy(logits, targets)

    line = raised(with_adapter("run_cross_entropy", flat_only), inputs, expected)[0]
    assert "right on 8 rows but raised on leading dims (2, 3)" in line


def test_a_loss_cut_off_from_the_logits_is_named():
    inputs, expected = layer_case("cross_entropy", "gradient")

    def detached(logits, targets):
        return reference.run_cross_entropy(logits.detach(), targets)

    line = cross_entropy_raised(with_adapter("run_cross_entropy", detached), inputs, expected)[0]
    assert line.startswith("your loss does not require grad although the logits do")
    assert cross_entropy_raised(reference, inputs, expected) == []
    # The case's own call raises in backward() on the detached loss: this line explains it.
    with pytest.raises(RuntimeError, match="does not require grad"):
        CASES["cross_entropy", "gradient"].call(with_adapter("run_cross_entropy", detached), inputs)


def test_adamw_raising_in_scalar_arithmetic_is_located_at_its_step():
    inputs, expected = layer_case("adamw", "formula")
    assert adamw_raised(reference, inputs, expected) == []
    adamw = reference.get_adamw_cls()

    class CorrectionFromZero(adamw):
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    t = self.state[p].get("t", 0)
                    math.sqrt(1 - group["betas"][1] ** t - 1e-12)  # t counted from 0: negative
                    self.state[p]["t"] = t + 1
            return super().step(closure)

    adapters = with_adapter("get_adamw_cls", lambda: CorrectionFromZero)
    line = adamw_raised(adapters, inputs, expected)[0]
    assert line.startswith("your AdamW raised ValueError in float arithmetic at step t=1")

    class ShapeError(adamw):
        def step(self, closure=None):
            raise RuntimeError("size mismatch")

    adapters = with_adapter("get_adamw_cls", lambda: ShapeError)
    assert adamw_raised(adapters, inputs, expected) == []


def test_linear_that_raises_is_probed_with_a_square_weight():
    inputs, expected = layer_case("linear", "basic")
    square = with_adapter("run_linear", lambda d_in, d_out, weight, x: x @ weight)
    line = linear_raised(square, inputs, expected)[0]
    assert line.startswith("with a square weight your linear returns x @ W, not x @ W.T")

    def mixed_sizes(d_in, d_out, weight, x):
        return x @ weight.T.reshape(d_in, d_out)

    line = linear_raised(with_adapter("run_linear", mixed_sizes), inputs, expected)[0]
    assert "runs with a square weight" in line
    assert linear_raised(reference, inputs, expected)[0].startswith("your linear runs")

    def doubled(d_in, d_out, weight, x):
        return 2 * x @ weight.T

    assert linear_raised(with_adapter("run_linear", doubled), inputs, expected) == []


def column_lookup(vocab_size, d_model, weight, ids):
    """Columns of the table, raising where the adapters' type check would (the output's last
    axis is not d_model)."""
    out = weight.T[ids % d_model]
    if out.shape[-1] != d_model:
        raise TypeError(f"output shape {tuple(out.shape)}")
    return out


def test_embedding_that_raises_is_probed_with_a_square_table():
    inputs, expected = layer_case("embedding", "basic")
    line = embedding_raised(with_adapter("run_embedding", column_lookup), inputs, expected)[0]
    assert line.startswith("with a square table your embedding returns column i of the table")
    assert "weight[token_ids]" in line
    assert embedding_raised(reference, inputs, expected)[0].startswith("your embedding runs")

    def doubled(vocab_size, d_model, weight, ids):
        return 2 * weight[ids]

    def raises_always(vocab_size, d_model, weight, ids):
        raise RuntimeError("no")

    for wrong in (doubled, raises_always):
        assert embedding_raised(with_adapter("run_embedding", wrong), inputs, expected) == []


def test_softmax_that_raises_on_batches_only_is_located():
    inputs, expected = layer_case("softmax", "basic")

    def without_keepdim(x, dim):
        shifted = x - x.amax(dim=dim)
        return torch.exp(shifted) / torch.exp(shifted).sum(dim=dim)

    line = softmax_raised(with_adapter("run_softmax", without_keepdim), inputs, expected)
    assert "right on one row alone (a 1-D tensor) but raised on shape" in line[0]
    assert "max and sum must broadcast back" in line[0]

    def never_runs(x, dim):
        raise RuntimeError("no")

    assert softmax_raised(with_adapter("run_softmax", never_runs), inputs, expected) == []


def test_bpe_vocab_structure_names_missing_specials_and_the_merge_count():
    inputs, expected = layer_case("train_bpe", "handout_example")
    outputs = normalize(CASES["train_bpe", "handout_example"].call(reference, inputs))
    assert measure.bpe_vocab_structure(inputs, outputs, expected) == []
    special = b"<|endoftext|>".hex()
    without_special = outputs | {"vocab": [t for t in outputs["vocab"] if t != special]}
    line = measure.bpe_vocab_structure(inputs, without_special, expected)[0]
    assert "lacks the special token(s) ['<|endoftext|>']" in line
    extra = outputs | {
        "vocab": [*outputs["vocab"], "6e6e"],
        "merges": [*outputs["merges"], ["6e", "6e"]],
    }
    line = measure.bpe_vocab_structure(inputs, extra, expected)[0]
    assert (
        "264 entries from 7 merges; vocab_size=263 holds 256 bytes + 1 special token(s) + 6" in line
    )
    ran_out = expected | {"vocab": dict(list(expected["vocab"].items())[:-1])}
    assert measure.bpe_vocab_structure(inputs, extra, ran_out) == []


def test_a_raising_lm_is_located_in_its_stages_or_in_how_it_joins_them():
    lm = RAISED_DIAGNOSES["transformer_lm"]
    line = lm(reference, {}, {})[0]
    assert line.startswith("embedding, each layer, final norm and LM head are each right alone")

    def doubled_norm(*args):
        return reference.run_rmsnorm(*args) * 2

    line = lm(with_adapter("run_rmsnorm", doubled_norm), {}, {})[0]
    assert line.startswith("the first stage whose output leaves the reference's is")

    def unwritten(*args):
        raise NotImplementedError

    assert lm(with_adapter("run_transformer_block", unwritten), {}, {}) == []


def test_the_handout_steps_are_the_counts_a_naive_count_gives():
    """tests/test_train_bpe.py's hand-worked table, checked by counting pairs naively."""
    from collections import Counter

    from course.cases.truths.tokenizers import merge_word
    from tests.test_train_bpe import HANDOUT_STEPS

    words = {("l", "o", "w"): 5, ("l", "o", "w", "e", "r"): 2}
    words |= {tuple("widest"): 3, tuple("newest"): 6}
    for merge, counts in HANDOUT_STEPS:
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[" ".join(pair)] += count
        assert dict(pairs) == counts
        top = max(pairs.values())
        assert max(tuple(p.split(" ")) for p, c in pairs.items() if c == top) == merge
        words = {merge_word(word, merge): count for word, count in words.items()}


def test_handout_merge_counts_name_a_tie_and_a_count():
    from tests.test_train_bpe import HANDOUT_STEPS, handout_merge_counts

    right = [(a.encode(), b.encode()) for (a, b), _ in HANDOUT_STEPS]
    assert handout_merge_counts(right) == ""
    tie = [(b"e", b"s"), *right[1:]]
    assert "merge #0 differs" in handout_merge_counts(tie)
    assert "9 times and your ('e', 's') 9 times: a tie" in handout_merge_counts(tie)
    fewer = [*right[:2], (b"w", b"e"), *right[3:]]
    assert "('o', 'w') occurs 7 times and your ('w', 'e') 2 times: merge the most" in (
        handout_merge_counts(fewer)
    )
    assert handout_merge_counts("not merges") == ""


def test_sampling_frequencies_are_read_as_the_temperature_they_fit():
    logits = torch.tensor([0.0, 1.0, 2.0, -1.0])
    for temperature in (0.5, 2.0):
        counts = 4000 * torch.softmax(logits.double() / temperature, 0)
        hint = implied_temperature(logits, counts, 1.0)
        assert f"fit a temperature of about {temperature:.3g}, not 1:" in hint
    reversed_counts = 4000 * torch.softmax(-logits.double(), 0)
    assert implied_temperature(logits, reversed_counts, 1.0).startswith(
        "larger logits must be drawn"
    )
    one = torch.tensor([0.0, 0.0, 4000.0, 0.0], dtype=torch.float64)
    assert implied_temperature(logits, one, 1.0) == "only token(s) [2] were drawn"


def test_weights_beyond_the_cut_are_read_as_a_wrong_spread_or_a_wrong_cut():
    torch.manual_seed(0)
    std = 0.03
    wrong_spread = torch.nn.init.trunc_normal_(
        torch.empty(10**6), std=2 * std, a=-6 * std, b=6 * std
    )
    hint = beyond_the_cut(wrong_spread, std, std_hint="SPREAD", cut_hint="CUT")
    assert hint.startswith("they are cut at ±3 of their own σ")
    assert hint.endswith("not 0.03: SPREAD")
    uncut = torch.nn.init.trunc_normal_(torch.empty(10**6), std=std, a=-3.0, b=3.0)
    hint = beyond_the_cut(uncut, std, std_hint="SPREAD", cut_hint="CUT")
    assert hint.startswith("they reach ±4") and hint.endswith("CUT")


def test_merges_that_agree_as_far_as_both_go_are_read_as_too_few_or_too_many():
    assert exhaustion_line(2, 3).startswith("your trainer stopped after 2 merges; 3 are possible")
    assert exhaustion_line(4, 3).startswith("your trainer made 4 merges where only 3 are possible")


def floor_never_reached(it, max_lr, min_lr, warmup, cycle):
    """The cosine run on past the cycle instead of holding the floor."""
    if it < warmup:
        return it / warmup * max_lr
    return min_lr + (1 + math.cos(math.pi * (it - warmup) / (cycle - warmup))) / 2 * (
        max_lr - min_lr
    )


def test_the_schedules_advice_tests_name_the_phase_of_an_unlisted_mistake(monkeypatch):
    from tests import test_schedule

    monkeypatch.setattr(test_schedule, "run_get_lr_cosine_schedule", floor_never_reached)
    with pytest.raises(
        AssertionError, match=r"after the cycle \(it > 21\): 3 rates off, first at it=22"
    ):
        test_schedule.test_cosine_schedule_handout_values()

    def warm_up_without_zero(it, max_lr, min_lr, warmup, cycle):
        if warmup == 0 and it == 0:
            return min_lr
        return reference.run_get_lr_cosine_schedule(it, max_lr, min_lr, warmup, cycle)

    monkeypatch.setattr(test_schedule, "run_get_lr_cosine_schedule", warm_up_without_zero)
    with pytest.raises(
        AssertionError, match=r"cosine \(0 <= it <= 10\): 1 rates off, first at it=0"
    ):
        test_schedule.test_cosine_schedule_without_warmup_starts_at_max()


def test_the_loss_advice_tests_measure_an_unlisted_mistake(monkeypatch):
    from tests import test_losses

    def summed_over_the_batch(logits, targets):
        per_row = torch.logsumexp(logits, -1) - logits.gather(-1, targets[..., None])[..., 0]
        return per_row.mean(-1).sum() if per_row.dim() > 1 else per_row.mean()

    monkeypatch.setattr(test_losses, "run_cross_entropy", summed_over_the_batch)
    monkeypatch.setattr(test_losses.lazy_adapters, "run_cross_entropy", summed_over_the_batch)
    with pytest.raises(AssertionError, match=r"diagnosis: repeating the batch \(axis 0\) changes"):
        test_losses.test_cross_entropy_mean_over_leading_dims()
    test_losses.test_cross_entropy_naive_formula()  # one leading axis: right there


def clip_in_two_passes(parameters, max_l2_norm):
    """Iterates ``parameters`` twice: given a one-shot iterator, the second pass sees nothing."""
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.sqrt(sum(g.pow(2).sum() for g in grads)) if grads else torch.tensor(0.0)
    if norm > max_l2_norm:
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(max_l2_norm / (norm + 1e-6))


def test_the_clipping_advice_tests_measure_an_unlisted_mistake(monkeypatch):
    from tests import test_gradient_clipping

    monkeypatch.setattr(test_gradient_clipping, "run_gradient_clipping", clip_in_two_passes)
    test_gradient_clipping.test_gradient_clipping_matches_torch_when_norm_is_large()  # a list
    with pytest.raises(
        AssertionError, match=r"diagnosis: the global norm .* but your gradients were not scaled"
    ):
        test_gradient_clipping.test_gradient_clipping_uses_one_global_norm_and_skips_missing_grads()


def rmsnorm_in(dtype):
    """An RMSNorm computing in ``dtype`` (None: the input's own)."""

    def rmsnorm(x, gain):
        wide = x.to(dtype or x.dtype)
        out = wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + 1e-5) * gain.to(wide.dtype)
        return out.to(x.dtype)

    return rmsnorm


def test_an_rmsnorm_computed_in_the_inputs_dtype_is_named():
    torch.manual_seed(0)
    gain = (1 + 0.1 * torch.randn(16)).half()
    x = (300 * torch.randn(3, 16)).half()
    in_input_dtype = rmsnorm_in(None)
    line = measure.float32_line(in_input_dtype, x, gain, in_input_dtype(x, gain))[0]
    assert line.startswith(
        "your RMSNorm is right on these inputs in float32 but not in torch.float16"
    )
    assert "x**2 overflows past |x| = 256" in line
    right = rmsnorm_in(torch.float32)
    assert measure.float32_line(right, x, gain, right(x, gain)) == []


def test_an_rmsnorm_wrong_in_float32_too_gets_no_precision_line():
    torch.manual_seed(0)
    gain, x = torch.ones(16).half(), (300 * torch.randn(3, 16)).half()

    def without_sqrt(x, gain):
        wide = x.float()
        return (wide / (wide.square().mean(-1, keepdim=True) + 1e-5) * gain.float()).to(x.dtype)

    assert measure.float32_line(without_sqrt, x, gain, without_sqrt(x, gain)) == []


def drawn(probabilities: torch.Tensor, keep: int, draws: int, seed: int) -> torch.Tensor:
    """Counts of ``draws`` samples from the ``keep`` most likely tokens, renormalised."""
    kept = torch.zeros_like(probabilities)
    top = probabilities.topk(keep).indices
    kept[top] = probabilities[top]
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.multinomial(kept / kept.sum(), draws, replacement=True, generator=generator)
    return torch.bincount(tokens, minlength=len(probabilities)).double()


def test_tokens_outside_the_nucleus_are_read_as_a_temperature_or_a_cut():
    logits = torch.linspace(3.0, -3.0, 40, dtype=torch.float64)
    # Logits multiplied by T = 0.7 instead of divided: a flatter distribution, more tokens kept.
    multiplied = drawn(torch.softmax(logits * 0.7, 0), 12, 1500, seed=0)
    line = outside_nucleus_line(logits, multiplied, 0.7)
    assert line.startswith("your frequencies fit a temperature of about 1.")
    assert line.endswith("not 0.7: sample from softmax(logits / T)")
    # The right temperature, but three tokens too many in the nucleus.
    too_wide = drawn(torch.softmax(logits / 0.7, 0), 8, 1500, seed=0)
    line = outside_nucleus_line(logits, too_wide, 0.7)
    assert line.startswith("your frequencies fit the temperature 0.7 (about 0.")
    assert "the nucleus holds too many tokens" in line
    one = torch.zeros(40, dtype=torch.float64)
    one[0] = 1500
    assert outside_nucleus_line(logits, one, 0.7) == ""


def test_nan_only_at_large_inputs_is_read_as_an_overflowing_exp():
    x = torch.tensor([-1e4, -80.0, -1.0, 0.0, 1.0, 80.0, 1e4])
    assert measure.not_finite_line(x, torch.nn.functional.silu(x)) == []
    overflowing = x * torch.exp(x) / (1 + torch.exp(x))  # e^x / (1 + e^x): inf / inf past 88
    (line,) = measure.not_finite_line(x, overflowing)
    assert line.startswith("your output is NaN or inf at x = 10000, only where |x| is large")
    small = torch.where(x == 0, torch.tensor(float("nan")), x)
    (line,) = measure.not_finite_line(x, small)
    assert line == "your output is NaN or inf at x = 0"
    assert measure.not_finite_line(x, torch.zeros(3)) == []  # another shape: nothing read


def test_a_result_in_another_float_dtype_is_told_to_cast_back():
    from tests.hints import dtype_kept

    assert dtype_kept(torch.zeros(2), torch.float32) == ""
    message = dtype_kept(torch.zeros(2, dtype=torch.float64), torch.float32)
    assert message.startswith("the output is torch.float64 for torch.float32 inputs")
    assert "hint: computing in torch.float64 may be right, but return the input's dtype" in message
    assert "hint" not in dtype_kept(torch.zeros(2, dtype=torch.long), torch.float32)


def test_one_window_for_a_whole_batch_and_one_token_targets_are_named():
    same = rows([3] * 8, 4)  # 16 valid starts: 7 rows equal to the first by chance is 16^-7
    (line,) = measure.window_lines(DATA, same, rows([3] * 8, 4, 1), 4)
    assert line.startswith("every row of a batch is the same window (8 rows")
    stacked = torch.stack([rows([3, 3], 4), rows([7, 7], 4)])  # two batches of two
    assert measure.window_lines(DATA, stacked, stacked + 1, 4) == []  # 2 equal rows: chance
    one_start = DATA[:5]  # context_length 4: a single valid window, so every row is that one
    same = torch.stack([one_start[:4]] * 8)
    assert measure.window_lines(one_start, same, same + 1, 4) == []
    starts = [0, 5, 15]
    y_last = DATA[torch.tensor(starts) + 4]
    (line,) = measure.window_lines(DATA, rows(starts, 4), y_last, 4)
    assert line.startswith("y holds one token per row, the one after the x row")
    assert measure.window_lines(DATA, rows(starts, 4), DATA[torch.tensor(starts) + 2], 4) == []


def swiglu_gated_after_w2(d_model, d_ff, w1, w2, w3, x):
    silu = torch.nn.functional.silu
    return torch.nn.functional.linear(silu(x @ w1.T), w2) * (x @ w3.T)


def swiglu_w2_transposed(d_model, d_ff, w1, w2, w3, x):
    """W2 built Linear(d_model, d_ff): its weight must be (d_ff, d_model), which loading refuses
    unless the two are equal."""
    if w2.shape != (d_ff, d_model):
        raise RuntimeError("Error(s) in loading state_dict for SwiGLU")
    return reference.run_swiglu(d_model, d_ff, w1, w2, w3, x)


def test_a_swiglu_that_raises_is_probed_with_square_weights():
    from tests.localize.composites import swiglu_raised

    inputs, expected = layer_case("swiglu", "basic")
    (line,) = swiglu_raised(with_adapter("run_swiglu", swiglu_gated_after_w2), inputs, expected)
    assert line.startswith("with d_ff = d_model = 64 your SwiGLU runs and returns W2(SiLU(W1 x))")
    (line,) = swiglu_raised(with_adapter("run_swiglu", swiglu_w2_transposed), inputs, expected)
    assert line.startswith("your SwiGLU runs with d_ff = d_model = 64 but raised with d_ff=128")

    def doubled(d_model, d_ff, w1, w2, w3, x):
        return 2 * reference.run_swiglu(d_model, d_ff, w1, w2, w3, x)

    assert swiglu_raised(with_adapter("run_swiglu", doubled), inputs, expected) == []
    assert swiglu_raised(with_adapter("run_swiglu", always_raises), inputs, expected) == []


def always_raises(*args, **kwargs):
    raise RuntimeError("no")


def test_an_output_with_its_leading_axes_flattened_is_named():
    expected = np.arange(4 * 12 * 8, dtype=np.float64).reshape(4, 12, 8)
    (line,) = snapshots.axes_hints(expected.reshape(48, 8), expected, 1e-6)
    assert line.startswith("your output holds the expected values, shaped (48, 8) instead of")
    assert snapshots.merged_axes_hint(expected.reshape(48, 8) + 1, expected, 1e-6) == ""
    assert snapshots.merged_axes_hint(expected, expected, 1e-6) == ""
    assert snapshots.merged_axes_hint(expected[:2].reshape(24, 8), expected, 1e-6) == ""


def rotated(x: torch.Tensor, positions: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """Each pair (x[2k], x[2k+1]) turned by position * frequencies[k]."""
    angle = positions.double()[..., None] * frequencies
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x.double()[..., 0::2], x.double()[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2).float()


def test_rope_frequencies_are_read_at_position_one():
    inputs, expected = layer_case("rope", "basic")
    x, theta = inputs["x"], inputs["theta"]
    exponents = torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1]
    right = rotated(x, inputs["positions"], theta**-exponents)
    assert measure.rope_frequencies(inputs, {"out": right}, expected) == []
    rising = rotated(x, inputs["positions"], theta**exponents)
    (line,) = measure.rope_frequencies(inputs, {"out": rising}, expected)
    assert line.startswith("at position 1 pair 1 of your RoPE turns by 1.334 rad, not")
    assert "the inverse, theta^(+2k/d_k)" in line
    doubled = rotated(x, inputs["positions"], 2 * theta**-exponents)
    (line,) = measure.rope_frequencies(inputs, {"out": doubled}, expected)
    assert (
        line.startswith("at position 1 pair 0 of your RoPE turns by 2 rad")
        and "inverse" not in line
    )
    halves = torch.cat([x[..., 32:], x[..., :32]], dim=-1)  # not a rotation of each pair
    assert measure.rope_frequencies(inputs, {"out": halves}, expected) == []


def test_rope_tables_in_a_state_dict_are_named_by_their_first_row():
    lm = reference.get_transformer_lm(32, 12, 32, 2, 2, 64, 1e4)
    weights = set(lm.state_dict())
    # The reference's tables are not persistent: nothing to say.
    assert measure.rope_table_lines(lm.state_dict(), weights, 12, 16) == []
    angles = torch.outer(torch.arange(12.0), 1e4 ** -(torch.arange(0, 16, 2) / 16))
    persistent = {
        "layers.0.attn.rope.cos": angles.cos(),  # (12, 8)
        "layers.0.attn.rope.sin": angles.sin().repeat_interleave(2, -1)[None, None],  # (1,1,12,16)
    }
    (line,) = measure.rope_table_lines(lm.state_dict() | persistent, weights, 12, 16)
    assert line.startswith(
        "your model's state dict holds layers.0.attn.rope.cos (12, 8), "
        "layers.0.attn.rope.sin (1, 1, 12, 16): RoPE's cos/sin tables"
    )
    assert line.endswith("register them with persistent=False")
    # Silent where the evidence does not hold: a handout name, another buffer of the same shape
    # (a table of other values, a causal mask), leading dims that are not 1, other sizes.
    assert measure.rope_table_lines(persistent, set(persistent), 12, 16) == []
    others = {
        "other": angles.cos() + 1,
        "mask": torch.ones(12, 12).tril(),
        "per_head": angles.cos().expand(2, 12, 8),
        "longer": torch.outer(torch.arange(13.0), torch.ones(8)).cos(),
        "flat": torch.ones(12),
    }
    assert measure.rope_table_lines(others, weights, 12, 16) == []


def test_softmax_along_several_dims_names_the_dims_it_is_wrong_along():
    inputs, expected = layer_case("softmax", "large_inputs")
    x = inputs["x"]

    def outputs(softmax):
        return {f"dim{d}": softmax(x, d) for d in inputs["dims"]}

    assert measure.softmax_outputs(inputs, outputs(torch.softmax), expected) == []

    def max_over_last(x, dim):
        exps = torch.exp(x - x.amax(-1, keepdim=True))
        return exps / exps.sum(dim, keepdim=True)

    (line,) = measure.softmax_outputs(inputs, outputs(max_over_last), expected)
    assert line.startswith("your softmax of these inputs (up to |x| = 1002) is right along dim")
    assert "right along dim [1, -1] but not along dim [0]: take the max" in line
    assert line.endswith("not along the last axis")

    def always_first(x, dim):
        return torch.softmax(x, 0)

    (line,) = measure.softmax_outputs(inputs, outputs(always_first), expected)
    assert "right along dim [0] but not along dim [1, -1]" in line
    assert "last axis" not in line


def test_softmax_overflowing_along_one_dim_says_so():
    inputs, expected = layer_case("softmax", "large_inputs")
    x = inputs["x"]

    def unshifted_along_0(x, dim):
        return torch.exp(x) / torch.exp(x).sum(0, keepdim=True) if dim == 0 else x.softmax(dim)

    outputs = {f"dim{d}": unshifted_along_0(x, d) for d in inputs["dims"]}
    (line,) = measure.softmax_outputs(inputs, outputs, expected)
    assert "but not along dim [0] (NaN or inf there: an exp overflowed)" in line
