"""Graded modules as skeletons: the contract of a module without its implementation.

``make_skeleton(source)`` keeps, in the original text and order,

- the module docstring and the imports the skeleton still uses (``from __future__`` always);
- every public class and function, with its comments, decorators, signature and docstring; each
  function or method body becomes ``raise NotImplementedError``;
- class-level fields (dataclass fields, buffers' annotations).

Given ``used_elsewhere`` (the names the shipped code around the module mentions: adapters,
support modules, tests), a top-level definition or constant, and a class-level ALL-CAPS
constant, ships only where that code or the kept code refers to it: the reference's own helpers
and internal tuning (cache sizes, chunk sizes, sentinel ranks) are not the contract.

Private (underscore) helpers are left out, so how a student organises their internals is their
own choice; a private name the kept code still refers to (a default value, a base class) stays.
Statements the skeleton cannot classify (module-level code with side effects) are refused with
their line, rather than silently dropped or shipped.
"""

from __future__ import annotations

import ast
import contextlib
import tokenize
from collections.abc import Iterator

STUB = "raise NotImplementedError"
# The comment lines that drive the handout builder (``# BEGIN SOLUTION``, ``# END SOLUTION``).
HANDOUT_MARKERS = ("# BEGIN ", "# END ")
# A line longer than this gets a parenthesised, one-name-per-line import (ruff's style).
LINE_LENGTH = 100

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
ASSIGNMENTS = (ast.Assign, ast.AnnAssign)
IMPORTS = (ast.Import, ast.ImportFrom)


class SkeletonError(ValueError):
    """A graded module holds something that has no place in a skeleton."""


# Hooks with a working inherited default (printing, pickling, copying): a stub that raises would
# break them for a student who has no reason to write one, so skeletons leave them out.
DEFAULTED_HOOKS = frozenset(
    {
        "__repr__",
        "__str__",
        "__format__",
        "__hash__",
        "__sizeof__",
        "__reduce__",
        "__reduce_ex__",
        "__getstate__",
        "__setstate__",
        "__copy__",
        "__deepcopy__",
        "__dir__",
        "extra_repr",
    }
)


def is_private(name: str) -> bool:
    """Underscore names other than dunders, and hooks that work without the student's code."""
    dunder = name.startswith("__") and name.endswith("__")
    return (name.startswith("_") and not dunder) or name in DEFAULTED_HOOKS


def is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def is_type_checking_block(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return name == "TYPE_CHECKING" and not node.orelse


def is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)


def bound_names(node: ast.stmt) -> list[str]:
    """Names a top-level definition or assignment binds."""
    if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def interface_nodes(node: ast.stmt, used: frozenset[str] | None = None) -> Iterator[ast.AST]:
    """The parts of a kept statement that survive in the skeleton (bodies do not)."""
    if isinstance(node, FUNCTIONS):
        yield from node.decorator_list
        yield node.args
        if node.returns is not None:
            yield node.returns
    elif isinstance(node, ast.ClassDef):
        yield from node.decorator_list
        yield from node.bases
        yield from node.keywords
        for member in kept_members(node, used):
            yield from interface_nodes(member, used)
    else:
        yield node


def names_in(nodes: Iterator[ast.AST]) -> set[str]:
    """Every name read in ``nodes``, including inside string annotations such as ``"Tokenizer"``."""
    found: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                # A jaxtyping shape such as "batch seq d_model" is not an expression.
                with contextlib.suppress(SyntaxError):
                    found |= names_in(iter([ast.parse(node.value.strip(), mode="eval")]))
    return found


def is_constant(name: str) -> bool:
    return name.isupper()


def kept_members(cls: ast.ClassDef, used: frozenset[str] | None = None) -> list[ast.stmt]:
    """Class members the skeleton keeps: public (and dunder) methods, nested classes, fields,
    and the constants code outside the module refers to."""
    kept = []
    for member in cls.body:
        if is_docstring(member) or isinstance(member, ast.Pass):
            continue
        if isinstance(member, (*FUNCTIONS, ast.ClassDef)):
            if not is_private(member.name):
                kept.append(member)
        elif isinstance(member, ASSIGNMENTS):
            names = bound_names(member)
            internal = used is not None and all(is_constant(n) and n not in used for n in names)
            if not internal and not all(is_private(name) for name in names):
                kept.append(member)
        elif isinstance(member, ast.Expr) and isinstance(member.value, ast.Constant):
            continue  # a bare `...`
        else:
            raise SkeletonError(
                f"line {member.lineno}: class {cls.name} holds a {type(member).__name__} "
                "statement; a skeleton keeps only methods, nested classes and fields"
            )
    return kept


