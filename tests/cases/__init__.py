"""Graded cases, defined once for pytest (``tests/test_cases.py``) and the grader.

See ``tests/cases/core.py`` for what a case is. Importing this package registers every case.
"""

from __future__ import annotations

import tests.cases.special_tokens  # noqa: F401
from tests.cases import attention, layers, model, optim, tokenizers, training  # noqa: F401
from tests.cases.core import CASES, Case, Outputs, components, judge_case, run_case

__all__ = ["CASES", "Case", "Outputs", "components", "judge_case", "run_case"]
