"""Disguise a copied solution the way students do, for the similarity check's tests.

``disguise_tree(src, dest)`` copies ``cs336_basics/`` and ``tests/adapters.py`` and rewrites
every Python file: every function, class, constant and local variable of the tree gets a new
name (adapters, methods, parameters and attributes keep theirs: the grader, the tests and
libraries reach those by name, so the copy still runs), undecorated functions and methods come
in reverse order (classes, which may subclass each other, stay), the code is re-printed by
``ast.unparse`` (new layout, quotes, parentheses; comments gone), and docstrings and comments are
replaced by new ones.
"""

from __future__ import annotations

import ast
import builtins
import shutil
from pathlib import Path

ADAPTER_PREFIXES = ("run_", "get_")
KEEP = set(dir(builtins)) | {"self", "cls", "__init__", "__call__", "forward", "super"}


class Renamer(ast.NodeTransformer):
    """Renames what the tree itself defines, and nothing the grader or a library reaches by
    name: adapters, methods, parameters and attributes keep theirs, so the copy still runs."""

    def __init__(self, names: set[str], tree: ast.Module) -> None:
        ordered = sorted(names)
        self.new = {name: f"{name[:1]}q{index}_{len(name)}" for index, name in enumerate(ordered)}
        self.modules: set[str] = set()  # names bound to modules of cs336_basics in this file
        self.top_level = {id(node) for node in tree.body}  # methods keep their names

    def rename(self, name: str) -> str:
        return self.new.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.rename(node.id)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        ours = (node.module or "").startswith("cs336_basics") or node.level > 0
        for alias in node.names:
            if ours and alias.name not in self.new:
                self.modules.add(alias.asname or alias.name)  # a module of the package
            elif ours:
                alias.name = self.rename(alias.name)
            if alias.asname:
                alias.asname = self.rename(alias.asname)
        return node

    def visit_Import(self, node: ast.Import) -> ast.Import:
        for alias in node.names:
            if alias.name.startswith("cs336_basics"):
                self.modules.add(alias.asname or alias.name.split(".")[0])
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        self.generic_visit(node)
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.modules | {"cs336_basics"}:
            node.attr = self.rename(node.attr)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        self.generic_visit(node)
        if id(node) in self.top_level:
            node.name = self.rename(node.name)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        self.generic_visit(node)
        node.name = self.rename(node.name)
        return node


def defined_names(tree: ast.Module) -> set[str]:
    """What the file defines at its top level (functions, classes, constants) and the local
    variables of its functions; not parameters, methods or attributes (callers and libraries
    reach those by name)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        for target in ast.walk(node) if isinstance(node, ast.Assign | ast.AnnAssign) else ():
            if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                names.add(target.id)
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            names |= {
                node.id
                for node in ast.walk(function)
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
            }
    return {n for n in names if n not in KEEP and not n.startswith("__")}


def parameters(tree: ast.Module) -> set[str]:
    """Every parameter name of the file: they keep their names everywhere, since a variable
    renamed in one function would otherwise rename another function's parameter uses."""
    return {node.arg for node in ast.walk(tree) if isinstance(node, ast.arg)}


def reorder_and_redocument(body: list[ast.stmt]) -> list[ast.stmt]:
    """Undecorated functions and methods reversed (classes, which may subclass each other,
    and everything else keep their places); new docstrings."""
    slots = [
        i for i, s in enumerate(body) if isinstance(s, ast.FunctionDef) and not s.decorator_list
    ]
    definitions = [body[i] for i in reversed(slots)]
    body = list(body)
    for slot, definition in zip(slots, definitions, strict=True):
        body[slot] = definition
    for statement in body:
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            inner = statement.body
            if (
                inner
                and isinstance(inner[0], ast.Expr)
                and isinstance(inner[0].value, ast.Constant)
            ):
                inner = inner[1:] or [ast.Pass()]
            doc = ast.Expr(ast.Constant("Part of my solution; see the write-up."))
            statement.body = [doc, *reorder_and_redocument(inner)]
    return body


def disguise_source(text: str, names: set[str]) -> str:
    """``text`` disguised, ``names`` (defined anywhere in the tree) renamed."""
    tree = ast.parse(text)
    if (
        tree.body
        and isinstance(tree.body[0], ast.Expr)
        and isinstance(tree.body[0].value, ast.Constant)
    ):
        tree.body = tree.body[1:]
    tree.body = reorder_and_redocument(tree.body)
    tree = Renamer(names, tree).visit(tree)
    lines = []
    for line in ast.unparse(ast.fix_missing_locations(tree)).splitlines():
        if line.lstrip().startswith(("def ", "class ")):
            lines.append(" " * (len(line) - len(line.lstrip())) + "# my own implementation")
        lines.append(line)
    return '"""My submission."""\n' + "\n".join(lines) + "\n"


def disguise_tree(src: Path, dest: Path) -> Path:
    for rel in ("cs336_basics", "tests/adapters.py"):
        source = src / rel
        if source.is_dir():
            shutil.copytree(source, dest / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest / rel)
    paths = sorted(dest.rglob("*.py"))
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in paths]
    names = set().union(*map(defined_names, trees)) - set().union(*map(parameters, trees))
    names = {n for n in names if not n.startswith(ADAPTER_PREFIXES)}  # the grader calls them
    for path in paths:
        path.write_text(disguise_source(path.read_text(encoding="utf-8"), names), encoding="utf-8")
    return dest
