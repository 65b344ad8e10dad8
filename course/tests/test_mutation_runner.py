"""The one runner of mutation testing (course/mutation/run.py): which sources and judges go
together, and what it refuses before running anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.mutation import generated
from course.mutation.catalogue import Bug
from course.mutation.judge_grader import CaughtBy
from course.mutation.judge_silent import FUNCTION_COMPONENTS, Verdict, module_components, report
from course.mutation.run import generated_modules, main, mutant_bugs, parser


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--source", "generated", "--judge", "grader"], "not --judge grader"),
        (["--source", "near-miss", "--judge", "silent", "--graded"], "generated alone"),
        (["--source", "catalogue", "--smoke"], "--smoke: for --source generated alone"),
        (["--source", "generated", "--smoke", "--graded"], "--smoke or --graded, not both"),
        (["--source", "catalogue", "--graded"], "--graded: for --source generated alone"),
        (["--source", "blind", "--judge", "first", "--smoke"], "--smoke: for --source generated"),
        (["--source", "generated", "--judge", "first", "--list"], "--list: for the generated"),
        (["--source", "blind", "--judge", "grader", "--log", "x"], "judged by the tests or first"),
        (["--source", "catalogue", "--source", "generated", "--log", "x"], "for one source"),
        (["--source", "generated", "--source", "catalogue", "--list"], "generated alone"),
        (["--source", "catalogue", "--judge", "grader", "--log", "x"], "judged by the tests"),
        (["--source", "catalogue", "--source", "blind", "linear"], "give one --source"),
        (["--source", "blind", "no_such_bug"], "no such bug(s) in the blind: ['no_such_bug']"),
        (["--source", "generated", "nowhere.py"], "not modules with known tests"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--source", "generated", "--every", "3"], "--every: a whole number of at least 1, for"),
        (["--source", "generated", "--judge", "first", "--every", "0"], "--every: a whole number"),
        (["--source", "blind", "--judge", "first", "--every", "2"], "--every: for --source gen"),
        (
            ["--source", "blind", "--judge", "grader", "blind_temperature_multiplies"],
            "no bug of the blind asked for has a graded component",
        ),
    ],
)
def test_meaningless_combinations_are_refused_by_name(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err


def test_listing_generated_mutants_runs_nothing(capsys):
    assert main(["--source", "generated", "--list", "--match", "clip", "gradient_clipping.py"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed and all("gradient_clipping.py" in line for line in listed)


def test_the_graded_generated_mutants_leave_the_compiled_tokenizer_out():
    options = parser()
    graded = generated_modules(options, options.parse_args(["--source", "generated", "--graded"]))
    everything = generated_modules(options, options.parse_args(["--source", "generated"]))
    assert len(graded) == 21 and "tokenizer.py" in graded
    assert sorted(set(everything) - set(graded)) == sorted(generated.REFERENCE_MODULE_TESTS)


def test_every_nth_generated_mutant_is_a_reproducible_sample_of_each_module():
    options = parser()
    argv = ["--source", "generated", "--judge", "first", "gradient_clipping.py", "schedule.py"]
    every = mutant_bugs(options, options.parse_args(argv))
    third = mutant_bugs(options, options.parse_args([*argv, "--every", "3"]))
    assert [b.name for b in third] == [
        b.name for b in mutant_bugs(options, options.parse_args([*argv, "--every", "3"]))
    ]
    for module in ("gradient_clipping.py", "schedule.py"):
        mine = [b.name for b in every if module in b.path]
        assert [b.name for b in third if module in b.path] == mine[::3]


def generated_judged_as(modules: list[str]) -> dict[tuple[str, str], set[str]]:
    """The components each generated mutant of ``modules`` is judged as, by (path, key): a
    generated bug's hint is the mutant, ``"<path>:<line> <key>"``."""
    options = parser()
    bugs = mutant_bugs(options, options.parse_args(["--source", "generated", *modules]))
    judged_as: dict[tuple[str, str], set[str]] = {}
    for bug in bugs:
        place, key = bug.hint.split(" ", 1)
        judged_as.setdefault((place.split(":")[0], key), set()).add(bug.component)
    return judged_as


