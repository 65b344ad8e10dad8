"""Build the student handouts from the reference solution and ``course/handout/manifest.toml``.

``python -m course.handout.build`` (``make handout``) writes ``dist/handout/`` and
``dist/cs336-basics-handout-<version>.zip``; ``--extensions`` (``make handout-extensions``)
writes ``dist/handout-extensions/`` and ``dist/cs336-basics-extensions-<version>.zip``.

What ships (see the manifest for the lists of modules):

- **base handout**: graded modules of ``cs336_basics/`` as skeletons (see ``course/handout/skeleton.py``:
  signatures, docstrings and fields, every body ``raise NotImplementedError``, private helpers
  left out); support modules complete; nothing else of ``cs336_basics/`` (the variants, for one);
- **extension handout**: the base handout's modules complete, the extension's graded modules as
  skeletons, and the extension's tests (``tests/variants/``), which the base handout leaves out;
- in every other shipped Python file (``tests/adapters.py``) a ``# BEGIN SOLUTION`` ..
  ``# END SOLUTION`` region (a pair of comment lines at the same indentation, inside a function
  body) becomes ``raise NotImplementedError`` at that indentation; in the extension handout
  only the extension's tests keep that treatment, other files ship filled in, markers removed;
- where a file lives decides whether it ships, never what it says (the runner too loads as
  extensions the subpackages of ``cs336_basics/`` a handout ships): ``tests/`` and ``fixtures/``
  ship whole (``tests/variants/`` in the extension handout only); ``reference_tests/`` (the
  reference's own tests), ``course/``, ``benchmarks/`` and ``.ci/`` never do; the README,
  Makefile and a ``HANDOUT_VERSION`` stamp are written for students, and
  ``course/handout/submission.py`` ships as ``make_submission.py`` so ``make submission`` works there.

The build is deterministic: the same commit gives a byte-identical zip.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from course.cases.checksums import write_checksums
from course.handout.skeleton import STUB, SkeletonError, make_skeleton
from course.paths import DIST, HANDOUT, HANDOUT_MANIFEST, REPO_ROOT, relative
from course.paths import RUBRIC as RUBRIC_PATH
from course.project import grader_python, project_version

MANIFEST_FILE = relative(HANDOUT_MANIFEST)
RUBRIC = relative(RUBRIC_PATH)
PACKAGE = "cs336_basics"
BEGIN_MARKER = "# BEGIN SOLUTION"
END_MARKER = "# END SOLUTION"

# Top-level folders that ship (cs336_basics/ filtered by the manifest); top-level files ship too,
# except README.md and the Makefile, which are replaced by student versions.
SHIPPED_DIRS = (PACKAGE, "tests", "fixtures")
INSTRUCTOR_ONLY = (
    "course",
    "reference_tests",
    "benchmarks",
    ".ci",
    "dist",
    "runs",
    "README.md",
    "Makefile",
)
SKIPPED_PARTS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}
# A fixed timestamp (the earliest a zip can hold) keeps the archive byte-identical across builds.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
KINDS = ("base", "extension")


class MarkerError(ValueError):
    """A solution region is malformed (unmatched, nested, or misindented markers)."""


def strip_solutions(source: str, path: str = "<source>", fill: bool = False) -> tuple[str, int]:
    """Replace each solution region of ``source`` by ``raise NotImplementedError``.

    With ``fill``, keep each region's code and drop only its marker lines (a handout in which
    that file ships complete). Returns the new source and the number of regions. Marker lines
    must hold nothing but the marker; ``END`` must sit at the indentation of its ``BEGIN``.
    """
    out: list[str] = []
    regions = 0
    open_at: tuple[int, str] | None = None  # (line number, indentation) of the open region
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        stripped = line.strip()
        indent = line[: len(line) - len(line.lstrip())]
        if stripped == BEGIN_MARKER:
            if open_at is not None:
                raise MarkerError(
                    f"{path}:{number}: nested {BEGIN_MARKER} (open since line {open_at[0]})"
                )
            open_at = (number, indent)
            if not fill:
                out.append(f"{indent}{STUB}\n")
            regions += 1
        elif stripped == END_MARKER:
            if open_at is None:
                raise MarkerError(
                    f"{path}:{number}: {END_MARKER} without a matching {BEGIN_MARKER}"
                )
            if indent != open_at[1]:
                raise MarkerError(
                    f"{path}:{number}: {END_MARKER} is indented differently from its "
                    f"{BEGIN_MARKER} on line {open_at[0]}"
                )
            open_at = None
        elif open_at is None or fill:
            out.append(line)
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at[0]}: {BEGIN_MARKER} is never closed")
    return "".join(out), regions


def check_stub_syntax(stubbed: str, path: str) -> None:
    """A region that is not a run of whole statements leaves invalid Python behind."""
    try:
        ast.parse(stubbed, filename=path)
    except SyntaxError as error:
        raise MarkerError(
            f"{path}:{error.lineno}: stripping solution regions leaves invalid Python near that line ({error.msg}); "
            "a region must hold whole statements of a function body"
        ) from None


def is_instructor_test(path: Path) -> bool:
    """Whether a test-suite file stays with the instructors, decided by where it lives: the suite
    in ``tests/`` ships (``tests/variants/`` in the extension handout only), tests anywhere else
    (``reference_tests/``, ``course/tests/``) never do. ``path`` is relative to the repository
    root, or absolute (its root is then the nearest folder above it holding ``pyproject.toml``)."""
    if path.is_absolute():
        root = next((p for p in path.parents if (p / "pyproject.toml").is_file()), None)
        if root is None:
            raise ValueError(f"{path}: not inside a repository (no pyproject.toml above it)")
        path = path.relative_to(root)
    return path.parts[0] != "tests"


def source_files(root: Path = REPO_ROOT) -> list[Path]:
    """Repository files (relative paths) a handout may draw from: tracked plus untracked-but-not-
    ignored files when ``root`` is a git checkout, else every file outside caches."""
    try:
        listed = (
            subprocess.run(
                ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                cwd=root,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
        candidates = [Path(p) for p in listed if p]
    except (OSError, subprocess.CalledProcessError):
        candidates = [p.relative_to(root) for p in root.rglob("*")]
    return sorted(
        {p for p in candidates if (root / p).is_file() and not SKIPPED_PARTS & set(p.parts)}
    )


class ManifestError(ValueError):
    """``course/handout/manifest.toml`` is malformed or names files that do not exist."""


# What a build raises for a mistake in the repository (a marker, a skeleton, the manifest).
BUILD_ERRORS = (MarkerError, SkeletonError, ManifestError)


@dataclass(frozen=True)
class ManifestSection:
    """One handout's lists of patterns (globs relative to the repository root)."""

    graded: tuple[str, ...] = ()
    support: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()


