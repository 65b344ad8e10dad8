"""Expected values of the graded cases, computed independently of the code under test.

The cases themselves (``tests/cases``) hold inputs, adapter calls and comparisons only: they ship
to students and run inside the grader's sandbox, so nothing there may compute a graded quantity
(a student could call it instead of writing their own). The computations live here, on the
instructor's side: a naive BPE trainer, tiktoken built from a case's vocabulary, float64
transcriptions of the handout's formulas and ``torch.nn.functional`` in float64.
``course/cases/hidden_cases.py`` runs them to write every case's expected values (``course/cases/hidden``)
and the public cases' expected values that ship as fixtures (``fixtures/expected``).

``ORACLES`` maps a case's ``(component, name)`` to ``expected(inputs) -> bundle``. Cases with a
snapshot are not listed: their truths are in ``course/cases/hidden_cases.py``'s ``TRUTHS``.
"""

from __future__ import annotations

from collections.abc import Callable

from course.cases.truths import layers, optim, special_tokens, tokenizers, training
from tests.cases.core import Bundle

ORACLES: dict[tuple[str, str], Callable[[Bundle], Bundle]] = {
    **layers.ORACLES,
    **optim.ORACLES,
    **special_tokens.ORACLES,
    **tokenizers.ORACLES,
    **training.ORACLES,
}
