"""Where an error the student's code raised came from (``tests/raised_in.py``): the lines name
the function of theirs it came out of, its line and the values that line held, and the caller;
they stay silent where the student's code is not in the traceback, for code not written yet,
and for pytest's own outcomes."""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
import torch

from cs336_basics.schedule import get_lr_cosine_schedule
from tests.conftest import pytest_runtest_makereport
from tests.raised_in import describe, diagnosis_notes, raised_in_lines

STUDENT = """
import json

import torch

PATTERN = "not compiled"


def warmup(it, warmup_iters, max_lr):
    return it / warmup_iters * max_lr


class Linear:
    def __init__(self):
        self.weight = torch.zeros(3, 2)

    def forward(self, x):
        return self.weight.T @ x


def split(text):
    return list(PATTERN.finditer(text))


def parse(text):
    return json.loads(text)


def unwritten():
    raise NotImplementedError


def returns_one():
    return 1


def tokenize(text):
    return split(text)
"""
ADAPTERS = """
mod = None  # the student's module, set when loaded


def run_warmup(it, warmup_iters):
    return mod.warmup(it, warmup_iters, 2.0)


def run_linear(x):
    return mod.Linear().forward(x)


def run_tokenize(text):
    return mod.tokenize(text)
"""


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def repo(tmp_path: Path) -> SimpleNamespace:
    """A student's repository: ``cs336_basics/mod.py`` and ``tests/adapters.py`` importing it."""
    root = tmp_path.resolve()
    for name, text in {"cs336_basics/mod.py": STUDENT, "tests/adapters.py": ADAPTERS}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    mod = load(root / "cs336_basics" / "mod.py", f"cs336_basics.mod_{id(root)}")
    adapters = load(root / "tests" / "adapters.py", f"adapters_{id(root)}")
    adapters.mod = mod
    return SimpleNamespace(root=root, mod=mod, adapters=adapters)


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as error:  # noqa: BLE001  (whatever the call raises is looked at)
        return error
    raise AssertionError("the call should raise")


def test_a_division_by_zero_is_located_with_the_values_on_its_line(repo):
    lines = raised_in_lines(raised(lambda: repo.adapters.run_warmup(0, 0)), repo.root)
    assert lines[0] == (
        "your code raised ZeroDivisionError in warmup (cs336_basics/mod.py:10: "
        "`return it / warmup_iters * max_lr`), where it = 0, warmup_iters = 0, max_lr = 2.0"
    )
    assert lines[1] == (
        "it was called from run_warmup (tests/adapters.py:6: "
        "`return mod.warmup(it, warmup_iters, 2.0)`)"
    )


def test_a_shape_error_names_the_operands_shapes_and_the_path(repo):
    error = raised(lambda: repo.adapters.run_linear(torch.zeros(4, 3)))
    lines = raised_in_lines(error, repo.root)
    assert lines[0].startswith("your code raised RuntimeError in Linear.forward (")
    assert "self.weight.T is a float32 tensor of shape (2, 3)" in lines[0]
    assert "x is a float32 tensor of shape (4, 3)" in lines[0]
    assert lines[1] == (
        "it was called from run_linear (tests/adapters.py:10: `return mod.Linear().forward(x)`)"
    )


def test_a_global_that_is_a_string_where_a_pattern_was_meant_is_shown(repo):
    lines = raised_in_lines(raised(lambda: repo.adapters.run_tokenize("hi")), repo.root)
    assert lines[0] == (
        "your code raised AttributeError in split (cs336_basics/mod.py:22: "
        "`return list(PATTERN.finditer(text))`), where PATTERN = 'not compiled', text = 'hi'"
    )
    assert lines[1] == (
        "it was called from tokenize (cs336_basics/mod.py:38: `return split(text)`); your "
        "functions on the way: run_tokenize > tokenize > split"
    )