def load_manifest(root: Path = REPO_ROOT) -> dict[str, ManifestSection]:
    """The manifest's sections by handout kind, checked for unknown sections and keys."""
    path = root / MANIFEST_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ManifestError(f"{MANIFEST_FILE}: {error}") from None
    sections = {}
    for kind in KINDS:
        table = data.pop(kind, {})
        unknown = set(table) - {"graded", "support", "tests"}
        if unknown:
            raise ManifestError(f"{MANIFEST_FILE}: [{kind}] has unknown keys {sorted(unknown)}")
        if not all(
            isinstance(v, list) and all(isinstance(p, str) for p in v) for v in table.values()
        ):
            raise ManifestError(f"{MANIFEST_FILE}: [{kind}] values must be lists of glob strings")
        sections[kind] = ManifestSection(**{key: tuple(value) for key, value in table.items()})
    if data:
        raise ManifestError(f"{MANIFEST_FILE}: unknown sections {sorted(data)}; known: {KINDS}")
    if sections["base"].tests:
        raise ManifestError(
            f"{MANIFEST_FILE}: [base] ships all of tests/; `tests` is for [extension]"
        )
    return sections


def glob_regex(pattern: str) -> re.Pattern:
    """A glob over repository paths as a regex: ``*`` and ``?`` stay inside one folder, ``**``
    spans any number of them (``dir/**`` is everything below ``dir``), the same on every Python."""
    parts = []
    for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
        parts.append(
            {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        )
    return re.compile("".join(parts) + r"\Z")


def resolve(patterns: tuple[str, ...], candidates: set[Path]) -> set[Path]:
    """The ``candidates`` each pattern matches; a pattern matching none is a manifest error."""
    matched: set[Path] = set()
    for pattern in patterns:
        hits = matching((pattern,), candidates)
        if not hits:
            raise ManifestError(f"{MANIFEST_FILE}: {pattern!r} matches no file of the repository")
        matched |= hits
    return matched


def matching(patterns: tuple[str, ...], candidates: set[Path]) -> set[Path]:
    """The ``candidates`` any pattern matches (none is fine)."""
    regexes = [glob_regex(p) for p in patterns]
    return {p for p in candidates if any(r.match(p.as_posix()) for r in regexes)}


@dataclass(frozen=True)
class Selection:
    """The files of one handout kind: graded modules, modules shipped complete, and the test
    files whose solution regions are stripped (the others ship filled in)."""

    graded: set[Path]
    complete: set[Path]
    extension_tests: set[Path]


def select(root: Path, kind: str, candidates: set[Path]) -> Selection:
    manifest = load_manifest(root)
    graded = resolve(manifest["base"].graded, candidates)
    support = resolve(manifest["base"].support, candidates)
    extension = manifest["extension"]
    if kind == "extension":
        # The extension's support wins over its graded globs (its package's registration glue).
        extension_support = resolve(extension.support, candidates)
        support |= graded | extension_support
        graded = resolve(extension.graded, candidates) - extension_support
        extension_tests = resolve(extension.tests, candidates)
    else:
        extension_tests = matching(extension.tests, candidates)
    both = graded & support
    if both:
        raise ManifestError(
            f"{MANIFEST_FILE}: listed as graded and as support: {sorted(map(str, both))}"
        )
    return Selection(graded, support, extension_tests)


def plan(root: Path = REPO_ROOT, kind: str = "base") -> dict[Path, str]:
    """What ships in handout ``kind`` and how: ``{path: treatment}``, where a treatment is

    ``skeleton`` (a graded module), ``strip`` (solution regions become stubs), ``fill``
    (solution regions stay, markers go) or ``copy`` (bytes as they are). A graded module whose
    skeleton would define nothing (none of its names is used by the shipped code) does not ship:
    how a student organises that part is theirs.
    """
    return {
        rel: treatment
        for rel, treatment in full_plan(root, kind).items()
        if treatment != "skeleton" or rel.suffix != ".py" or skeleton_defines(root, rel, kind)
    }


def skeleton_defines(root: Path, rel: Path, kind: str) -> bool:
    skeleton = render(root, rel, "skeleton", kind)[0].decode("utf-8")
    body = ast.parse(skeleton).body
    return any(not isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom)) for node in body)


