"""The one runner of mutation testing (course/mutation/run.py): which sources and judges go
together, and what it refuses before running anything."""

from __future__ import annotations

import pytest

from course.mutation import generated
from course.mutation.run import generated_modules, main, parser


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--source", "generated", "--judge", "grader"], "judged by the tests only"),
        (["--source", "catalogue", "--smoke"], "--smoke: for --source generated alone"),
        (["--source", "generated", "--smoke", "--graded"], "--smoke or --graded, not both"),
        (["--source", "catalogue", "--graded"], "--graded: for --source generated alone"),
        (["--source", "catalogue", "--source", "generated", "--log", "x"], "for one source"),
        (["--source", "generated", "--source", "catalogue", "--list"], "generated alone"),
        (["--source", "catalogue", "--judge", "grader", "--log", "x"], "judged by the tests"),
        (["--source", "catalogue", "--source", "blind", "linear"], "give one --source"),
        (["--source", "blind", "no_such_bug"], "no such bug(s) in the blind: ['no_such_bug']"),
        (["--source", "generated", "nowhere.py"], "not modules with known tests"),
        (["--jobs", "0"], "--jobs must be at least 1"),
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