def test_a_recursion_prints_the_path_with_its_middle_left_out(repo):
    student = repo.root / "cs336_basics" / "deep.py"
    student.write_text("def down(n):\n    return down(n - 1) if n else 1 / n\n", encoding="utf-8")
    error = raised(lambda: load(student, f"deep_{id(repo)}").down(50))
    path = raised_in_lines(error, repo.root)[1].split("your functions on the way: ")[1]
    assert path == "down > down > ... (43 more) > down > down > down > down > down > down"


def test_an_error_raised_inside_a_library_is_put_at_the_students_call(repo):
    lines = raised_in_lines(raised(lambda: repo.mod.parse("{")), repo.root)
    assert lines[0].startswith("JSONDecodeError was raised by a call in your parse (")
    assert "text = '{'" in lines[0]


def test_silent_where_the_students_code_is_not_in_the_traceback(repo):
    returned = repo.mod.returns_one()
    assertion = raised(lambda: _check(returned == 2))  # a test's own check of a result
    assert raised_in_lines(assertion, repo.root) == []
    assert raised_in_lines(raised(lambda: json.loads("{")), repo.root) == []  # a library alone


def _check(condition: bool) -> None:
    assert condition, "the result is wrong"


def test_silent_for_code_not_written_yet_and_for_pytests_outcomes(repo):
    assert raised_in_lines(raised(repo.mod.unwritten), repo.root) == []

    def fails() -> None:
        repo.mod.returns_one()
        pytest.fail("a test's own failure")

    assert raised_in_lines(raised(fails), repo.root) == []


def test_code_outside_the_students_package_is_not_theirs(tmp_path):
    root = tmp_path.resolve()
    for name in ("course/tool.py", ".venv/lib/site-packages/lib.py"):
        (root / name).parent.mkdir(parents=True)
        (root / name).write_text("def f():\n    return 1 / 0\n", encoding="utf-8")
        error = raised(load(root / name, f"lib_{id(root)}").f)
        assert raised_in_lines(error, root) == []


def test_values_are_described_shortly():
    assert describe(torch.zeros(2, 3, dtype=torch.bfloat16)) == (
        "a bfloat16 tensor of shape (2, 3)"
    )
    assert describe("x" * 50) == "a str of length 50 ('xxxxxxxxxxxxxxxxxxxx'...)"
    assert describe(re.compile(r"\d+")) == "a compiled pattern ('\\\\d+')"
    assert describe((4, 3)) == "(4, 3)" and describe(list(range(100))) == "a list of 100 items"
    assert describe(torch.float32) == "torch.float32" and describe(None) == "None"
    assert describe(torch.tensor(0.5)) == "a float32 tensor holding 0.5"
    assert describe(np.zeros((2,), dtype=np.int64)) == "an int64 array of shape (2,)"
    assert describe(Exploding()) == "an Exploding"


class Exploding:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_value_that_cannot_be_described_is_left_out_and_nothing_breaks(repo):
    student = repo.root / "cs336_basics" / "x.py"
    student.write_text("def f(items):\n    return items[5]\n", encoding="utf-8")
    error = raised(lambda: load(student, f"x_{id(repo)}").f([Exploding()]))
    assert diagnosis_notes(error, repo.root) == [
        "diagnosis: your code raised IndexError in f (cs336_basics/x.py:2: `return items[5]`)"
    ]


def test_the_hook_adds_the_lines_once_to_an_error_from_the_reference():
    # The reference is the student's code here: cs336_basics/schedule.py refuses the arguments.
    error = raised(lambda: get_lr_cosine_schedule(0, 1.0, 0.1, 5, 2))
    call = SimpleNamespace(excinfo=SimpleNamespace(value=error))
    for _ in range(2):  # a fixture's error is reported again for each test that uses it
        hook = pytest_runtest_makereport(None, call)
        next(hook)
        with pytest.raises(StopIteration):
            hook.send(None)
    assert len(error.__notes__) == 1
    assert error.__notes__[0].startswith(
        "diagnosis: your code raised ValueError in get_lr_cosine_schedule (cs336_basics/schedule.py:"
    )
