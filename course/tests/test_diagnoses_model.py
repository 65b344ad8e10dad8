"""The diagnoses of the model's layers and of decoding (embedding init, RoPE, attention, the
block and LM, generation: tests/localize/, tests/measure.py, the advice tests): silent on
right answers and where their evidence does not hold, naming the property a wrong answer
breaks."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from course.tests.test_localize import SHIPPED, with_adapter
from tests import adapters as reference
from tests.cases import CASES
from tests.cases.public import public_inputs
from tests.localize import localize_raised, snapshot_located
from tests.localize.attention import (
    attention_weights,
    localize_sdpa,
    sdpa_raised,
    weights_not_softmax,
)
from tests.localize.composites import lm_build_lines, lm_raised
from tests.localize.decoding import (
    generate_raised,
    greedy_difference,
    sampling_raised,
    top_p_raised,
)
from tests.localize.multihead import attention_raised, attention_stages, default_positions_raised
from tests.localize.stages import first_stage_wrong
from tests.snapshots import SnapshotChecker
from tests.test_layers import check_truncated_normal

INIT_HINTS = dict(std_hint="std", cut_hint="cut")


def truncated_normal(mean: float, std: float) -> torch.Tensor:
    torch.manual_seed(0)
    weights = torch.empty(100_000)
    return torch.nn.init.trunc_normal_(weights, mean=mean, std=std, a=-3.0, b=3.0)


def test_a_centred_init_passes_the_init_check():
    check_truncated_normal(truncated_normal(0.0, 1.0), 1.0, "init", **INIT_HINTS)


def test_an_init_off_centre_names_the_mean():
    with pytest.raises(AssertionError) as failure:
        check_truncated_normal(truncated_normal(0.5, 1.0), 1.0, "init", **INIT_HINTS)
    assert "hint: the weights must be centred on 0" in str(failure.value)


def test_a_centred_init_of_the_wrong_spread_is_not_called_off_centre():
    with pytest.raises(AssertionError) as failure:
        check_truncated_normal(truncated_normal(0.0, 0.5), 1.0, "init", **INIT_HINTS)
    assert "centred" not in str(failure.value)


# --- attention: a raising layer located stage by stage ------------------------------------------


def rope_raising(error: type[Exception]):
    def rope(*args):
        raise error("no")

    return rope


def test_attention_stages_with_the_reference_adapters_are_all_right():
    for rope in (False, True):
        stages = attention_stages(reference, SHIPPED, rope)
        assert first_stage_wrong(stages) is None


def test_a_raising_stage_of_attention_is_named():
    adapters = with_adapter("run_rope", rope_raising(TypeError))
    (line,) = attention_raised(adapters, rope=True)
    assert line.startswith(
        "the first stage whose output leaves the reference's is RoPE on the qs of each head "
        "(run_rope) (it raised TypeError there)"
    )


def test_a_stage_not_written_yet_locates_nothing():
    adapters = with_adapter("run_rope", rope_raising(NotImplementedError))
    assert attention_raised(adapters, rope=True) == []


def test_attention_raising_with_every_stage_right_points_at_how_it_joins_them():
    (line,) = attention_raised(reference, rope=False)
    assert line.startswith("projections, attention and output projection are each right alone")
    assert "your multi-head attention raised" in line


def lm_with_persistent_rope_tables(**config):
    """The reference LM, its RoPE's cos table registered as a persistent buffer."""
    model = reference.get_transformer_lm(**config)
    rope = model.layers[0].attn.rope
    rope.register_buffer("cos", rope.cos, persistent=True)
    return model


def unwritten_lm(**config):
    raise NotImplementedError


def test_attention_with_rope_that_raised_names_rope_tables_in_the_state_dict():
    persistent = with_adapter("get_transformer_lm", lm_with_persistent_rope_tables)
    (line,) = attention_raised(persistent, rope=True)
    assert line.startswith("your model's state dict holds layers.0.attn.rope.cos (12, 8)")
    assert line.endswith("register them with persistent=False")
    # Without RoPE, or with an LM that is right or not written yet, the tables say nothing.
    for adapters, rope in [
        (persistent, False),
        (reference, True),
        (with_adapter("get_transformer_lm", unwritten_lm), True),
    ]:
        (line,) = attention_raised(adapters, rope=rope)
        assert "each right alone" in line and "state dict" not in line


