"""The similarity check (course/grading/similarity.py) on disguised copies made here.

Independent solutions: the reference and the three of course/handout/solutions/, written apart.
Disguised copies of the three (course/tests/disguise.py): every name they define renamed,
definitions and methods reordered, re-printed by ast.unparse, docstrings and comments
rewritten. Every copy must be flagged against its original and nothing else; independent
solutions never against each other; the handout's starter code, submitted as it is, matches
nothing. Code written inside tests/adapters.py counts like code in the package; the handout's
own adapters.py does not.
"""

from __future__ import annotations

import csv
import inspect
import shutil
import zipfile
from pathlib import Path

import pytest

from course.grading.similarity import ALL, Match, check, component_adapters
from course.handout.build import plan, render
from course.paths import REPO_ROOT
from course.paths import SOLUTIONS as SOLUTIONS_DIR
from course.tests.disguise import disguise_tree
from tests import adapter_signatures
from tests.lazy_adapters import ASSIGNMENT

pytestmark = pytest.mark.slow  # ~30 s of tokenizing and fingerprinting
SOLUTIONS = ("single_module", "own_names", "upstream_style")
IGNORED = shutil.ignore_patterns("__pycache__")


def copy_code(source: Path, dest: Path, package: Path | None = None) -> None:
    shutil.copytree(package or source / "cs336_basics", dest / "cs336_basics", ignore=IGNORED)
    (dest / "tests").mkdir()
    shutil.copyfile(source / "tests" / "adapters.py", dest / "tests" / "adapters.py")


def zip_folder(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Match], Path]:
    root = tmp_path_factory.mktemp("similarity")
    students, staging = root / "students", root / "staging"
    students.mkdir()
    for name in SOLUTIONS:
        copy_code(SOLUTIONS_DIR / name, students / name)
        disguise_tree(SOLUTIONS_DIR / name, staging / f"copy_{name}")
        zip_folder(staging / f"copy_{name}", students / f"copy_{name}.zip")  # as uploaded
    copy_code(REPO_ROOT, students / "reference", REPO_ROOT / "cs336_basics")
    write_starter_code(students / "starter")
    (students / "broken.zip").write_bytes(b"PK\x03\x04 not a zip")  # refused, skipped
    out = root / "report"
    return check(students, None, out, starter=students / "starter"), out


def write_starter_code(folder: Path) -> None:
    """The handout's starter code (skeletons, support code, adapters) as `make handout` renders
    it, without building the whole handout."""
    for rel, treatment in plan(REPO_ROOT, "base").items():
        in_code = (
            rel.as_posix().startswith("cs336_basics/") or rel.as_posix() == "tests/adapters.py"
        )
        if rel.suffix == ".py" and in_code:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(render(REPO_ROOT, rel, treatment, "base")[0])


def tokenizer_in_adapters(solution: str, dest: Path) -> None:
    """``solution`` whose tests/adapters.py holds a tokenizer, upstream_style's, and builds it in
    get_tokenizer: the package's own tokenizer is never reached (upstream_style's is removed)."""
    copy_code(SOLUTIONS_DIR / solution, dest)
    (dest / "cs336_basics" / "tokenizer.py").unlink(missing_ok=True)
    tokenizer = SOLUTIONS_DIR / "upstream_style" / "cs336_basics" / "tokenizer.py"
    code = tokenizer.read_text(encoding="utf-8").replace("from __future__ import annotations", "")
    adapters = dest / "tests" / "adapters.py"
    text = adapters.read_text(encoding="utf-8")
    text = text.replace("from cs336_basics.tokenizer import Tokenizer\n", "")
    text = text.replace("return ByteLevelCodec(", "return Tokenizer(")
    adapters.write_text(text + "\n\n" + code, encoding="utf-8")


def with_starter_adapters(solution: str, dest: Path, starter: Path) -> None:
    """``solution``'s package with the handout's tests/adapters.py as it ships."""
    copy_code(SOLUTIONS_DIR / solution, dest)
    shutil.copyfile(starter / "tests" / "adapters.py", dest / "tests" / "adapters.py")