def full_plan(root: Path, kind: str) -> dict[Path, str]:
    """``plan`` before graded modules with empty skeletons are left out."""
    files = source_files(root)
    chosen = select(root, kind, set(files))
    treatments: dict[Path, str] = {}
    for rel in files:
        top = rel.parts[0]
        if len(rel.parts) == 1:
            if top not in INSTRUCTOR_ONLY:
                treatments[rel] = "copy"
        elif top == PACKAGE:
            if rel in chosen.graded:
                treatments[rel] = "skeleton" if rel.suffix == ".py" else "copy"
            elif rel in chosen.complete:
                treatments[rel] = _solution_treatment(rel, strip=kind == "base")
        elif top == "tests":
            extension_test = rel in chosen.extension_tests
            if kind == "base" and extension_test:
                continue
            treatments[rel] = _solution_treatment(rel, strip=kind == "base" or extension_test)
        elif top in SHIPPED_DIRS:
            treatments[rel] = "copy"
    return treatments


def _solution_treatment(rel: Path, strip: bool) -> str:
    """Python files with solution regions get them stripped or filled in; others are copied."""
    if rel.suffix != ".py":
        return "copy"
    return "strip" if strip else "fill"


def shipped_files(root: Path = REPO_ROOT, kind: str = "base") -> list[Path]:
    """The files that go to students in handout ``kind`` (before stripping)."""
    return sorted(plan(root, kind))