def test_a_wrong_rope_stage_is_named_by_its_output():
    def rope_at_zero(d_k, theta, max_seq_len, x, positions):
        return reference.run_rope(d_k, theta, max_seq_len, x, torch.zeros_like(positions))

    adapters = with_adapter("run_rope", rope_at_zero)
    (line,) = attention_raised(adapters, rope=True)
    assert "is RoPE on the qs of each head (run_rope) (max abs error" in line


def test_attention_raising_is_located_through_the_public_case():
    inputs = public_inputs(CASES["multihead_self_attention", "rope_causal"], SHIPPED)
    adapters = with_adapter("run_rope", rope_raising(IndexError))
    (line,) = localize_raised("multihead_self_attention", adapters, inputs, {})
    assert "(run_rope) (it raised IndexError there)" in line


def test_default_positions_that_raise_are_named_only_when_given_positions_run():
    assert "raised without them" in default_positions_raised(lambda: None)[0]
    assert default_positions_raised(rope_raising(RuntimeError)) == []


# --- scaled dot-product attention ---------------------------------------------------------------


def attend(q, k, v, mask=None):
    return reference.run_scaled_dot_product_attention(q, k, v, mask)


def masking_raises(q, k, v, mask=None):
    if mask is not None:
        mask.masked_fill(1.0, mask)  # arguments swapped: a TypeError
    return attend(q, k, v)


def keys_for_queries(q, k, v, mask=None):
    return attend(k, q, v, mask)  # scores (keys, queries): raises unless they are as many


def values_for_weights(q, k, v, mask=None):
    weights = attend(q, k, torch.eye(k.shape[-2]).expand(*k.shape[:-1], -1), mask)
    return torch.einsum("...qk,...kd->...qd", v, weights)  # contracts d_v with the queries


def batch_dims_reversed(q, k, v, mask=None):
    scores = q @ k.permute(*reversed(range(k.dim())))  # as k.T: every axis reversed
    weights = torch.softmax(scores / q.shape[-1] ** 0.5, -1)
    return weights @ v


def always_raises(*args, **kwargs):
    raise RuntimeError("no")


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        (masking_raises, "but runs without the mask: look at the masking step"),
        (keys_for_queries, "but runs without a mask, on as many keys as queries"),
        (values_for_weights, "with queries, keys, d_k and d_v all of one size"),
        (batch_dims_reversed, "runs on one sequence alone, 2-D Q, K and V with no leading dims"),
    ],
)
def test_sdpa_raising_is_located_by_the_simplest_input_it_runs_on(wrong, named):
    q, k, v, mask = (SHIPPED.inputs[n] for n in ("q", "k", "v", "mask"))
    adapters = with_adapter("run_scaled_dot_product_attention", wrong)
    (line,) = sdpa_raised(adapters, q, k, v, mask)
    assert line.startswith("your attention raised on Q (4, 12, 8), K (4, 16, 8), V (4, 16, 24)")
    assert named in line


def test_sdpa_raising_on_every_input_locates_nothing():
    q, k, v, mask = (SHIPPED.inputs[n] for n in ("q", "k", "v", "mask"))
    adapters = with_adapter("run_scaled_dot_product_attention", always_raises)
    assert sdpa_raised(adapters, q, k, v, mask) == []
    case = CASES["scaled_dot_product_attention", "unmasked_extra_dims"]
    inputs = public_inputs(case, SHIPPED)
    adapters = with_adapter("run_scaled_dot_product_attention", masking_raises)
    assert localize_raised("scaled_dot_product_attention", adapters, inputs, {}) == []