def test_code_in_adapters_counts_and_the_handouts_adapters_do_not(tmp_path: Path) -> None:
    students, starter = tmp_path / "students", tmp_path / "starter"
    write_starter_code(starter)
    for solution in ("upstream_style", "own_names"):
        tokenizer_in_adapters(solution, students / f"inline_{solution}")
        with_starter_adapters(solution, students / f"starter_{solution}", starter)
    matches = check(students, None, tmp_path / "report", starter=starter)
    assert flagged_pairs(matches) == {frozenset(("inline_upstream_style", "inline_own_names"))}
    inline = {m.component for m in matches if m.flagged}
    assert "tokenizer" in inline, inline
    handout_only = frozenset(("starter_upstream_style", "starter_own_names"))
    assert not [m for m in matches if {m.first, m.second} == handout_only and m.matched > 0]


def test_without_a_built_handout_the_check_says_how_to_get_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="make handout"):
        check(tmp_path, None, tmp_path / "out", starter=tmp_path / "no-handout")


def flagged_pairs(matches: list[Match]) -> set[frozenset[str]]:
    return {frozenset((m.first, m.second)) for m in matches if m.flagged}


def test_disguise_changes_what_a_reader_sees(tmp_path: Path) -> None:
    source = SOLUTIONS_DIR / "own_names"
    disguise_tree(source, tmp_path / "copy")
    original = (source / "cs336_basics" / "mixing.py").read_text()
    copy = (tmp_path / "copy" / "cs336_basics" / "mixing.py").read_text()
    assert copy != original
    assert "# my own implementation" in copy and "Part of my solution" in copy
    defined = [line.split("(")[0] for line in original.splitlines() if line.startswith("def ")]
    assert defined and not any(f"{d}(" in copy for d in defined)  # every function renamed
    compile(copy, "mixing.py", "exec")


def test_every_disguised_copy_is_flagged_against_its_original_only(run) -> None:
    matches, _ = run
    expected = {frozenset((name, f"copy_{name}")) for name in SOLUTIONS}
    assert flagged_pairs(matches) == expected


def test_copies_are_flagged_on_several_components(run) -> None:
    matches, _ = run
    for name in SOLUTIONS:
        components = {m.component for m in matches if m.flagged and name in (m.first, m.second)}
        assert len(components) >= 2, (name, components)


def test_starter_code_alone_matches_nothing(run) -> None:
    matches, _ = run
    assert not [m for m in matches if "starter" in (m.first, m.second) and m.matched > 0]


def test_reports_rank_every_pair_and_show_matched_regions(run) -> None:
    matches, out = run
    with (out / "similarity.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    similarities = [float(r["similarity"]) for r in rows]
    assert similarities == sorted(similarities, reverse=True)
    assert {r["component"] for r in rows} >= {ALL, "train_bpe", "tokenizer"}
    assert {(r["first"], r["second"]) for r in rows if r["flagged"] == "yes"} == {
        (m.first, m.second) for m in matches if m.flagged
    }
    page = (out / "similarity.html").read_text()
    assert page.count("<table class='pair'>") == sum(m.flagged for m in matches)
    assert "<mark>" in page and "copy_own_names" in page
    assert "broken" not in page


def test_components_come_from_the_cases_adapters() -> None:
    adapters = component_adapters()
    assert adapters["tokenizer"] == {"get_tokenizer"}
    assert adapters["checkpoint"] == {"run_save_checkpoint", "run_load_checkpoint"}
    assert "run_multihead_self_attention_with_rope" in adapters["multihead_self_attention"]


def test_graded_cases_call_only_the_assignments_adapters() -> None:
    """What a run's summary says an unwritten adapter beyond the assignment costs (nothing
    graded, tests/what_counts.py) holds: no graded case calls one."""
    called = set().union(*component_adapters().values())
    assert called <= ASSIGNMENT, sorted(called - ASSIGNMENT)
    documented = {n for n, f in vars(adapter_signatures).items() if inspect.isfunction(f)}
    assert documented >= ASSIGNMENT, sorted(ASSIGNMENT - documented)