def git_stamp(root: Path = REPO_ROOT) -> tuple[str, str]:
    """``(short commit, commit date)`` of HEAD, ``("unknown", "unknown")`` outside git."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%h %cs"],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        ).stdout.split()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
        return out[0] + ("+dirty" if dirty else ""), out[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown", "unknown"


def changelog(root: Path = REPO_ROOT) -> str:
    """The body of ``course/handout/CHANGELOG.md``: its first heading and its ``## Unreleased`` section
    dropped."""
    path = root / relative(HANDOUT) / "CHANGELOG.md"
    if not path.is_file():
        return "No changes yet.\n"
    text = path.read_text(encoding="utf-8")
    # Released versions only: notes on the next release are still the instructors'.
    text = re.sub(r"^## Unreleased.*?(?=^## |\Z)", "", text, flags=re.MULTILINE | re.DOTALL)
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    return "".join(lines).strip() + "\n"


# The repository's suite runs in worker processes (pyproject.toml's addopts); a handout's runs in
# one, in file order, so the first failure a student reads is the first one the file holds.
PARALLEL_PYTEST_OPTIONS = " -n auto --maxprocesses 4 --dist worksteal"


def student_pyproject(text: str) -> str:
    """The reference ``pyproject.toml`` minus what only makes sense with ``course/`` present, and
    minus the suite's worker processes."""
    text = re.sub(
        r"^# Worker processes:.*\n",
        "",
        text.replace(PARALLEL_PYTEST_OPTIONS, ""),
        flags=re.MULTILINE,
    )
    text = re.sub(r"^cs336-grade\s*=.*\n", "", text, flags=re.MULTILINE)
    return re.sub(r"packages\s*=\s*\[[^\]]*\]", 'packages = ["cs336_basics"]', text)


def student_rubric(path: Path) -> str:
    """The points of each graded component, as ``tests/what_counts.py`` reads them in a handout."""
    with path.open("rb") as file:
        rubric = tomllib.load(file)
    lines = ["# Points of each graded component (the end of `uv run pytest` shows them).\n"]
    for component in rubric.get("component", []):
        lines.append(
            f'\n[[component]]\nname = "{component["name"]}"\npoints = {component["points"]}\n'
        )
    return "".join(lines)


@dataclass
class Handout:
    kind: str
    directory: Path
    zip_path: Path
    version: str
    regions: int
    skeletons: int
    files: int


# Per kind: the output folder under dist/, the zip's name stem, and the README's scope paragraph.
LAYOUT = {
    "base": (
        "handout",
        "cs336-basics-handout",
        "This handout is the assignment: the modules of `cs336_basics/` whose bodies say "
        "`raise NotImplementedError` are yours to write; the others (command line, config "
        "files, plotting, file formats) are given and work once yours do.",
    ),
    "extension": (
        "handout-extensions",
        "cs336-basics-extensions",
        "This is the extension handout: the core model of `cs336_basics/` ships complete, and "
        "the architecture variants in `cs336_basics/variants/` are yours to write, tested by "
        "`tests/variants/` (`uv run pytest tests/variants`).",
    ),
}


