"""Mutants generated mechanically from the reference's syntax tree.

Where ``course/mutation/catalogue.py`` holds mistakes someone thought of, these are small edits nobody chose:
every applicable operator below, at every site inside the ``# BEGIN SOLUTION`` / ``# END
SOLUTION`` regions of a graded module (the code a student writes), or, in a reference-only module
that has no such regions (the compiled tokenizer), inside every function body:

========== ==============================================================================
compare    a comparison operator moved to its neighbour (``<`` -> ``<=``, ``==`` -> ``!=``,
           ``in`` -> ``not in``, ...)
index      an integer index or slice bound changed by one, a non-constant slice bound or the
           stop of ``range`` plus / minus one
drop       a term or factor dropped (``a + b`` -> ``a``, ``a * b`` -> ``b``), a unary minus
           dropped
swap       the operands of a non-commutative operator, or the first two arguments of a call
           (other than ``max`` / ``min``), swapped
constant   a number changed (``0`` -> ``1``, ``n`` -> ``n + 1``, ``x`` -> ``2x``), a boolean
           flipped
transpose  ``.T`` / ``.mT`` / ``.transpose(...)`` / ``.permute(...)`` dropped
dim        a ``dim=`` / ``axis=`` reduction axis moved by one, ``keepdim`` flipped
========== ==============================================================================

A mutant is identified by a key that survives unrelated edits of the file: the enclosing
function, the operator and the edited expression before and after (``#2`` for a repeat).
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

COMPARE_NEIGHBOUR = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.MatMult)
TRANSPOSE_METHODS = {"transpose", "permute", "swapaxes", "t"}
DIM_KEYWORDS = {"dim", "axis"}
# Calls whose arguments commute: swapping them is never a mutant.
COMMUTATIVE_CALLS = {"max", "min", "maximum", "minimum"}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository root
    key: str  # "function: before -> after [operator]" (stable across unrelated edits)
    operator: str
    line: int
    source: str  # the whole mutated module

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.key}"


def plus(node: ast.expr, amount: int) -> ast.expr:
    """``node + amount`` (folded when ``node`` is an integer constant)."""
    value = constant_int(node)
    if value is not None:
        return number(value + amount)
    operator = ast.Add() if amount > 0 else ast.Sub()
    return ast.BinOp(copy.deepcopy(node), operator, ast.Constant(abs(amount)))


def constant_int(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = constant_int(node.operand)
        return None if inner is None else -inner
    return None


def number(value: int | float) -> ast.expr:
    if value < 0:
        return ast.UnaryOp(ast.USub(), ast.Constant(-value))
    return ast.Constant(value)


def replaced(node: ast.AST, **fields) -> ast.AST:
    new = copy.deepcopy(node)
    for name, value in fields.items():
        setattr(new, name, value)
    return new


def compare_mutants(node: ast.Compare) -> Iterator[tuple[str, ast.AST]]:
    for i, op in enumerate(node.ops):
        neighbour = COMPARE_NEIGHBOUR.get(type(op))
        if neighbour is not None:
            ops = list(node.ops)
            ops[i] = neighbour()
            yield "compare", replaced(node, ops=ops)


def index_mutants(node: ast.Subscript) -> Iterator[tuple[str, ast.AST]]:
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for i, part in enumerate(parts):
        bounds = (
            [(b, getattr(part, b)) for b in ("lower", "upper") if getattr(part, b) is not None]
            if isinstance(part, ast.Slice)
            else [(None, part)]
        )
        for bound, expr in bounds:
            is_int = constant_int(expr) is not None
            if bound is None and not is_int:
                continue  # a non-constant index (a tensor, a name) is not an off-by-one site
            for amount in (1, -1) if is_int or bound else (1,):
                new_part = plus(expr, amount) if bound is None else replaced(part)
                if bound is not None:
                    setattr(new_part, bound, plus(expr, amount))
                new_parts = list(parts)
                new_parts[i] = new_part
                new_slice = (
                    ast.Tuple(new_parts, ast.Load())
                    if isinstance(node.slice, ast.Tuple)
                    else new_parts[0]
                )
                yield "index", replaced(node, slice=new_slice)


def call_mutants(node: ast.Call) -> Iterator[tuple[str, ast.AST]]:
    function = node.func
    if isinstance(function, ast.Name) and function.id == "range" and node.args:
        stop = 1 if len(node.args) > 1 else 0
        for amount in (1, -1):
            args = list(node.args)
            args[stop] = plus(args[stop], amount)
            yield "index", replaced(node, args=args)
    if isinstance(function, ast.Attribute) and function.attr in TRANSPOSE_METHODS:
        yield "transpose", copy.deepcopy(function.value)
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", "")
    commutative = name in COMMUTATIVE_CALLS
    if (
        len(positional) >= 2
        and not commutative
        and ast.dump(positional[0]) != ast.dump(positional[1])
    ):
        args = list(node.args)
        args[0], args[1] = args[1], args[0]
        yield "swap", replaced(node, args=args)
    for i, keyword in enumerate(node.keywords):
        value = constant_int(keyword.value)
        if keyword.arg in DIM_KEYWORDS and value is not None:
            keywords = copy.deepcopy(node.keywords)
            keywords[i].value = number(value - 1 if value < 0 else value + 1)
            yield "dim", replaced(node, keywords=keywords)
        if keyword.arg == "keepdim" and isinstance(keyword.value, ast.Constant):
            keywords = copy.deepcopy(node.keywords)
            keywords[i].value = ast.Constant(not keyword.value.value)
            yield "dim", replaced(node, keywords=keywords)


def binop_mutants(node: ast.BinOp) -> Iterator[tuple[str, ast.AST]]:
    if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        yield "drop", copy.deepcopy(node.left)
    if isinstance(node.op, (ast.Add, ast.Mult)):
        yield "drop", copy.deepcopy(node.right)
    if isinstance(node.op, NON_COMMUTATIVE):
        yield "swap", replaced(node, left=node.right, right=node.left)


def constant_mutants(node: ast.Constant) -> Iterator[tuple[str, ast.AST]]:
    value = node.value
    if type(value) is bool:
        yield "constant", ast.Constant(not value)
    elif type(value) is int:
        yield "constant", ast.Constant(1 if value == 0 else value + 1)
    elif type(value) is float:
        yield "constant", ast.Constant(1.0 if value == 0 else value * 2)


def has_own_operator(node: ast.Constant, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a constant is an index, a slice bound or a dim (the index / dim operators)."""
    parent = parents.get(node)
    while isinstance(parent, ast.UnaryOp):
        parent = parents.get(parent)
    if isinstance(parent, ast.keyword):
        return parent.arg in DIM_KEYWORDS or parent.arg == "keepdim"
    return (
        isinstance(parent, (ast.Slice, ast.Subscript, ast.Tuple)) and constant_int(node) is not None
    )