def test_a_mutant_is_judged_only_as_the_components_that_run_its_function():
    judged_as = generated_judged_as(sorted(FUNCTION_COMPONENTS))
    by_function: dict[tuple[str, str], set[frozenset[str]]] = {}
    for (path, key), components in judged_as.items():
        function = key.split(":", 1)[0]
        by_function.setdefault((Path(path).name, function), set()).add(frozenset(components))
    assert by_function[("functional.py", "silu")] == {frozenset({"silu"})}
    assert by_function[("functional.py", "softmax")] == {frozenset({"softmax"})}
    assert by_function[("attention.py", "MultiHeadSelfAttention.forward")] == {
        frozenset({"multihead_self_attention"})
    }
    both = frozenset(module_components("attention.py", generated.MODULE_TESTS["attention.py"]))
    assert by_function[("attention.py", "scaled_dot_product_attention")] == {both}
    assert by_function[("pretokenization.py", "_count_pretoken_strings")] == {
        frozenset({"train_bpe"})
    }
    # Every function listed still has mutants (a renamed one would silently count for all).
    for module, owners in FUNCTION_COMPONENTS.items():
        functions = {f for m, f in by_function if m == module}
        for name in owners:
            assert any(f == name or f.startswith(f"{name}.") for f in functions), (module, name)


def test_a_mutant_equivalent_for_some_components_is_judged_as_the_others_only():
    partial = generated.load_component_equivalents()
    assert partial, "no entry of equivalent_mutants.toml names its components"
    judged_as = generated_judged_as(sorted({Path(path).name for path, _ in partial}))
    for (path, key), not_mistakes in partial.items():
        every = set(module_components(Path(path).name, generated.MODULE_TESTS[Path(path).name]))
        # Still generated (a stale key would silently judge nothing), and judged as the rest.
        assert (path, key) in judged_as, f"{path}: {key} is no longer generated"
        assert judged_as[path, key] == every - not_mistakes, key
        assert (path, key) not in generated.load_equivalents()


def verdict(name: str, lost: float, failed: tuple[str, ...], tests_failed: bool | None):
    bug = Bug(name, "train_bpe", "cs336_basics/bpe.py", (("a", "b"),), "a hint")
    charge = CaughtBy(bug, lost, len(failed), 0, "", failed)
    return Verdict(bug, charge, tests_failed)


def test_the_silent_judge_counts_losses_the_tests_missed_and_charges_in_several_kinds():
    verdicts = [
        verdict("seen", 3.0, ("train_bpe-hidden-stories-other",), True),
        verdict("unseen", 3.0, ("train_bpe-hidden-samples-mixed",), False),
        verdict("uncharged", 0.0, (), None),
        verdict(
            "twice",
            6.0,
            (
                "train_bpe-hidden-samples-mixed",
                "train_bpe-hidden-samples-two_specials",
                "train_bpe-hidden-stories-other",
            ),
            True,
        ),
    ]
    assert [v.silent for v in verdicts] == [False, True, False, False]
    assert verdicts[3].kinds == ["samples", "stories"]
    text = report(verdicts)
    assert "  unseen (train_bpe, 3.00 points): train_bpe-hidden-samples-mixed" in text
    assert "  twice (train_bpe, 6.00 points): 2 of " in text
    assert text.endswith(
        "silent hidden losses: 1 of 3 charged mistakes (4 graded); double charges: 1"
    )


def test_mistakes_their_tests_catch_are_not_graded_and_never_silent():
    caught = verdict("caught", 0.0, (), True)
    caught = Verdict(caught.bug, None, True)
    verdicts = [caught, verdict("missed", 2.0, ("train_bpe-hidden-stories-other",), False)]
    assert [v.silent for v in verdicts] == [False, True]
    assert caught.kinds == [] and caught.lost == 0.0
    text = report(verdicts)
    assert "1 of 2 mistakes fail their component's shipped tests (not graded" in text
    assert text.endswith(
        "silent hidden losses: 1 of 1 charged mistakes (1 graded); double charges: 0"
    )
