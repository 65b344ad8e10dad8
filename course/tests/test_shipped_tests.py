"""The shipped tests reach student code only through ``tests/adapters.py``, and the adapter
signatures the boundary checker enforces are those of ``tests/adapters.py``."""

from __future__ import annotations

import ast
from pathlib import Path

from course.handout.adapter_signatures import PAIRS, signature_stubs
from course.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
# The snapshot plugin's --snapshot-update hook imports the fixture generator lazily, and says
# so when course/ is absent (the handout); nothing else in tests/ may name course.
ALLOWED = {("snapshots.py", "course.cases.fixtures")}


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_shipped_tests_never_import_the_solution_or_course():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path in {adapters for adapters, _ in PAIRS}:
            continue
        relative = path.relative_to(TESTS).as_posix()
        for module in imported_modules(path):
            root = module.split(".")[0]
            if root in ("cs336_basics", "course") and (relative, module) not in ALLOWED:
                offenders.append(f"tests/{relative} imports {module}")
    assert not offenders, "shipped tests must go through tests/adapters.py:\n" + "\n".join(
        offenders
    )


def test_adapters_import_only_the_solution_and_third_party_packages():
    for adapters, _ in PAIRS:
        modules = imported_modules(adapters)
        assert not {m for m in modules if m.split(".")[0] in ("tests", "course")}, adapters


def test_adapter_signatures_are_current():
    def dumps(source: str) -> list[str]:
        return [ast.dump(ast.parse(stub)) for stub in signature_stubs(source)]

    for adapters, signatures in PAIRS:
        assert dumps(signatures.read_text(encoding="utf-8")) == dumps(
            adapters.read_text(encoding="utf-8")
        ), f"{signatures.name} is stale: run `uv run python -m course.handout.adapter_signatures`"
