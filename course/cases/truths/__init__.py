"""Expected values of the graded cases, computed independently of the code under test.

The cases themselves (``tests/cases``) hold inputs, adapter calls and comparisons only: they ship
to students and run inside the grader's sandbox, so nothing there may compute a graded quantity
(a student could call it instead of writing their own). The computations live here, on the
instructor's side: a naive BPE trainer, tiktoken built from a case's vocabulary, float64
transcriptions of the handout's formulas, ``torch.nn.functional`` in float64 and a naive
Transformer built from it. ``course/cases/hidden_cases.py`` runs them to write every case's
expected values (``course/cases/hidden``) and the public cases' expected values that ship as
fixtures (``fixtures/expected``); the snapshot cases (``course/cases/model.py``,
``course/cases/variants.py``) call the same naive computations.

``TRUTHS`` is the one table: a case's ``(component, name)`` to ``truth(inputs) -> expected
bundle``. An ``out.atol`` of ``TOLERANCE_FROM_SPREAD`` (``truths/tolerances.py``) asks the writer
to derive the tolerance from the spread of correct implementations. One module per subject, as
in ``tests/cases``; ``truths/variants.py`` serves snapshot cases only and holds no entries.
"""

from __future__ import annotations

from collections.abc import Callable

from course.cases.truths import (
    attention,
    layers,
    model,
    optim,
    special_tokens,
    tokenizers,
    training,
)
from tests.cases.core import Bundle

Truth = Callable[[Bundle], Bundle]

TRUTHS: dict[tuple[str, str], Truth] = {
    **attention.TRUTHS,
    **layers.TRUTHS,
    **model.TRUTHS,
    **optim.TRUTHS,
    **special_tokens.TRUTHS,
    **tokenizers.TRUTHS,
    **training.TRUTHS,
}


def truth_of(component: str, name: str) -> Truth:
    """The independent computation of case ``component/name``'s expected values."""
    try:
        return TRUTHS[(component, name)]
    except KeyError:
        raise KeyError(
            f"case {component}/{name} has no truth: add one to course/cases/truths "
            "(see docs/instructor.md, 'Change the assignment')"
        ) from None
