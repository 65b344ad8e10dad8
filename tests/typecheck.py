"""Runtime checks at the adapter boundary (installed by conftest.py).

Every adapter call is checked against the adapter's documented signature in
``adapter_signatures.py``: the arguments the tests pass and the result your code returns must
have the documented types, and jaxtyping shapes (``Float[Tensor, "... d_model"]``) must agree
across them, so a wrong output shape fails naming the dimension. Only the boundary is checked;
the annotations inside your own code (and in your copy of ``adapters.py``) are yours.

jaxtyping checks the shapes and beartype the rest; the PEP 484 numeric tower lets an ``int``
pass where a ``float`` is annotated, as Python's typing rules intend, and any ``io`` file
object passes for ``BinaryIO`` / ``IO[bytes]``.
"""

from __future__ import annotations

import functools
import inspect
import io
from collections.abc import Callable
from types import ModuleType
from typing import IO, BinaryIO

from beartype import BeartypeConf, FrozenDict, beartype
from jaxtyping import jaxtyped

# typing's IO classes are not real bases of io's file objects: check for io.IOBase instead.
FILE_LIKE = FrozenDict({BinaryIO: io.IOBase, IO[bytes]: io.IOBase})
typechecker = beartype(conf=BeartypeConf(is_pep484_tower=True, hint_overrides=FILE_LIKE))


def boundary_checked(signature: Callable, implementation: Callable) -> Callable:
    """``implementation``, with each call checked against ``signature`` (a body-less stub)."""

    @functools.wraps(signature)
    def call(*args, **kwargs):
        return implementation(*args, **kwargs)

    return jaxtyped(typechecker=typechecker)(call)


def check_adapter_boundary(adapters: ModuleType, signatures: ModuleType) -> None:
    """Replace each adapter in ``adapters`` that has a documented signature by its checked
    version, so the tests' ``from .adapters import run_x`` gets the checked one."""
    for name, stub in inspect.getmembers(signatures, inspect.isfunction):
        implementation = getattr(adapters, name, None)
        if stub.__module__ == signatures.__name__ and callable(implementation):
            setattr(adapters, name, boundary_checked(stub, implementation))
