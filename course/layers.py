"""The import graph of the project, checked against its layers.

``python -m course.layers`` prints each layer's outside dependencies and exits 1 on a
violation; with ``--import-each`` it also imports every module of ``cs336_basics`` alone, each in a
fresh process (forked from one that has imported only third-party libraries), so a module that
works only after another one was imported is caught. Every ``import`` statement counts, also those inside functions (a lazy import is still a
dependency) and those under ``TYPE_CHECKING`` (so is a type name).

The layers, lowest first; a module may import its own layer and the layers below it:

    core      cs336_basics/*.py            the assignment and what it stands on
    decoding  cs336_basics/variants/decoding/  KV caches, decode steps, cached/batched generation
    variants  cs336_basics/variants/       architecture variants (register themselves)
    hf        cs336_basics/variants/hf/    Hugging Face interop: named builders, checkpoints
    runner    cs336_basics/runner/         CLI, commands, pipeline, stories, encoders
    tooling   course/, tests/,             instructor tooling, the test suite, the reference's
              reference_tests/, benchmarks/  own tests, benchmarks

and there is no cycle of imports among the modules of ``cs336_basics``, ``course``, ``tests``,
``reference_tests`` and ``benchmarks``.

Inside the tooling, ``course/`` is in parts, each a package; a part may import the shared modules
(``course/*.py``), its own modules and the parts listed here, nothing else of ``course``:

    grading   (nothing)                  what ships to Gradescope: never the reference either
    cases     grading                    fixtures, hidden cases, truths
    handout   cases, grading             builds, verifies, packs
    mutation  handout, cases, grading    runs mistakes through the suite or the grader

The shared modules import no part; ``course/tests`` may import anything.
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from course.paths import REPO_ROOT

PACKAGES = ("cs336_basics", "course", "tests", "reference_tests", "benchmarks")
LAYERS = ("core", "decoding", "variants", "hf", "runner", "tooling")
# Folders of copies of the project (student solutions, generated handouts), not its modules.
SKIPPED = ("course/handout/solutions", "course/cases/hidden", "course/cases/truths/data")


PARTS: dict[str, tuple[str, ...]] = {
    "grading": (),
    "cases": ("grading",),
    "handout": ("cases", "grading"),
    "mutation": ("handout", "cases", "grading"),
}
# The Gradescope bundle carries the grading part, the shared modules and the shipped test cases:
# a grading module importing the reference would work here and fail there.
NOT_IN_BUNDLE = ("cs336_basics", "benchmarks")


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "cs336_basics":
        return "tooling"
    if len(parts) > 2 and parts[1] == "variants" and parts[2] in ("decoding", "hf"):
        return parts[2]
    if len(parts) > 1 and parts[1] in ("variants", "runner"):
        return parts[1]
    return "core"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules(root: Path = REPO_ROOT) -> dict[str, Path]:
    """Every Python module of the project's packages, by dotted name."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not any(rel.startswith(skipped + "/") for skipped in SKIPPED):
                modules[module_name(path, root)] = path
    return modules