class _Source:
    """The original text, cut by AST positions."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)

    def text(self, first_line: int, last_line: int) -> str:
        """Whole lines ``first_line..last_line`` (1-based, inclusive)."""
        return "".join(self.lines[first_line - 1 : last_line])

    def indent(self, line: int) -> str:
        text = self.lines[line - 1]
        return text[: len(text) - len(text.lstrip())]

    def start(self, node: ast.stmt) -> int:
        """First line of ``node`` with its decorators and the comment lines right above it."""
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        indent = self.indent(first)
        while first > 1 and self.lines[first - 2].startswith(indent + "#"):
            if self.lines[first - 2].strip().startswith(HANDOUT_MARKERS):
                break  # the end of a solution region above is not this node's comment
            first -= 1
        return first

    def header(self, node: Definition) -> str:
        """Comments, decorators and the ``def``/``class`` line(s) up to and including the colon."""
        line, column = self._colon(node)
        head = self.text(self.start(node), line - 1) + self.lines[line - 1][: column + 1]
        return head.rstrip() + "\n"

    def _colon(self, node: Definition) -> tuple[int, int]:
        """Position of the colon that ends the signature (the first one outside brackets)."""
        depth = 0
        remaining = iter(self.lines[node.lineno - 1 :])
        for token in tokenize.generate_tokens(lambda: next(remaining, "")):
            if token.type != tokenize.OP:
                continue
            if token.string in ("(", "[", "{"):
                depth += 1
            elif token.string in (")", "]", "}"):
                depth -= 1
            elif token.string == ":" and depth == 0:
                return node.lineno + token.start[0] - 1, token.start[1]
        raise SkeletonError(f"line {node.lineno}: no colon after the signature of {node.name}")

    def body_indent(self, node: Definition) -> str:
        first = node.body[0]
        if first.lineno > self._colon(node)[0]:
            return self.indent(first.lineno)
        return self.indent(node.lineno) + "    "

    def docstring(self, node: Definition | ast.Module, indent: str) -> str:
        if not node.body or not is_docstring(node.body[0]):
            return ""
        first = node.body[0]
        if self.lines[first.lineno - 1].strip().startswith(("def ", "class ", "async ")):
            return indent + ast.get_source_segment("".join(self.lines), first) + "\n"
        return self.text(first.lineno, first.end_lineno)


def _render_function(source: _Source, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    indent = source.body_indent(node)
    return source.header(node) + source.docstring(node, indent) + f"{indent}{STUB}\n"


def _render_class(source: _Source, node: ast.ClassDef, used: frozenset[str] | None) -> str:
    indent = source.body_indent(node)
    parts = [source.header(node) + source.docstring(node, indent)]
    members = kept_members(node, used)
    previous: ast.stmt | None = node.body[0] if is_docstring(node.body[0]) else None
    for member in members:
        if previous is not None:
            parts.append("\n" * _blank_lines(source, previous, member, top_level=False))
        parts.append(_render(source, member, used))
        previous = member
    if previous is None:
        parts.append(f"{indent}pass\n")
    return "".join(parts)


def _render(source: _Source, node: ast.stmt, used: frozenset[str] | None) -> str:
    if isinstance(node, FUNCTIONS):
        return _render_function(source, node)
    if isinstance(node, ast.ClassDef):
        return _render_class(source, node, used)
    return source.text(source.start(node), node.end_lineno)


def _blank_lines(source: _Source, previous: ast.stmt, node: ast.stmt, top_level: bool) -> int:
    if isinstance(previous, (*FUNCTIONS, ast.ClassDef)) or isinstance(
        node, (*FUNCTIONS, ast.ClassDef)
    ):
        return 2 if top_level else 1
    between = source.lines[previous.end_lineno : source.start(node) - 1]
    return 1 if any(not line.strip() for line in between) else 0


def _render_import(node: ast.Import | ast.ImportFrom, used: set[str]) -> str | None:
    """The import limited to the names ``used`` (None when none is), on one line if it fits."""
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        kept = node.names
    else:
        kept = [a for a in node.names if (a.asname or a.name.split(".")[0]) in used]
    if not kept:
        return None
    names = [a.name + (f" as {a.asname}" if a.asname else "") for a in kept]
    if isinstance(node, ast.Import):
        return "".join(f"import {name}\n" for name in names)
    module = "." * node.level + (node.module or "")
    line = f"from {module} import {', '.join(names)}\n"
    if len(line) <= LINE_LENGTH + 1:
        return line
    return f"from {module} import (\n" + "".join(f"    {name},\n" for name in names) + ")\n"


def _render_imports(source: _Source, statements: list[ast.stmt], used: set[str]) -> str:
    """The imports still used, grouped as in the original (a blank line between groups)."""
    parts: list[str] = []
    previous: ast.stmt | None = None
    for node in statements:
        if isinstance(node, IMPORTS):
            rendered = _render_import(node, used)
        else:  # `if TYPE_CHECKING:` holding imports
            inner = [_render_import(n, used) for n in node.body if isinstance(n, IMPORTS)]
            block = "".join(
                f"    {line}" for text in inner if text for line in text.splitlines(True)
            )
            rendered = f"if {ast.unparse(node.test)}:\n{block}" if block else None
        if rendered:
            if previous is not None:
                parts.append("\n" * _blank_lines(source, previous, node, top_level=True))
            parts.append(rendered)
            previous = node
    return "".join(parts)


def _split_module(tree: ast.Module) -> tuple[list[ast.stmt], dict[str, ast.stmt], list[ast.stmt]]:
    """``(imports, definitions by name, definitions in order)``; refuses anything else."""
    imports: list[ast.stmt] = []
    by_name: dict[str, ast.stmt] = {}
    ordered: list[ast.stmt] = []
    body = tree.body[1:] if tree.body and is_docstring(tree.body[0]) else tree.body
    for node in body:
        if isinstance(node, IMPORTS):
            imports.append(node)
        elif isinstance(node, ast.If) and is_type_checking_block(node):
            if not all(isinstance(n, IMPORTS) for n in node.body):
                raise SkeletonError(
                    f"line {node.lineno}: a TYPE_CHECKING block holds more than imports"
                )
            imports.append(node)
        elif isinstance(node, (*FUNCTIONS, ast.ClassDef, *ASSIGNMENTS)):
            ordered.append(node)
            by_name.update((name, node) for name in bound_names(node))
        elif is_main_guard(node):
            continue  # running the module as a script is not part of its contract
        else:
            raise SkeletonError(
                f"line {node.lineno}: module-level {type(node).__name__} statement; a graded "
                "module may hold only imports, definitions and constants"
            )
    return imports, by_name, ordered


def _kept_definitions(
    by_name: dict[str, ast.stmt], ordered: list[ast.stmt], used: frozenset[str] | None
) -> list[ast.stmt]:
    """Public definitions (where ``used`` is given, only those it names), plus the private
    ones and constants that kept code still refers to."""

    def wanted(name: str) -> bool:
        return not is_private(name) and (used is None or name in used)

    kept = {id(n) for n in ordered if any(wanted(name) for name in bound_names(n))}
    pending = [n for n in ordered if id(n) in kept]
    while pending:
        for name in names_in(interface_nodes(pending.pop(), used)):
            node = by_name.get(name)
            if node is not None and id(node) not in kept:
                kept.add(id(node))
                pending.append(node)
    return [n for n in ordered if id(n) in kept]


def make_skeleton(
    source: str, path: str = "<source>", used_elsewhere: frozenset[str] | None = None
) -> str:
    """The skeleton of the graded module ``source`` (see the module docstring);
    ``used_elsewhere``: the names shipped code outside the module refers to."""
    try:
        tree = ast.parse(source, filename=path)
        text = _Source(source)
        imports, by_name, ordered = _split_module(tree)
        definitions = _kept_definitions(by_name, ordered, used_elsewhere)
        parts: list[str] = []
        previous: ast.stmt | None = None
        for node in definitions:
            if previous is not None:
                parts.append("\n" * _blank_lines(text, previous, node, top_level=True))
            parts.append(_render(text, node, used_elsewhere))
            previous = node
    except SkeletonError as error:
        raise SkeletonError(f"{path}: {error}") from None
    body = "".join(parts)
    used = names_in(iter(ast.parse(body).body))
    for block in imports:
        if isinstance(block, ast.If) and _render_imports(text, [block], used):
            used |= names_in(iter([block.test]))
    head = text.docstring(tree, "")
    import_block = _render_imports(text, imports, used)
    sections = [s for s in (head, import_block) if s]
    if body:
        sections.append(body)
    joined = ""
    for index, section in enumerate(sections):
        if index:
            gap = (
                2
                if section is body and isinstance(definitions[0], (*FUNCTIONS, ast.ClassDef))
                else 1
            )
            joined += "\n" * gap
        joined += section
    return joined
