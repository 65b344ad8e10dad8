"""The variant adapters' calls are checked against their documented signatures, as the
assignment's are (``tests/conftest.py``)."""

from __future__ import annotations

from tests.typecheck import check_adapter_boundary
from tests.variants import adapter_signatures

try:
    from tests.variants import adapters
except (Exception, SystemExit):  # noqa: BLE001  (each test that needs one reports the error)
    adapters = None
if adapters is not None:
    check_adapter_boundary(adapters, adapter_signatures)
