"""Find pieces of the reference solution inside code that ships complete.

A support module "implements a graded quantity" when it holds a piece of graded math from the
reference: a statement or expression of a graded function's body, with the same AST up to the
names of local variables and parameters, that computes with tensors (calls torch, einops or
math, calls a tensor method such as ``sum``/``exp``/``rsqrt``/``softmax``, or multiplies
matrices) and has at least ``MIN_NODES`` AST nodes (``x * torch.sigmoid(x)`` and
``x @ self.weight.T`` count, ``torch.device(name)`` does not). Plumbing that graded modules also
hold (file handling, config validation) is not math and is not looked for. Renaming variables
does not hide a copy; rewriting the math does, which is why the bare handout's tests must also
all fail.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

# Smallest fragment that counts, in AST nodes (names, operators, calls, constants; no contexts).
MIN_NODES = 5
LOCAL = "<local>"
# A fragment is graded math when it computes with tensors: it calls into one of these modules,
# calls one of these tensor methods, or multiplies matrices with ``@``. File handling, config
# validation and other plumbing that graded modules also hold does not count.
MATH_MODULES = frozenset(
    {"torch", "F", "einops", "einsum", "rearrange", "reduce", "repeat", "math"}
)
TENSOR_METHODS = frozenset(
    {
        "sum", "mean", "var", "std", "pow", "exp", "log", "sqrt", "rsqrt", "amax", "amin",
        "max", "min", "softmax", "log_softmax", "logsumexp", "matmul", "bmm", "sigmoid", "cos",
        "sin", "norm", "clamp", "clamp_", "cumsum", "topk", "multinomial", "argmax", "gather",
        "masked_fill", "tril", "triu", "transpose", "view", "reshape", "mul_", "add_", "addcmul_",
        "addcdiv_", "lerp_", "sub_", "div_",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Origin:
    path: str
    line: int
    function: str


def _size(node: ast.AST) -> int:
    return sum(not isinstance(n, ast.expr_context | ast.operator) for n in ast.walk(node))


def is_math(node: ast.AST) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.MatMult):
            return True
        if isinstance(part, ast.Call):
            function = part.func
            if isinstance(function, ast.Name) and function.id in MATH_MODULES:
                return True
            if isinstance(function, ast.Attribute):
                if function.attr in TENSOR_METHODS:
                    return True
                root = function
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in MATH_MODULES:
                    return True
    return False


def _counts(node: ast.AST) -> bool:
    return isinstance(node, ast.stmt | ast.expr) and _size(node) >= MIN_NODES and is_math(node)


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """Parameters and names the function assigns: renaming these does not change the code."""
    args = function.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


class _Normalize(ast.NodeTransformer):
    def __init__(self, local: set[str]) -> None:
        self.local = local

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id=LOCAL if node.id in self.local else node.id)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.arg(arg=LOCAL)


def _fingerprint(node: ast.AST, local: set[str]) -> str:
    normalized = _Normalize(local).visit(copy.deepcopy(node))
    return ast.dump(normalized, annotate_fields=False, include_attributes=False)


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _fragments(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> Iterator[tuple[ast.AST, set[str]]]:
    """Statements and expressions of ``function``'s body (not its signature or docstring)."""
    local = _local_names(function)
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    for statement in body:
        for node in ast.walk(statement):
            if _counts(node):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue  # a nested definition is fingerprinted statement by statement
                yield node, local


def solution_fragments(sources: dict[str, str]) -> dict[str, Origin]:
    """Fingerprints of every fragment of the graded code in ``sources`` (path -> text)."""
    found: dict[str, Origin] = {}
    for path, text in sorted(sources.items()):
        for function in _functions(ast.parse(text, filename=path)):
            for node, local in _fragments(function):
                found.setdefault(
                    _fingerprint(node, local), Origin(path, node.lineno, function.name)
                )
    return found


def find_clones(path: str, text: str, fragments: dict[str, Origin]) -> list[str]:
    """Problems, one per line of ``text`` that repeats a fragment of the graded code."""
    problems: dict[int, str] = {}
    tree = ast.parse(text, filename=path)
    definitions = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    scopes = [(f.body, _local_names(f)) for f in _functions(tree)]
    scopes.append(([s for s in tree.body if not isinstance(s, definitions)], set()))
    for statements, local in scopes:
        for statement in statements:
            for node in ast.walk(statement):
                if not _counts(node):
                    continue
                origin = fragments.get(_fingerprint(node, local))
                if origin is not None and node.lineno not in problems:
                    problems[node.lineno] = (
                        f"{path}:{node.lineno}: repeats graded code of {origin.path}:"
                        f"{origin.line} ({origin.function}): {ast.unparse(node)[:80]}"
                    )
    return [problems[line] for line in sorted(problems)]
