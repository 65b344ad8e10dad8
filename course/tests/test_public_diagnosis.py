"""The grader's public feedback says what pytest says: a failed public case's message in
``results.json`` carries the ``diagnosis:`` lines ``tests/test_cases.py`` prints under it
(``tests.localize.diagnose``, measured again with the student's code in the public run; where an
error came out of the student's code, ``tests/raised_in.py``, as conftest.py adds it), and
hidden cases keep their fixed texts.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

import tests.adapters as reference
from course.grading.driver import case_runner, load_instances
from course.grading.grade import Course, grade, protected_paths, stage_grader_files
from course.grading.judge import INPUTS_ROOT, judge_component, load_rubric
from course.grading.sandbox import SandboxUnavailable, isolation
from course.tests.test_localize import with_adapter
from course.workspace import Edit, apply_edits, stage
from cs336_basics.losses import cross_entropy
from tests import test_cases
from tests.cases import CASES
from tests.cases.wire import read_bundle, write_bundle
from tests.raised_in import diagnosis_notes

RUBRIC = load_rubric()
UNSCALED = "the global norm 9.202 exceeds max_l2_norm 1.5, but your gradients were not scaled"
LOCALIZED = "on uniform logits your cross_entropy is right on 2 rows but raised on leading dims"


def clip_iterating_twice(parameters, max_l2_norm):
    """Reads the norm in one pass and scales in a second: a generator is empty by then."""
    norm = sum(float(p.grad.pow(2).sum()) for p in parameters if p.grad is not None) ** 0.5
    if norm > max_l2_norm:
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(max_l2_norm / (norm + 1e-6))


def cross_entropy_of_rows(logits, targets):
    """Right on (batch, vocab) logits; raises IndexError on more leading dims."""
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    rows = torch.arange(len(targets))
    return (shifted.exp().sum(-1).log() - shifted[rows, targets]).mean()


def cross_entropy_of_float_targets(inputs, targets):
    """Passes the targets on as floats: the error comes out of the package's gather. (Not
    through the reference adapter: once tests/conftest.py is imported, its boundary check would
    refuse them there.)"""
    return cross_entropy(inputs, targets.float())


# Where that error came out of the student's code (tests/raised_in.py), and its caller.
RAISED_IN = "your code raised RuntimeError in cross_entropy (cs336_basics/losses.py:"
CALLED_FROM = "it was called from run_cross_entropy (tests/adapters.py:"


# The same mistake as a student writes it in the package: the norm read in one pass over
# ``parameters``, the scaling done in a second.
CLIPPING_ITERATED_TWICE = [
    Edit(
        "cs336_basics/gradient_clipping.py",
        "        for g in grads:\n",
        "        for g in (p.grad for p in parameters if p.grad is not None):\n",
        "a second pass over the parameters",
    )
]
MISTAKES = {
    "gradient_clipping": with_adapter("run_gradient_clipping", clip_iterating_twice),
    "cross_entropy": with_adapter("run_cross_entropy", cross_entropy_of_rows),
}
FLOAT_TARGETS = with_adapter("run_cross_entropy", cross_entropy_of_float_targets)


def judged(adapters, component: str, out: Path, hidden: bool = False) -> dict[str, str]:
    """The driver (in-process, with the checkout as its cases root) on the component's public
    (or hidden) cases, then the judge: each case's message."""
    side = "-hidden-" if hidden else "-public-"
    instances = [i for i in load_instances(INPUTS_ROOT, [component], set()) if side in i[0]]
    case_runner()(instances, adapters, None, out, 0)
    return {
        r.case: r.message for r in judge_component(component, out, rubric=RUBRIC, hidden=hidden)
    }


def test_a_consumed_generator_is_said_unscaled_not_a_constant_multiple(tmp_path):
    messages = judged(MISTAKES["gradient_clipping"], "gradient_clipping", tmp_path)
    message = messages["gradient_clipping-public-generator"]
    assert f"diagnosis: round 0: {UNSCALED}" in message
    assert "nothing was done to it" in message
    assert "times a constant" not in message
    assert all(m == "passed" for c, m in messages.items() if not c.endswith("generator"))