def mutations(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[tuple[str, ast.AST]]:
    """Every ``(operator, replacement)`` for ``node``, in a fixed order."""
    if isinstance(node, ast.Compare):
        return list(compare_mutants(node))
    if isinstance(node, ast.Subscript):
        return list(index_mutants(node))
    if isinstance(node, ast.Call):
        return list(call_mutants(node))
    if isinstance(node, ast.BinOp):
        return list(binop_mutants(node))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        if isinstance(node.operand, ast.Constant):
            return []  # a negative number: the constant inside is mutated instead
        return [("drop", copy.deepcopy(node.operand))]
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        return [("transpose", copy.deepcopy(node.value))]
    if isinstance(node, ast.Constant) and not has_own_operator(node, parents):
        return list(constant_mutants(node))
    return []


def solution_lines(source: str) -> set[int]:
    """Line numbers strictly between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` markers."""
    lines, inside = set(), False
    for number_, text in enumerate(source.splitlines(), start=1):
        marker = text.strip()
        if marker == "# BEGIN SOLUTION":
            inside = True
        elif marker == "# END SOLUTION":
            inside = False
        elif inside:
            lines.add(number_)
    return lines


def function_body_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the statements inside function bodies (a module's constants, signatures
    and decorators are configuration, not behaviour a test pins)."""
    return {
        line
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for statement in node.body
        for line in range(statement.lineno, statement.end_lineno + 1)
    }


def parent_map(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def mutable_nodes(tree: ast.Module, lines: set[int]) -> Iterator[int]:
    """Indices (in ``ast.walk`` order) of the nodes on ``lines``, skipping f-strings and
    ``raise`` statements (messages, not behaviour)."""
    skipped = {
        id(n)
        for top in ast.walk(tree)
        if isinstance(top, (ast.JoinedStr, ast.Raise))
        for n in ast.walk(top)
    }
    for index, node in enumerate(ast.walk(tree)):
        if getattr(node, "lineno", None) in lines and id(node) not in skipped:
            yield index


def enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    names = []
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return ".".join(reversed(names)) or "<module>"


def replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
    raise ValueError(f"{ast.dump(old)[:60]} is not a child of {type(parent).__name__}")


def generate(root: Path, path: str) -> list[Mutant]:
    """Every distinct mutant of ``root / path`` (a no-op edit or a repeat is left out): inside
    its solution regions, or inside its function bodies when it has none."""
    source = (root / path).read_text(encoding="utf-8")
    lines = solution_lines(source) or function_body_lines(ast.parse(source))
    original = ast.unparse(ast.parse(source))
    tree = ast.parse(source)
    nodes, parents = list(ast.walk(tree)), parent_map(tree)
    sites = [
        (index, variant)
        for index in mutable_nodes(tree, lines)
        for variant in range(len(mutations(nodes[index], parents)))
    ]
    mutants, seen, keys = [], {original}, Counter()
    for index, variant in sites:
        tree = ast.parse(source)
        node = list(ast.walk(tree))[index]
        parents = parent_map(tree)
        operator, new = mutations(node, parents)[variant]
        key = f"{enclosing_function(node, parents)}: {ast.unparse(node)} -> {ast.unparse(new)}"
        replace_child(parents[node], node, new)
        mutated = ast.unparse(ast.fix_missing_locations(tree))
        if mutated in seen:
            continue
        seen.add(mutated)
        keys[key] += 1
        key += f" #{keys[key]}" if keys[key] > 1 else ""
        mutants.append(Mutant(path, f"{key} [{operator}]", operator, node.lineno, mutated))
    return mutants
