"""Where ``course/mutation/ast_mutants.py`` mutates: a graded module's solution regions, or, in a module
without them (the reference-only compiled tokenizer), its function bodies."""

from __future__ import annotations

from course.mutation.ast_mutants import generate

MARKED = """\
LIMIT = 3


def f(x, y=2):
    # BEGIN SOLUTION
    return x + 1
    # END SOLUTION


def g(x):
    return x - 5
"""

UNMARKED = """\
LIMIT = 3


def f(x, y=2):
    \"\"\"Adds 4 LIMITs.\"\"\"
    return x + LIMIT * 4


class Table:
    size = 8

    def first(self):
        return [1, 2][0]
"""


def test_a_marked_module_is_mutated_inside_its_solution_regions_only(tmp_path) -> None:
    (tmp_path / "marked.py").write_text(MARKED, encoding="utf-8")
    mutants = generate(tmp_path, "marked.py")
    assert {m.line for m in mutants} == {6}
    assert "f: x + 1 -> x [drop]" in {m.key for m in mutants}


def test_an_unmarked_module_is_mutated_inside_its_function_bodies(tmp_path) -> None:
    (tmp_path / "unmarked.py").write_text(UNMARKED, encoding="utf-8")
    mutants = generate(tmp_path, "unmarked.py")
    # Not the module's constant, a default argument, a class attribute or the docstring.
    assert {m.line for m in mutants} == {6, 13}
    keys = {m.key for m in mutants}
    assert {"f: x + LIMIT * 4 -> x [drop]", "Table.first: [1, 2][0] -> [1, 2][1] [index]"} <= keys
    for mutant in mutants:
        compile(mutant.source, "unmarked.py", "exec")  # every mutant is valid Python
