"""The runtime type checker the test suite installs on ``cs336_basics`` (see conftest.py).

jaxtyping checks the shape annotations (``Float[Tensor, "... d_model"]``) and beartype the rest;
the PEP 484 numeric tower lets an ``int`` pass where a ``float`` is annotated, as Python's
typing rules intend.
"""

from beartype import BeartypeConf, beartype

typechecker = beartype(conf=BeartypeConf(is_pep484_tower=True))