def mentioned_names(source: str) -> set[str]:
    """Every name, attribute and imported name ``source`` mentions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name)
    return found


@cache
def names_used_outside(root: Path, kind: str) -> frozenset[str]:
    """The names a graded module's skeleton must keep: those the shipped code that is not a
    skeleton mentions, and those the other skeletons still mention (a signature's type, an
    import they keep), found by growing the set until the skeletons stop asking for more."""
    treatments = full_plan(root, kind)
    sources = {
        rel: (root / rel).read_text(encoding="utf-8") for rel in treatments if rel.suffix == ".py"
    }
    used: set[str] = set()
    for rel, source in sources.items():
        if treatments[rel] != "skeleton":
            used |= mentioned_names(source)
    while True:
        grown = set(used)
        for rel, source in sources.items():
            if treatments[rel] == "skeleton":
                grown |= mentioned_names(make_skeleton(source, str(rel), frozenset(used)))
        if grown == used:
            return frozenset(used)
        used = grown


def render(root: Path, rel: Path, treatment: str, kind: str = "base") -> tuple[bytes, int]:
    """The shipped bytes of ``rel`` under ``treatment``, and the solution regions it had."""
    source = root / rel
    if rel == Path("pyproject.toml"):
        return student_pyproject(source.read_text(encoding="utf-8")).encode(), 0
    if treatment == "copy":
        return source.read_bytes(), 0
    text = source.read_text(encoding="utf-8")
    if treatment == "skeleton":
        return make_skeleton(text, str(rel), names_used_outside(root, kind)).encode(), 0
    fill = treatment == "fill"
    text, regions = strip_solutions(text, str(rel), fill=fill)
    check_stub_syntax(text, str(rel))
    return text.encode(), 0 if fill else regions


def build(
    out_dir: Path = DIST,
    root: Path = REPO_ROOT,
    zip_name: str | None = None,
    kind: str = "base",
) -> Handout:
    """Write handout ``kind`` to ``out_dir/<folder>/`` and its zip; return what was built."""
    folder, stem, scope = LAYOUT[kind]
    version = project_version(root)
    commit, date = git_stamp(root)
    handout_dir = out_dir / folder
    staging = Path(tempfile.mkdtemp(prefix=".handout-", dir=_ensure(out_dir)))
    regions = 0
    try:
        treatments = plan(root, kind)
        for rel, treatment in treatments.items():
            data, count = render(root, rel, treatment, kind)
            regions += count
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(data)
        shutil.copyfile(HANDOUT / "submission.py", staging / "make_submission.py")
        if (root / RUBRIC).is_file():
            (staging / "tests" / "rubric.toml").write_text(student_rubric(root / RUBRIC))
        write_checksums(staging)  # the handout's own tests and fixtures
        stamp = f"{version} (commit {commit}, {date})"
        (staging / "HANDOUT_VERSION").write_text(stamp + "\n")
        # uv (and pyenv) then use the grader's Python minor, whatever else the machine has.
        (staging / ".python-version").write_text(grader_python(root) + "\n")
        template = (HANDOUT / "readme.md").read_text(encoding="utf-8")
        readme = template.replace("{version}", stamp).replace("{scope}", scope)
        (staging / "README.md").write_text(
            readme.replace("{changelog}", changelog(root)), encoding="utf-8"
        )
        shutil.copyfile(HANDOUT / "makefile", staging / "Makefile")
        if handout_dir.exists():
            shutil.rmtree(handout_dir)
        os.replace(staging, handout_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = sorted(p for p in handout_dir.rglob("*") if p.is_file())
    zip_path = out_dir / (zip_name or f"{stem}-{version}.zip")
    write_zip(zip_path, handout_dir, files, prefix="cs336-basics/")
    skeletons = sum(t == "skeleton" for t in treatments.values())
    return Handout(kind, handout_dir, zip_path, stamp, regions, skeletons, len(files))


def write_zip(zip_path: Path, base: Path, files: list[Path], prefix: str = "") -> None:
    """Deterministic zip (sorted entries, fixed timestamps), written atomically."""
    partial = zip_path.with_name(zip_path.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            info = zipfile.ZipInfo(prefix + path.relative_to(base).as_posix(), date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    os.replace(partial, zip_path)


def _ensure(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DIST, help="output folder (default: dist/)")
    parser.add_argument(
        "--extensions",
        action="store_true",
        help="build the extension handout (core complete, variants as skeletons)",
    )
    args = parser.parse_args(argv)
    try:
        handout = build(args.out, kind="extension" if args.extensions else "base")
    except BUILD_ERRORS as error:
        print(f"handout: {error}", file=sys.stderr)
        return 1
    print(
        f"{handout.kind} handout {handout.version}: {handout.files} files, "
        f"{handout.skeletons} graded modules as skeletons, "
        f"{handout.regions} solution regions stripped\n"
        f"  folder: {handout.directory}\n  zip:    {handout.zip_path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