def imported_names(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """``(dotted name, line)`` of everything ``path`` imports (``from a import b`` gives ``a.b``
    as well as ``a``, since ``b`` may be a submodule); relative imports are resolved."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                # level 1 is ``package`` itself, each further dot one package up
                anchor = package.rsplit(".", node.level - 1)[0]
                base = f"{anchor}.{base}" if base else anchor
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph(root: Path = REPO_ROOT) -> dict[str, dict[str, int]]:
    """``{module: {imported project module: first line}}`` over the project's own modules."""
    modules = project_modules(root)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for name, line in imported_names(path, module):
            if name in modules and name != module:
                edges.setdefault(name, line)
        graph[module] = edges
    return graph


def layer_violations(graph: dict[str, dict[str, int]], root: Path = REPO_ROOT) -> list[str]:
    """Imports that point up the layers (or from ``cs336_basics`` into the tooling)."""
    return forbidden_imports(
        graph,
        root,
        lambda module, target: LAYERS.index(layer_of(target)) <= LAYERS.index(layer_of(module)),
        lambda module, target: (
            f"{layer_of(module)} module {module} imports {layer_of(target)} module {target}"
        ),
    )


def forbidden_imports(
    graph: dict[str, dict[str, int]],
    root: Path,
    allowed: Callable[[str, str], bool],
    describe: Callable[[str, str], str],
) -> list[str]:
    """``"path:line: description"`` for each import of ``graph`` that ``allowed`` refuses."""
    modules = project_modules(root)
    return [
        f"{modules[module].relative_to(root).as_posix()}:{line}: {describe(module, target)}"
        for module, edges in sorted(graph.items())
        for target, line in sorted(edges.items())
        if not allowed(module, target)
    ]


def part_of(module: str) -> str | None:
    """``grading``, ``cases``, ... for a module of a part; ``shared`` for ``course/*.py``;
    None outside ``course`` and for ``course/tests``."""
    parts = module.split(".")
    if parts[0] != "course" or (len(parts) > 1 and parts[1] == "tests"):
        return None
    if len(parts) > 1 and parts[1] in PARTS:
        return parts[1]
    return "shared"


def may_import(module: str, target: str) -> bool:
    part, target_part = part_of(module), part_of(target)
    if part is None:
        return True
    if part == "grading" and target.split(".")[0] in NOT_IN_BUNDLE:
        return False
    if target_part is None:
        return target.split(".")[0] != "course"
    if part == "shared":
        return target_part == "shared"
    return target_part in ("shared", part, *PARTS[part])


def part_violations(graph: dict[str, dict[str, int]], root: Path = REPO_ROOT) -> list[str]:
    """Imports between the parts of ``course`` that ``PARTS`` does not allow."""

    def describe(module: str, target: str) -> str:
        part = part_of(module)
        allowed = ("shared",) if part in ("shared", None) else ("shared", part, *PARTS[part])
        return f"{part} module {module} imports {target} ({part} may import: {', '.join(allowed)})"

    return forbidden_imports(graph, root, may_import, describe)


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def outside_dependencies(graph: dict[str, dict[str, int]]) -> dict[str, set[str]]:
    """For each layer, the other layers its modules import."""
    uses: dict[str, set[str]] = {layer: set() for layer in LAYERS}
    for module, edges in graph.items():
        for target in edges:
            if layer_of(target) != layer_of(module):
                uses[layer_of(module)].add(layer_of(target))
    return uses


IMPORT_EACH = Path(__file__).with_name("import_each.py")  # a program, run by path


def modules_failing_alone(modules: list[str], root: Path = REPO_ROOT) -> list[str]:
    """``"module: error"`` for each of ``modules`` that cannot be imported in a fresh process."""
    environment = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, str(IMPORT_EACH), *modules],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        return [f"the import driver failed: {result.stderr.strip()[-500:]}"]
    return result.stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--import-each", action="store_true", help="also import each cs336_basics module alone"
    )
    args = parser.parse_args(argv)
    graph = import_graph()
    for layer, used in outside_dependencies(graph).items():
        count = sum(layer_of(m) == layer for m in graph)
        print(f"{layer:9} {count:3} modules  imports: {', '.join(sorted(used)) or 'nothing else'}")
    problems = (
        layer_violations(graph)
        + part_violations(graph)
        + ["import cycle: " + " <-> ".join(component) for component in cycles(graph)]
    )
    if args.import_each:
        package = sorted(m for m in graph if m.split(".")[0] == "cs336_basics")
        failing = modules_failing_alone(package)
        print(f"imported alone: {len(package) - len(failing)} of {len(package)} modules")
        problems += [f"does not import alone: {failure}" for failure in failing]
    for problem in problems:
        print(problem, file=sys.stderr)
    print("import graph: " + (f"{len(problems)} problem(s)" if problems else "one-way, no cycles"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