def test_weights_that_are_no_softmax_of_the_scores_are_not_called_right():
    def scale_over_scores(q, k, v, mask=None):
        scores = math.sqrt(q.shape[-1]) / (q @ k.transpose(-1, -2))
        return torch.softmax(scores.masked_fill(~mask, -math.inf), -1) @ v

    q, k, mask = (SHIPPED.inputs[n] for n in ("q", "k", "mask"))
    inputs = {"q": q, "k": k, "mask": mask}
    wrong = with_adapter("run_scaled_dot_product_attention", scale_over_scores)
    (line,) = localize_sdpa(wrong, inputs)
    assert "yet differ from softmax(q.k / sqrt(d_k)) by up to" in line
    weights = attention_weights(reference, q, k, mask)
    assert weights_not_softmax(weights, q, k, mask) == ""
    # Right weights: the output's error lies after them (localize_sdpa runs when it is off).
    assert "weighted sum of the values differs" in localize_sdpa(reference, inputs)[0]


# --- a snapshot failure located only when clearly off ---------------------------------------------


def test_a_snapshot_failure_gets_the_diagnosis_only_when_clearly_off():
    q, k, v, mask = (SHIPPED.inputs[n] for n in ("q", "k", "v", "mask"))
    out = attend(q, k, v, mask)
    exact = SnapshotChecker(update=False, exact=True)
    name = "scaled_dot_product_attention"
    with pytest.raises(AssertionError) as near_miss:
        snapshot_located(exact, out + 1e-6, name, lambda: ["located"])
    assert not hasattr(near_miss.value, "__notes__")
    with pytest.raises(AssertionError) as off:
        snapshot_located(exact, out * 2, name, lambda: ["located"])
    assert off.value.__notes__ == ["  diagnosis: located"]
    snapshot_located(exact, out, name, lambda: ["located"])  # right: nothing raised


# --- decoding -------------------------------------------------------------------------------------

PROBABILITIES = torch.tensor([0.25, 0.125, 0.5, 0.125], dtype=torch.float64)


def test_top_p_raising_only_where_it_cuts_is_located():
    def cuts_with_a_bad_scatter(probabilities, top_p):
        if top_p == 1.0:
            return probabilities
        return torch.zeros_like(probabilities).scatter(probabilities.argsort(), -1, probabilities)

    (line,) = top_p_raised(cuts_with_a_bad_scatter)
    assert "runs with top_p=1 (every token kept) but raises with top_p=0.6" in line
    assert top_p_raised(reference.run_top_p_filter) == []
    assert top_p_raised(always_raises) == []


LOGITS = torch.tensor([0.0, 1.0, 2.0, -1.0])


def sample_dividing_by_zero(logits, temperature, top_p, generator=None):
    probabilities = torch.softmax(logits.double() / temperature, -1)
    return int(torch.multinomial(probabilities, 1, generator=generator))


def sample_drawing_two(logits, temperature, top_p, generator=None):
    probabilities = reference.run_softmax(logits.double() / max(temperature, 1e-4), -1)
    return int(torch.multinomial(probabilities, 2, generator=generator))


def test_sampling_raising_at_temperature_zero_only_is_named():
    adapters = (reference.run_softmax, reference.run_top_p_filter, LOGITS)
    (line,) = sampling_raised(sample_dividing_by_zero, *adapters)
    assert "runs at temperature 1e-4 but raises at temperature 0" in line
    (line,) = sampling_raised(sample_drawing_two, *adapters)
    assert "your softmax and top_p_filter run alone on these logits" in line


def test_sampling_probes_are_silent_without_evidence():
    adapters = (reference.run_softmax, reference.run_top_p_filter, LOGITS)
    assert sampling_raised(reference.run_sample_next_token, *adapters) == []
    broken = (reference.run_softmax, always_raises, LOGITS)
    assert sampling_raised(sample_drawing_two, *broken) == []


PROMPT = [11, 7, 300, 42]


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    config = SHIPPED.config
    keys = ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff")
    return reference.get_transformer_lm(
        *(config[k] for k in keys), config["rope_theta"], SHIPPED.state_dict
    )


def test_generate_raising_with_a_working_model_and_sampler_points_at_its_loop(model):
    (line,) = generate_raised(reference.run_sample_next_token, model, PROMPT)
    assert "the error is in generate's own loop" in line
    assert generate_raised(always_raises, model, [11, 7]) == []
    assert generate_raised(reference.run_sample_next_token, always_raises, [1]) == []


