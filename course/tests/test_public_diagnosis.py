"""The grader's public feedback says what pytest says: a failed public case's message in
``results.json`` carries the ``diagnosis:`` lines ``tests/test_cases.py`` prints under it
(``tests.localize.diagnose``, measured again with the student's code in the public run), and
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
from tests import test_cases
from tests.cases import CASES
from tests.cases.wire import read_bundle, write_bundle

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


@pytest.mark.parametrize(
    ("component", "case"),
    [("gradient_clipping", "generator"), ("cross_entropy", "leading_dims")],
)
def test_the_public_message_is_pytests(tmp_path, monkeypatch, component, case):
    """Word for word what ``uv run pytest`` says for the case: its assertion message, or the
    exception and the note it gets (the traceback, and pytest's indentation and ``assert``
    line, aside)."""
    monkeypatch.setattr(test_cases, "import_adapters", lambda: MISTAKES[component])
    with pytest.raises(Exception) as failure:
        test_cases.test_case(CASES[component, case])
    error = failure.value
    said = str(error) if isinstance(error, AssertionError) else f"{type(error).__name__}: {error}"
    said += "".join(f"\n{note}" for note in getattr(error, "__notes__", []))
    message = judged(MISTAKES[component], component, tmp_path)[f"{component}-public-{case}"]
    lines = [line.strip() for line in message.removeprefix("raised ").splitlines()]
    assert lines == [line.strip() for line in said.splitlines()][: len(lines)]
    assert any(line.startswith("diagnosis:") for line in lines)


def test_right_code_gets_no_diagnosis(tmp_path):
    for component in MISTAKES:
        out = tmp_path / component
        assert set(judged(reference, component, out).values()) == {"passed"}
        headers = [json.loads(p.read_text()) for p in out.glob("*.json")]
        assert headers and not any("diagnosis" in h for h in headers)


def test_hidden_cases_keep_their_fixed_text(tmp_path):
    messages = judged(MISTAKES["cross_entropy"], "cross_entropy", tmp_path, hidden=True)
    assert "raised IndexError" in messages.values()
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
    for part in ("tests/localize/__init__.py", "tests/measure.py", "fixtures/stages.npz"):
        assert (public / part).is_file() and not (hidden / part).exists(), part
    assert not list((hidden / "inputs" / "linear").glob("*-public-*"))
    # The public expected values, as a handout holds them (tests.cases.public reads them there).
    assert read_bundle(public / "fixtures/expected/softmax", "softmax-public-large_inputs")


@pytest.mark.slow  # two sandboxes and a zip: run by `make test-all` and CI, not by plain `pytest`
def test_results_json_carries_pytests_line_for_a_consumed_generator(tmp_path):
    submission = stage(tmp_path / "submission", ("cs336_basics", "tests/adapters.py"))
    apply_edits(submission, CLIPPING_ITERATED_TWICE)
    zip_path = tmp_path / "submission.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        for path in sorted(submission.rglob("*.py")):
            archive.write(path, path.relative_to(submission).as_posix())
    rubric = tmp_path / "rubric.toml"
    rubric.write_text('[[component]]\nname = "gradient_clipping"\npoints = 1\n')
    try:
        sandboxed = bool(isolation(protected_paths(Course())))
    except SandboxUnavailable:
        sandboxed = False
    report = grade(zip_path, tmp_path / "out", rubric=rubric, sandbox=sandboxed, quiet=True)
    (test,) = report["tests"]
    assert f"diagnosis: round 0: {UNSCALED}" in test["output"]
    assert "times a constant" not in test["output"]
    assert report["score"] < 1
