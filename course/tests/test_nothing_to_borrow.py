"""Nothing a student can import from the shipped tests computes a graded quantity: the oracles
(a naive BPE trainer, tiktoken) live in ``course/cases/truths``, and the tests compare with the
values they produced, shipped in ``fixtures/expected``."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from course.cases.truths import tokenizers
from course.handout.build import plan
from course.handout.verify import oracle_problems
from course.paths import REPO_ROOT


def test_shipped_tests_hold_no_trainer_and_import_no_tokenizer_library() -> None:
    shipped = [rel for rel in plan(REPO_ROOT, "base") if rel.parts[0] == "tests"]
    assert Path("tests/cases/tokenizers.py") in shipped
    problems = [
        problem
        for rel in shipped
        if rel.suffix == ".py"
        for problem in oracle_problems(rel, ast.parse((REPO_ROOT / rel).read_text("utf-8")))
    ]
    assert problems == []


def test_the_check_finds_a_trainer_and_the_tokenizer_libraries() -> None:
    trainer = ast.parse(inspect.getsource(tokenizers.naive_train_bpe))
    assert any("adjacent pairs" in p for p in oracle_problems(Path("t.py"), trainer))
    for line in ("import tiktoken", "from tokenizers import Tokenizer", "import transformers.x"):
        assert oracle_problems(Path("t.py"), ast.parse(line)), line
    fine = ast.parse("pairs = zip(a, b[1:])\nsame = zip(a, a)\n")
    assert oracle_problems(Path("t.py"), fine) == []
