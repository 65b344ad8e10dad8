"""Where a failing graded case goes wrong, measured with the student's own code (``diagnosis:``
lines after a public case's failure; ``tests/test_cases.py`` calls :func:`diagnose`, and so does
the grader's public run through :func:`public_diagnosis`, so ``results.json`` shows the same
lines; the shipped tests call :func:`diagnosed_if_raised` and :func:`snapshot_located`). This
module holds the dispatch; each component's diagnosis lives in its own module:

- ``stages``: shared helpers: the reference's output at each stage of a composite
  (``fixtures/stages.npz``), how far an output is off it, the first stage or probe that is off.
- ``multihead`` and ``composites`` (multi-head attention; the Transformer block and LM, SwiGLU):
  the student's sub-components run, through their adapters, on the reference's input to each
  stage, and the first stage whose output leaves the reference's is named. When every stage is
  right alone, probes of the student's composite (a sublayer's output weights zeroed, the
  queries zeroed, fewer layers, one token) name the connection that is wrong.
- ``attention``: attention weights, read off the student's attention with the identity as
  values: do rows sum to 1, are masked positions exactly 0, and which scale do the scores carry?
- ``losses``: cross-entropy: does the loss change when the batch or the sequence is repeated (a
  sum, or a mean over the wrong axes), or when a constant is added to a row of logits? Is it
  right where the answer is known in closed form (uniform logits, the target's or another logit
  raised)?
- ``accounting``: parameter and FLOP counts, term by term; ``training``: checkpoints and the
  training loop; ``decoding``: top-p, sampling and generation in the shipped tests;
  ``tokenizers``: BPE training and the tokenizer; ``raised``: the other components whose call
  raised, each run on simpler inputs.

Each diagnosis prints only what it measured, and only when the measurement holds; a probe whose
own call fails (an adapter not written yet) says nothing. ``course/tests/test_localize.py`` feeds
each one right answers it must stay silent on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

from tests.cases import CASES
from tests.cases.core import Bundle, Case, Outputs, judge_case, normalize
from tests.cases.public import public_expected, public_inputs
from tests.cases.shipped import Shipped
from tests.hints import diagnosis_lines, labelled_lines
from tests.localize.attention import localize_sdpa, sdpa_raised
from tests.localize.composites import (
    BLOCK_STAGES,
    block_stages,
    lm_raised,
    localize_block,
    localize_lm,
    localize_swiglu,
    swiglu_raised,
)
from tests.localize.losses import cross_entropy_raised, localize_cross_entropy
from tests.localize.multihead import attention_raised, localize_attention
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
from tests.localize.stages import composite_raised, stage_error, to_array
from tests.localize.tokenizers import tokenizer_raised, train_bpe_raised
from tests.localize.training import checkpoint_raised, checkpoint_restored
from tests.measure import (
    adamw_steps,
    bpe_training_lines,
    clipping_norms,
    rmsnorm_axis,
    rope_frequencies,
    rope_positions,
    schedule_phases,
    silu_ratio,
    softmax_outputs,
    window_layout,
)
from tests.raised_in import nothing_to_locate
from tests.snapshots import Snapshot


def snapshot_located(snapshot, out: object, name: str, diagnose: Callable[[], list[str]]) -> None:
    """``snapshot.assert_match(out, name)``, a failure getting ``diagnose``'s lines as a note
    when ``out`` is off the snapshot's expected value by more than float32 code that is right
    could be (a near miss, as ``--snapshot-exact`` fails, locates nothing)."""

    def lines() -> list[str]:
        return diagnose() if stage_error(out, Snapshot.load(name).expected) else []

    with diagnosed_if_raised(lines):
        snapshot.assert_match(out, name)


# --- dispatch -------------------------------------------------------------------------------

LOCALIZERS: dict[str, Callable[[ModuleType, Bundle], list[str]]] = {
    "transformer_lm": lambda adapters, inputs: localize_lm(adapters),
    "transformer_block": lambda adapters, inputs: localize_block(adapters),
    "multihead_self_attention": lambda adapters, inputs: localize_attention(
        adapters, rope="theta" in inputs
    ),
    "swiglu": localize_swiglu,
    "scaled_dot_product_attention": localize_sdpa,
    "cross_entropy": localize_cross_entropy,
    "checkpoint": checkpoint_restored,
}
MAIN_OUTPUT = {"cross_entropy": "loss", "checkpoint": "resumed"}
# The expected value a main output is checked against, where its name differs: training on
# after loading must reach the parameters of training on without saving.
COMPARED_WITH = {"checkpoint": "continued"}


def localize(
    component: str, adapters: ModuleType, inputs: Bundle, outputs: Bundle, expected: Bundle
) -> list[str]:
    """Lines for a failed public case: measured from its outputs, or, for a component with a
    localizer, only when its main output is clearly off (by more than a float32 computation
    could be); ``[]`` when nothing was measured."""
    measured = OUTPUT_DIAGNOSES.get(component)
    localizer = LOCALIZERS.get(component)
    key = MAIN_OUTPUT.get(component, "out")
    wanted = COMPARED_WITH.get(component, key)
    if measured is not None:
        return quietly(lambda: measured(inputs, outputs, expected))
    if localizer is None or key not in outputs or wanted not in expected:
        return []
    if not stage_error(outputs[key], to_array(expected[wanted])):
        return []
    return quietly(lambda: localizer(adapters, inputs))


def quietly(diagnose: Callable[[], list[str]]) -> list[str]:
    """``diagnose()``'s lines, or none when it raised: a diagnosis must never break the test
    (or the grading run) it explains."""
    try:
        return list(diagnose())
    except Exception:  # noqa: BLE001  (student code, run again by the probe: any exception)
        return []


def as_lines(diagnose: Callable[[], list[str]]) -> str:
    return diagnosis_lines(quietly(diagnose), "  ")


# Diagnoses read off the outputs alone (the inputs, outputs and expected values of the case).
OUTPUT_DIAGNOSES: dict[str, Callable[[Bundle, Bundle, Bundle], list[str]]] = {
    "cosine_schedule": schedule_phases,
    "gradient_clipping": clipping_norms,
    "adamw": adamw_steps,
    "get_batch": window_layout,
    "rope": lambda *bundles: rope_positions(*bundles) or rope_frequencies(*bundles),
    "rmsnorm": rmsnorm_axis,
    "silu": silu_ratio,
    "softmax": softmax_outputs,
    "train_bpe": bpe_training_lines,
}


@contextmanager
def diagnosed_if_raised(diagnose: Callable[[], list[str]]) -> Iterator[None]:
    """An exception raised inside gets ``diagnose``'s lines as a note (its traceback stays);
    not where there is ``raised_in.nothing_to_locate`` (code not written yet, a case out of CPU
    time)."""
    try:
        yield
    except Exception as error:
        note = "" if nothing_to_locate(error) else as_lines(diagnose).lstrip("\n")
        if note:
            error.add_note(note)
        raise


RAISED_DIAGNOSES: dict[str, Callable[[ModuleType, Bundle, Bundle], list[str]]] = {
    "transformer_lm": lambda adapters, inputs, expected: lm_raised(adapters),
    "transformer_block": lambda adapters, inputs, expected: composite_raised(
        block_stages(adapters, Shipped()), BLOCK_STAGES, "transformer_block"
    ),
    "get_batch": get_batch_raised,
    "linear": linear_raised,
    "swiglu": swiglu_raised,
    "embedding": embedding_raised,
    "softmax": softmax_raised,
    "checkpoint": checkpoint_raised,
    "cross_entropy": cross_entropy_raised,
    "adamw": adamw_raised,
    "rmsnorm": rmsnorm_raised,
    "multihead_self_attention": lambda adapters, inputs, expected: attention_raised(
        adapters, rope="theta" in inputs
    ),
    "scaled_dot_product_attention": lambda adapters, inputs, expected: sdpa_raised(
        adapters, inputs["q"], inputs["k"], inputs["v"], inputs.get("mask")
    ),
    "cosine_schedule": schedule_raised,
    "gradient_clipping": lambda adapters, inputs, expected: clipping_raised(
        adapters.run_gradient_clipping
    ),
    "tokenizer": tokenizer_raised,
    "train_bpe": train_bpe_raised,
}


def localize_raised(
    component: str, adapters: ModuleType, inputs: Bundle, expected: Bundle
) -> list[str]:
    """Lines for a public case whose call raised (``[]`` when nothing was measured)."""
    diagnose = RAISED_DIAGNOSES.get(component)
    return diagnose(adapters, inputs, expected) if diagnose else []


# A call that raised, as ``diagnose`` takes it where the exception itself is kept elsewhere
# (pytest shows its traceback); the grader's driver passes the exception's text instead.
RAISED = Outputs({}, "the call raised")


def diagnose(
    case: Case, adapters: ModuleType, inputs: Bundle, outputs: Outputs, expected: Bundle
) -> list[str]:
    """The measured lines shown under a failed public case, by pytest (``tests/test_cases.py``)
    and by the grader's public run (``course/grading/driver.py``) alike: for a call that raised
    (``outputs.raised``), what simpler inputs measured, else what its outputs measured. ``[]``
    when nothing was measured, and for code not written yet (``NotImplementedError``). Never
    raises; call it only for a case that failed."""
    if outputs.raised is None:
        return localize(case.component, adapters, inputs, outputs.data, expected)
    if outputs.raised.startswith("NotImplementedError"):
        return []
    return quietly(lambda: localize_raised(case.component, adapters, inputs, expected))


def graded_case_lines(component: str, adapters: ModuleType | None = None) -> list[str]:
    """What ``diagnose`` measured on the first of ``component``'s public graded cases that fails
    (the first line naming the case), for a shipped test of the same component whose own failure
    only says how far a value is off: the student who runs one test file reads that failure
    first. ``[]`` when every public case passes or nothing was measured, and for code not written
    yet. ``adapters``: ``tests.adapters``, imported only here (a test file that imports it at the
    top cannot even be collected when it does not import)."""
    adapters = adapters or importlib.import_module("tests.adapters")
    shipped = Shipped()
    cases = [c for c in CASES.values() if c.component == component and c.public_inputs]
    for case in sorted(cases, key=lambda c: c.public_id):
        inputs = public_inputs(case, shipped)
        try:
            outputs = Outputs(normalize(case.call(adapters, inputs)))
        except NotImplementedError:
            return []
        except Exception:  # noqa: BLE001  (student code: any exception is a raised call)
            outputs = RAISED
        lines = public_diagnosis(case, adapters, inputs, outputs, from_message=True)
        if lines:
            return [f"on the graded case {case.public_id}: {lines[0]}", *lines[1:]]
    return []


@contextmanager
def graded_case_located(component: str, adapters: ModuleType | None = None) -> Iterator[None]:
    """A failure inside gets ``graded_case_lines``'s note (``NotImplementedError`` passes
    through untouched, as in ``diagnosed_if_raised``)."""
    with diagnosed_if_raised(lambda: graded_case_lines(component, adapters)):
        yield


def public_diagnosis(
    case: Case, adapters: ModuleType, inputs: Bundle, outputs: Outputs, from_message: bool = False
) -> list[str]:
    """A public case judged with its shipped expected values (the grader's public run, whose
    sandbox holds the shipped fixtures as a handout does), and ``diagnose``'s lines if it fails;
    ``[]`` when it passes. ``from_message``: where nothing was measured, the hint and diagnosis
    lines the check's own message holds (the tokenizer's first differing id, a BPE vocabulary's
    make-up); the grader leaves them out, as its judge shows that message already."""
    expected = public_expected(case)
    message = judge_case(case, outputs, expected, inputs)
    if message is None:
        return []
    lines = diagnose(case, adapters, inputs, outputs, expected)
    return lines or (labelled_lines(message) if from_message else [])
