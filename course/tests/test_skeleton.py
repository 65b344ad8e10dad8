"""Graded modules as skeletons: what stays, what goes, and what is refused."""

from __future__ import annotations

import ast

import pytest

from course.handout.skeleton import SkeletonError, make_skeleton

GRADED = '''"""Layers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

EPS = 1e-5
_TABLE = {"a": 1}
_DEFAULT_SCALE = 2.0


@dataclass
class Settings:
    """What a run needs."""

    # The width of the model.
    width: int
    names: list[str] = field(default_factory=list)
    _cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ValueError("width")


class Scale(nn.Module):
    """Multiply by a constant."""

    factor: Tensor

    def __init__(self, factor: float = _DEFAULT_SCALE) -> None:
        super().__init__()
        self.register_buffer("factor", torch.tensor(factor))

    @property
    def value(self) -> float:
        """The factor as a float."""
        return float(self.factor)

    def forward(self, x: Tensor) -> Tensor:
        return self._scale(x)

    def _scale(self, x: Tensor) -> Tensor:
        return x * self.factor * math.pi

    def extra_repr(self) -> str:
        return f"factor={self.value}"

    def __getstate__(self) -> dict:
        return {}


def apply(x: Tensor, fn: Callable[[Tensor], Tensor], where: Path | None = None) -> Tensor:
    """Apply ``fn`` to ``x``."""
    return fn(_helper(x))


def _helper(x: Tensor) -> Tensor:
    return x + _TABLE["a"]


def one_liner(x: int) -> int: return x + 1
'''

EXPECTED = '''"""Layers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import Tensor, nn

if TYPE_CHECKING:
    from pathlib import Path

EPS = 1e-5
_DEFAULT_SCALE = 2.0


@dataclass
class Settings:
    """What a run needs."""

    # The width of the model.
    width: int
    names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        raise NotImplementedError


class Scale(nn.Module):
    """Multiply by a constant."""

    factor: Tensor

    def __init__(self, factor: float = _DEFAULT_SCALE) -> None:
        raise NotImplementedError

    @property
    def value(self) -> float:
        """The factor as a float."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        raise NotImplementedError


def apply(x: Tensor, fn: Callable[[Tensor], Tensor], where: Path | None = None) -> Tensor:
    """Apply ``fn`` to ``x``."""
    raise NotImplementedError


def one_liner(x: int) -> int:
    raise NotImplementedError
'''


def test_skeleton_keeps_the_contract_and_drops_the_implementation() -> None:
    skeleton = make_skeleton(GRADED, "layers.py")
    assert skeleton == EXPECTED
    ast.parse(skeleton)


def test_skeleton_imports_still_resolve_every_name_it_uses() -> None:
    namespace: dict = {}
    exec(compile(make_skeleton(GRADED), "layers.py", "exec"), namespace)
    with pytest.raises(NotImplementedError):
        namespace["apply"](None, None)
    with pytest.raises(NotImplementedError):
        namespace["Settings"](width=3)


def test_private_name_used_by_a_public_signature_stays() -> None:
    source = (
        "class _Base:\n    def run(self):\n        return 1\n\n\n"
        "class Public(_Base):\n    pass\n\n\n"
        "def _unused():\n    return 2\n"
    )
    skeleton = make_skeleton(source)
    assert "class _Base:" in skeleton and "class Public(_Base):" in skeleton
    assert "_unused" not in skeleton and "return" not in skeleton


def test_long_import_is_wrapped() -> None:
    names = [f"name_number_{i}" for i in range(8)]
    source = f"from package.module import {', '.join(names)}\n\n\ndef f(x: {names[0]}, y: {names[7]}) -> None:\n    pass\n"
    skeleton = make_skeleton(source)
    assert "from package.module import name_number_0, name_number_7\n" in skeleton
    long_names = [f"a_rather_long_imported_name_{i}" for i in range(4)]
    source = (
        f"from package.module import {', '.join(long_names)}\n\n\n"
        f"def f(a: {long_names[0]}, b: {long_names[1]}, c: {long_names[2]}, d: {long_names[3]}): pass\n"
    )
    assert "from package.module import (\n    a_rather_long_imported_name_0,\n" in make_skeleton(
        source
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import torch\n\ntorch.manual_seed(0)\n", "line 3: module-level Expr"),
        ("for i in range(3):\n    pass\n", "line 1: module-level For"),
        ("class A:\n    if True:\n        x = 1\n", "line 2: class A holds a If"),
    ],
    ids=["call", "loop", "class-if"],
)
def test_code_with_side_effects_is_refused_by_line(source: str, message: str) -> None:
    with pytest.raises(SkeletonError, match=f"mod.py: {message}"):
        make_skeleton(source, "mod.py")


def test_script_entry_point_is_left_out() -> None:
    source = 'def main() -> int:\n    return 0\n\n\nif __name__ == "__main__":\n    main()\n'
    assert make_skeleton(source) == "def main() -> int:\n    raise NotImplementedError\n"


def test_marker_comments_never_travel_with_the_next_member() -> None:
    source = (
        "class A:\n    # BEGIN SOLUTION\n    _cache = {}\n    # END SOLUTION\n"
        "    # Why forward exists.\n    def forward(self):\n        return 1\n"
    )
    assert make_skeleton(source) == (
        "class A:\n    # Why forward exists.\n    def forward(self):\n        raise NotImplementedError\n"
    )


def test_only_what_the_shipped_code_uses_ships_when_told() -> None:
    source = (
        '"""Doc."""\n\nLIMIT = 3\nSHARED = 4\n\n\n'
        "def called(x: int = SHARED) -> int:\n    return x\n\n\n"
        "def helper() -> int:\n    return LIMIT\n\n\n"
        "class Thing:\n    SIZE = 7\n    name: str = 'a'\n\n"
        "    def run(self) -> int:\n        return self.SIZE\n"
    )
    everything = make_skeleton(source)
    assert all(n in everything for n in ("LIMIT", "helper", "SIZE"))
    told = make_skeleton(source, used_elsewhere=frozenset({"called", "Thing"}))
    assert "def called(x: int = SHARED)" in told and "SHARED = 4" in told  # the default needs it
    assert "class Thing" in told and "name: str" in told and "def run" in told
    assert not any(n in told for n in ("LIMIT", "helper", "SIZE"))