def test_a_call_that_raises_gets_the_localized_line(tmp_path):
    messages = judged(MISTAKES["cross_entropy"], "cross_entropy", tmp_path)
    message = messages["cross_entropy-public-leading_dims"]
    assert message.startswith("raised IndexError")
    assert f"\n  diagnosis: {LOCALIZED}" in message
    # Raised in this file, not in the student's code: nothing says where.
    assert "your code raised" not in message and "raised by a call in your" not in message


def test_an_error_out_of_the_students_code_says_where(tmp_path):
    messages = judged(FLOAT_TARGETS, "cross_entropy", tmp_path)
    assert messages and all(m.startswith("raised RuntimeError") for m in messages.values())
    for message in messages.values():
        lines = message.splitlines()
        (where,) = [line for line in lines if line.startswith(f"  diagnosis: {RAISED_IN}")]
        assert "targets is a float32 tensor of shape" in where


def test_a_wrong_value_gets_no_line_about_where(tmp_path):
    messages = judged(MISTAKES["gradient_clipping"], "gradient_clipping", tmp_path)
    assert f"diagnosis: round 0: {UNSCALED}" in messages["gradient_clipping-public-generator"]
    assert not any(
        "your code raised" in m or "raised by a call in your" in m for m in messages.values()
    )


@pytest.mark.parametrize(
    ("adapters", "component", "case"),
    [
        (MISTAKES["gradient_clipping"], "gradient_clipping", "generator"),
        (MISTAKES["cross_entropy"], "cross_entropy", "leading_dims"),
        (FLOAT_TARGETS, "cross_entropy", "leading_dims"),
    ],
    ids=["gradient_clipping", "cross_entropy", "float_targets"],
)
def test_the_public_message_is_pytests(tmp_path, monkeypatch, adapters, component, case):
    """Word for word what ``uv run pytest`` says for the case: its assertion message, or the
    exception and the notes it gets, conftest.py's included (the traceback, and pytest's
    indentation and ``assert`` line, aside)."""
    monkeypatch.setattr(test_cases, "import_adapters", lambda: adapters)
    with pytest.raises(Exception) as failure:
        test_cases.test_case(CASES[component, case])
    error = failure.value
    said = str(error) if isinstance(error, AssertionError) else f"{type(error).__name__}: {error}"
    # conftest.py's pytest_runtest_makereport adds where an error came out of the student's code.
    notes = [*getattr(error, "__notes__", []), *diagnosis_notes(error)]
    said += "".join(f"\n{note}" for note in notes)
    message = judged(adapters, component, tmp_path)[f"{component}-public-{case}"]
    lines = [line.strip() for line in message.removeprefix("raised ").splitlines()]
    assert lines == [line.strip() for line in said.splitlines()][: len(lines)]
    assert any(line.startswith("diagnosis:") for line in lines)


def test_right_code_gets_no_diagnosis(tmp_path):
    for component in MISTAKES:
        out = tmp_path / component
        assert set(judged(reference, component, out).values()) == {"passed"}
        headers = [json.loads(p.read_text()) for p in out.glob("*.json")]
        assert headers and not any("diagnosis" in h for h in headers)


@pytest.mark.parametrize(
    ("adapters", "said"),
    [(MISTAKES["cross_entropy"], "raised IndexError"), (FLOAT_TARGETS, "raised RuntimeError")],
    ids=["cross_entropy", "float_targets"],
)
def test_hidden_cases_keep_their_fixed_text(tmp_path, adapters, said):
    messages = judged(adapters, "cross_entropy", tmp_path, hidden=True)
    assert said in messages.values()
    assert not any("diagnosis" in m for m in messages.values())
    headers = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert not any("diagnosis" in h for h in headers)


