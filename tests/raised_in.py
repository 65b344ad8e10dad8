"""Where an error your code raised came from: ``diagnosis:`` lines under the failure.

When a test fails because your code raised an ordinary Python error (a ``TypeError``, a shape
error from torch, a ``KeyError``, a ``ZeroDivisionError``, ...), pytest prints the whole
traceback. These lines sum it up at the end of the failure, where you read first: the function
of yours the error came out of, its line, what the names on that line held when it raised, and
the path through your functions from the adapter in (``conftest.py`` adds them to each failure).

They say nothing for ``NotImplementedError`` (code not written yet), and nothing when your code
is not in the traceback: a test's own check of what your code returned says what is wrong itself.
"Your code" is the package ``cs336_basics`` and ``tests/adapters.py``.
"""

from __future__ import annotations

import linecache
import re
import traceback
from functools import cache
from pathlib import Path
from types import FrameType

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
# At most this many names of the line that raised are described (the first ones on the line).
NAMES_SHOWN = 4
CODE_SHOWN = 100  # characters of a line of code
# A name, or a chain of attributes (self.weight.T), as it appears in a line of code.
NAME_CHAIN = re.compile(r"(?<![\w.'\"])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


@cache
def is_yours(filename: str, root: Path = ROOT) -> bool:
    """Whether ``filename`` is the student's code in the repository at ``root``: the package
    ``cs336_basics`` and ``tests/adapters.py``."""
    path = Path(filename).resolve()
    return path == root / "tests" / "adapters.py" or path.is_relative_to(root / "cs336_basics")


def diagnosis_notes(error: BaseException, root: Path = ROOT) -> list[str]:
    """``raised_in_lines`` as ``diagnosis:`` lines; none when describing failed (a diagnosis must
    never break the failure it explains)."""
    try:
        return [f"diagnosis: {line}" for line in raised_in_lines(error, root)]
    except Exception:  # noqa: BLE001  (student objects are described: anything may raise)
        return []


def nothing_to_locate(error: BaseException) -> bool:
    """Whether no diagnosis should look into ``error``: ``NotImplementedError`` (code not written
    yet) and an error that says where itself (``says_where``: an interruption such as
    ``cpu_limit.OutOfTime``, which your code did not raise, and whose probes might loop too)."""
    return isinstance(error, NotImplementedError) or getattr(error, "says_where", False)


def raised_in_lines(error: BaseException, root: Path = ROOT) -> list[str]:
    """The lines for ``error`` (``[]`` when it never passed through your code at ``root``, and
    where there is ``nothing_to_locate``)."""
    if not isinstance(error, Exception) or nothing_to_locate(error):
        return []
    frames = list(traceback.walk_tb(error.__traceback__))
    yours = [(f, line) for f, line in frames if is_yours(f.f_code.co_filename, root)]
    if not yours:
        return []
    frame, line = yours[-1]
    kind = type(error).__name__
    if frame is frames[-1][0]:
        said = f"your code raised {kind} in {where(frame, line, root)}"
    else:  # raised further in, by a library your line called (torch, regex, ...)
        said = f"{kind} was raised by a call in your {where(frame, line, root)}"
    values = described_names(frame, code_at(frame, line))
    lines = [said + (f", where {values}" if values else "")]
    if len(yours) > 1:
        caller, at = yours[-2]
        path = " > ".join(shortened([f.f_code.co_qualname for f, _ in yours]))
        on_the_way = f"; your functions on the way: {path}" if len(yours) > 2 else ""
        lines.append(f"it was called from {where(caller, at, root)}{on_the_way}")
    return lines


def shortened(names: list[str], shown: int = 8) -> list[str]:
    """``names``, the middle left out when there are more than ``shown`` (a recursion would
    otherwise print one name per frame)."""
    if len(names) <= shown:
        return names
    return [*names[:2], f"... ({len(names) - shown} more)", *names[-(shown - 2) :]]


def where(frame: FrameType, line: int, root: Path) -> str:
    """``name (file:line: `code`)``, the file relative to the repository."""
    path = Path(frame.f_code.co_filename).resolve().relative_to(root).as_posix()
    code = code_at(frame, line)
    shown = code if len(code) <= CODE_SHOWN else code[: CODE_SHOWN - 3] + "..."
    return f"{frame.f_code.co_qualname} ({path}:{line}: `{shown}`)"


def code_at(frame: FrameType, line: int) -> str:
    return linecache.getline(frame.f_code.co_filename, line).strip()


def described_names(frame: FrameType, code: str) -> str:
    """What the names that ``code`` reads held in ``frame``: values, not functions, classes or
    modules; each chain of attributes as far as it leads to a value (``self.weight.T``)."""
    described: dict[str, str] = {}
    for chain in NAME_CHAIN.findall(code):
        found = value_of(frame, chain)
        if found is not None and found[0] not in described:
            try:  # a student object's repr may raise: that name is left out
                described[found[0]] = describe(found[1])
            except Exception:  # noqa: BLE001
                continue
        if len(described) == NAMES_SHOWN:
            break
    return ", ".join(
        f"{name} is {text}" if text.startswith(("a ", "an ")) else f"{name} = {text}"
        for name, text in described.items()
    )


def value_of(frame: FrameType, chain: str) -> tuple[str, object] | None:
    """The longest start of ``chain`` that names a value in ``frame`` (a local, else a global),
    with that value; ``None`` when none does."""
    head, *attributes = chain.split(".")
    scopes = (frame.f_locals, frame.f_globals)
    scope = next((s for s in scopes if head in s), None)
    if scope is None:
        return None
    found, value = None, scope[head]
    for depth in range(len(attributes) + 1):
        if is_value(value):
            found = (".".join([head, *attributes[:depth]]), value)
        if depth == len(attributes):
            break
        try:  # student objects: any attribute may raise (a property, a missing name)
            value = getattr(value, attributes[depth])
        except Exception:  # noqa: BLE001
            break
    return found


def is_value(value: object) -> bool:
    """Data (a tensor, a number, a string, a container, a compiled pattern, an object), not a
    function, class or module: the values, not the code, are what a line was given."""
    return not callable(value) and not isinstance(value, type(re))


def describe(value: object) -> str:
    """A short description: a repr for numbers, ``None`` and short strings and containers, else
    ``a ...`` (``an ...``)."""
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        device = "" if value.device.type == "cpu" else f" on {value.device}"
        if value.ndim == 0:
            return with_article(f"{dtype} tensor holding {value.item():.6g}{device}")
        return with_article(f"{dtype} tensor of shape {tuple(value.shape)}{device}")
    if isinstance(value, np.ndarray):
        return with_article(f"{value.dtype} array of shape {value.shape}")
    if value is None or isinstance(value, (bool, int, float, np.generic, torch.dtype)):
        return repr(value)
    if isinstance(value, (str, bytes)):
        if len(value) <= 30:
            return repr(value)
        return f"a {type(value).__name__} of length {len(value):,} ({value[:20]!r}...)"
    if hasattr(value, "pattern") and hasattr(value, "finditer"):
        return f"a compiled pattern ({str(value.pattern)[:30]!r})"
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        # A small one in full (a shape, a pair); a large one's repr would take long to make.
        text = repr(value) if len(value) <= 8 else ""
        return text if 0 < len(text) <= 40 else f"a {type(value).__name__} of {len(value):,} items"
    return with_article(type(value).__qualname__)


def with_article(noun: str) -> str:
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"