def test_greedy_tokens_are_compared_step_by_step(model):
    torch.manual_seed(0)
    expected = reference.run_generate(model, PROMPT, 4, temperature=1.0, top_p=1e-9, eos_id=None)
    assert greedy_difference(model, PROMPT, expected, expected) == []
    (line,) = greedy_difference(model, PROMPT, expected + [1], expected)
    assert line == "generate returned 5 tokens for max_new_tokens=4"
    with torch.no_grad():
        argmaxes = model(torch.tensor([PROMPT + expected[:2]]))[0].argmax(-1).tolist()
    assert argmaxes[0] != expected[2], "test setup: position 0 predicts another token"
    got = expected[:2] + [argmaxes[0]] + expected[3:]
    (line,) = greedy_difference(model, PROMPT, got, expected)
    assert line.startswith(
        f"your first 2 tokens match decoding step by step; at step 2 you drew {argmaxes[0]}"
    )
    assert "; yours is the argmax at position" in line
    nobodys = next(t for t in range(SHIPPED.config["vocab_size"]) if t not in argmaxes)
    got = expected[:2] + [nobodys] + expected[3:]
    assert "yours is the argmax" not in greedy_difference(model, PROMPT, got, expected)[0]
    (line,) = greedy_difference(model, PROMPT, [nobodys] + expected[1:], expected)
    assert line.startswith(f"at step 0 you drew {nobodys}, the argmax of the last position's")
    (line,) = greedy_difference(model, PROMPT, expected[:1], expected)
    assert line == "generate returned 1 token for max_new_tokens=4"


# --- the LM built for the config ----------------------------------------------------------------


def lm_building(state_dict: dict | None = None, error: type[Exception] | None = None):
    def build(*args):
        if error is not None:
            raise error("no")
        return SimpleNamespace(state_dict=lambda: state_dict)

    return with_adapter("get_transformer_lm", build)


def test_the_lm_built_for_the_config_names_its_layer_count_and_shapes():
    two_layers = {n: v for n, v in SHIPPED.state_dict.items() if not n.startswith("layers.2.")}
    (line,) = lm_build_lines(lm_building(two_layers), SHIPPED)
    assert line.endswith("builds for num_layers=3 holds 2 layers")
    flipped = SHIPPED.state_dict | {"lm_head.weight": SHIPPED.state_dict["lm_head.weight"].T}
    (line,) = lm_build_lines(lm_building(flipped), SHIPPED)
    assert line.endswith("has lm_head.weight of shape (64, 512), not (512, 64)")
    (line,) = lm_build_lines(lm_building(error=TypeError), SHIPPED)
    assert "(get_transformer_lm) raises TypeError too" in line


def test_the_lm_built_for_the_config_is_silent_without_evidence():
    assert lm_build_lines(reference, SHIPPED) == []
    renamed = {f"model.{n}": v.flip(0)[:1] for n, v in SHIPPED.state_dict.items()}
    assert lm_build_lines(lm_building(renamed), SHIPPED) == []
    assert lm_build_lines(lm_building(error=NotImplementedError), SHIPPED) == []
    without = SimpleNamespace(**{n: getattr(reference, n) for n in ("run_embedding",)})
    assert lm_build_lines(without, SHIPPED) == []


def test_a_raising_lm_with_right_stages_and_build_points_at_how_it_joins_them():
    (line,) = lm_raised(reference)
    assert "are each right alone" in line and "your transformer_lm raised" in line


def scaled_by_number_of_keys(q, k, v, mask=None):
    scores = q @ k.transpose(-1, -2) / k.shape[-2] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


def test_a_scale_read_off_the_number_of_keys_is_named_where_it_differs_from_d_k():
    from tests.localize.attention import localize_sdpa

    q, k = SHIPPED.inputs["q"], SHIPPED.inputs["k"]
    adapters = with_adapter("run_scaled_dot_product_attention", scaled_by_number_of_keys)
    (line,) = localize_sdpa(adapters, {"q": q, "k": k[:, :12], "mask": None})
    assert "times 0.2887 = 1/sqrt(12), the number of keys, not times 1/sqrt(d_k) = 0.3536" in line
    # 8 keys of width 8: the same scale as d_k's, nothing to read.
    (line,) = localize_sdpa(adapters, {"q": q, "k": k[:, :8], "mask": None})
    assert "number of keys" not in line