def test_forged_lines_are_capped_and_reach_only_a_public_message(tmp_path):
    """The student's code runs in the driver's process and may write any header: its lines
    stay within the caps, and a hidden case's text stays fixed."""
    forged = {"status": "raised", "error": "ValueError: no", "diagnosis": ["x" * 9000] * 50}
    for case in ("rmsnorm-public-basic", "rmsnorm-hidden-basic-small"):
        write_bundle(tmp_path, case, {}, {"case": case} | forged)
    public = judge_component("rmsnorm", tmp_path, rubric=RUBRIC, hidden=False)
    hidden = judge_component("rmsnorm", tmp_path, rubric=RUBRIC, hidden=True)
    (message,) = [r.message for r in public if r.case == "rmsnorm-public-basic"]
    lines = message.split("\n  diagnosis: ")[1:]
    assert 0 < len(lines) <= 6 and all(len(line) <= 500 for line in lines)
    assert [r.message for r in hidden if r.case == "rmsnorm-hidden-basic-small"] == [
        "raised ValueError"
    ]


def test_only_the_public_sandbox_gets_the_diagnoses_files(tmp_path):
    public = stage_grader_files(Course(), ["linear"], False, tmp_path / "public")
    hidden = stage_grader_files(Course(), ["linear"], True, tmp_path / "hidden")
    parts = ("tests/localize/__init__.py", "tests/measure.py", "tests/raised_in.py")
    for part in (*parts, "fixtures/stages.npz"):
        assert (public / part).is_file() and not (hidden / part).exists(), part
    assert not list((hidden / "inputs" / "linear").glob("*-public-*"))
    # The public expected values, as a handout holds them (tests.cases.public reads them there).
    assert read_bundle(public / "fixtures/expected/softmax", "softmax-public-large_inputs")


def graded(tmp_path: Path, edits: list[Edit], component: str) -> dict:
    """``results.json`` of a zip of the package and adapters with ``edits`` made, graded on
    ``component`` alone (sandboxed where this machine can)."""
    submission = stage(tmp_path / "submission", ("cs336_basics", "tests/adapters.py"))
    apply_edits(submission, edits)
    zip_path = tmp_path / "submission.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        for path in sorted(submission.rglob("*.py")):
            archive.write(path, path.relative_to(submission).as_posix())
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(f'[[component]]\nname = "{component}"\npoints = 1\n')
    try:
        sandboxed = bool(isolation(protected_paths(Course())))
    except SandboxUnavailable:
        sandboxed = False
    return grade(zip_path, tmp_path / "out", rubric=rubric, sandbox=sandboxed, quiet=True)


@pytest.mark.slow  # two sandboxes and a zip: run by `make test-all` and CI, not by plain `pytest`
def test_results_json_carries_pytests_line_for_a_consumed_generator(tmp_path):
    report = graded(tmp_path, CLIPPING_ITERATED_TWICE, "gradient_clipping")
    (test,) = report["tests"]
    assert f"diagnosis: round 0: {UNSCALED}" in test["output"]
    assert "times a constant" not in test["output"]
    assert "your code raised" not in test["output"]
    assert report["score"] < 1


# Float targets reach the package's gather: the error comes out of the submission's own code,
# which the driver finds at --submission, not beside the cases it runs.
FLOAT_TARGETS_IN_THE_PACKAGE = [
    Edit(
        "cs336_basics/losses.py",
        "shifted.gather(-1, targets.unsqueeze(-1))",
        "shifted.gather(-1, targets.float().unsqueeze(-1))",
        "targets as floats",
    )
]


@pytest.mark.slow  # two sandboxes and a zip, as above
def test_results_json_says_where_the_submissions_code_raised(tmp_path):
    report = graded(tmp_path, FLOAT_TARGETS_IN_THE_PACKAGE, "cross_entropy")
    (test,) = report["tests"]
    assert "raised RuntimeError" in test["output"]
    assert f"diagnosis: {RAISED_IN}" in test["output"]
    assert "targets.float().unsqueeze(-1)" in test["output"]
    assert f"diagnosis: {CALLED_FROM}" in test["output"]  # the submission's own adapter
    assert report["score"] == 0
