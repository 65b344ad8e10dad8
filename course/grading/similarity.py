"""Similarity check: which submissions share code, per component, beyond the starter code.

``python -m course.grading.similarity zips/ [--public solutions/] [--out similarity/]``
compares every pair of submissions (zips, unpacked strictly, or folders holding
``cs336_basics/``) and every submission with every known public solution the instructor
collected (``--public``: zips or folders). It writes ``similarity.csv`` (one row per pair and
component, most similar first, with ``flagged``) and ``similarity.html`` (the flagged pairs'
matched regions side by side).

How: a component's code is what its adapters reach in the submission: the adapters named by
the component's cases, then every top-level function and class of ``cs336_basics`` and of
``tests/adapters.py`` their bodies name, transitively, so code a student wrote inside the
adapters counts like code in the package. That code is tokenized and fingerprinted by
``copydetect`` (token k-grams, winnowed, as MOSS does): identifiers, strings, comments and layout
do not count, and fingerprints do not depend on the order of functions. Fingerprints of the
handout's starter code (skeletons, support code and its ``tests/adapters.py``, read from the
built handout: ``make handout``'s ``dist/handout``, or ``--starter``) are removed first, so the
starter code alone, the adapters' shipped signatures and wiring among it, matches nothing. A pair is flagged when, for some component with at
least ``MIN_TOKENS`` fingerprinted tokens on both sides, the matched share of either side is
at least the threshold.
"""

from __future__ import annotations

import argparse
import ast
import html
import inspect
import io
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING

from course.grading.export import write_csv
from course.grading.unpack import UnsafeArchive, unpack_submission
from course.paths import BUILT_HANDOUT, relative
from tests.cases.wire import atomic_write

# copydetect is imported where it is used: it imports matplotlib's pyplot, most of a second that
# every process importing this module (a test process collecting its tests) would pay.
if TYPE_CHECKING:
    from copydetect import CodeFingerprint

NOISE = 25  # copydetect's default noise threshold: matches shorter than 25 tokens never count
GUARANTEE = 25  # every match this long is found (window = GUARANTEE - NOISE + 1)
THRESHOLD = 0.8  # matched share of a component's fingerprinted tokens that flags a pair
MIN_TOKENS = 400  # smaller components (silu, softmax, swiglu) look alike even when written alone
ALL = "(all components)"  # every definition some adapter reaches, each once
SOURCE_LIMIT = 2 * 2**20  # bytes of Python read from one submission folder


@dataclass
class Submission:
    name: str
    public: bool  # a known public solution (compared with students only)
    components: dict[str, str]  # component -> its code


@dataclass
class Match:
    first: str
    second: str
    component: str
    similarity: float  # the larger of the two sides' matched shares
    matched: int  # matched tokens (of the first side)
    sizes: tuple[int, int]  # each side's fingerprinted tokens, starter code excluded
    flagged: bool
    regions: tuple[str, str] = ("", "")  # each side's code, matched regions marked (HTML)


def component_adapters() -> dict[str, set[str]]:
    """The adapter functions each component's cases call (read from the cases' source)."""
    from tests.cases import CASES

    adapters: dict[str, set[str]] = {}
    for (component, _), case in CASES.items():
        adapters.setdefault(component, set()).update(adapters_called(case.call, set()))
    return adapters


def adapters_called(function, seen: set) -> set[str]:
    """``adapters.<name>`` in ``function``, and in the functions of its module it calls."""
    names = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "adapters"
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            helper = function.__globals__.get(node.id)
            same_module = inspect.isfunction(helper) and helper.__module__ == function.__module__
            if same_module and helper not in seen:
                seen.add(helper)
                names |= adapters_called(helper, seen)
    return names


def read_sources(root: Path) -> dict[str, str]:
    """``cs336_basics/**/*.py`` and ``tests/adapters.py`` under ``root`` (no links followed)."""
    files = sorted((root / "cs336_basics").rglob("*.py")) + [root / "tests" / "adapters.py"]
    sources, budget = {}, SOURCE_LIMIT
    for path in files:
        if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
            continue
        text = path.read_bytes()[:budget].decode("utf-8", errors="replace")
        budget -= len(text)
        sources[path.relative_to(root).as_posix()] = text
    return sources


def named_in(node: ast.AST) -> set[str]:
    """Every name a definition mentions: variables, attributes and imported names."""
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            names.add(child.id)
        elif isinstance(child, ast.Attribute):
            names.add(child.attr)
        elif isinstance(child, ast.alias):
            names.add((child.asname or child.name).split(".")[-1])
            names.add(child.name.split(".")[-1])
    return names


def definitions(sources: dict[str, str]) -> tuple[dict, dict]:
    """Top-level functions and classes: of cs336_basics by name, of the adapters by name;
    each as (file, line, node, source)."""
    package: dict[str, list] = {}
    adapters: dict[str, list] = {}
    for rel, text in sources.items():
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # a file that does not parse defines nothing reachable
        table = adapters if rel == "tests/adapters.py" else package
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                segment = ast.get_source_segment(text, node) or ""
                table.setdefault(node.name, []).append((rel, node.lineno, node, segment))
    return package, adapters


def component_code(sources: dict[str, str], wanted: dict[str, set[str]]) -> dict[str, str]:
    """Per component, the code its adapters reach, in ``tests/adapters.py`` (the adapters and
    their helpers: a student may implement a component there) and in the package."""
    package, adapter_file = definitions(sources)
    code = {}
    everything: set[tuple] = set()
    for component, adapter_names in wanted.items():
        frontier, seen = set(adapter_names), set()
        reached: set[tuple] = set()
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            for rel, line, node, segment in adapter_file.get(name, []) + package.get(name, []):
                reached.add((rel, line, segment))
                frontier |= named_in(node)
        code[component] = "\n\n".join(segment for _, _, segment in sorted(reached))
        everything |= reached
    code[ALL] = "\n\n".join(segment for _, _, segment in sorted(everything))
    return code


def fingerprint(label: str, code: str, boilerplate: list[int]) -> CodeFingerprint:
    from copydetect import CodeFingerprint

    window = GUARANTEE - NOISE + 1
    return CodeFingerprint(
        f"{label}.py", NOISE, window, boilerplate, language="python", fp=io.StringIO(code)
    )


def boilerplate_hashes(starter: dict[str, str]) -> list[int]:
    """Every k-gram fingerprint of the starter code (window 1: all of them)."""
    from copydetect import CodeFingerprint

    hashes: set[int] = set()
    for rel, text in starter.items():
        hashes |= set(
            CodeFingerprint(rel, NOISE, 1, language="python", fp=io.StringIO(text)).hashes
        )
    return sorted(hashes)


def load_submissions(folder: Path, public: bool, wanted: dict[str, set[str]]) -> list[Submission]:
    """Every zip (unpacked strictly; a refused one is reported and skipped) and every folder
    holding ``cs336_basics/`` in ``folder``."""
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink() and (entry / "cs336_basics").is_dir():
            found.append(
                Submission(entry.name, public, component_code(read_sources(entry), wanted))
            )
        elif entry.suffix == ".zip" and entry.is_file():
            with tempfile.TemporaryDirectory(prefix="cs336-similarity-") as tmp:
                try:
                    unpack_submission(entry, Path(tmp) / "code")
                except UnsafeArchive as error:
                    print(f"similarity: skipped {entry.name}: {error}", file=sys.stderr)
                    continue
                sources = read_sources(Path(tmp) / "code")
            found.append(Submission(entry.stem, public, component_code(sources, wanted)))
    return found


def marked(code: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    text, _ = highlight_overlap(code, slices, "<mark>", "</mark>", escape_html=True)
    return text


def compare(
    submissions: list[Submission], boilerplate: list[int], threshold: float = THRESHOLD
) -> list[Match]:
    """Every student pair and student-public pair, per component, most similar first."""
    from copydetect import compare_files

    prints = {
        (s.name, component): fingerprint(f"{s.name}/{component}", code, boilerplate)
        for s in submissions
        for component, code in s.components.items()
    }
    matches = []
    for first, second in combinations(submissions, 2):
        if first.public and second.public:
            continue
        for component in sorted(set(first.components) & set(second.components)):
            a, b = prints[first.name, component], prints[second.name, component]
            if min(a.token_coverage, b.token_coverage) == 0:
                continue
            tokens, shares, slices = compare_files(a, b)
            similarity = float(max(shares))
            sizes = (int(a.token_coverage), int(b.token_coverage))
            flagged = similarity >= threshold and min(sizes) >= MIN_TOKENS
            regions = (
                (marked(a.raw_code, slices[0]), marked(b.raw_code, slices[1]))
                if flagged
                else ("", "")
            )
            matches.append(
                Match(
                    first.name,
                    second.name,
                    component,
                    similarity,
                    int(tokens),
                    sizes,
                    flagged,
                    regions,
                )
            )
    return sorted(matches, key=lambda m: (-m.similarity, m.first, m.second, m.component))


CSV_HEADER = ["first", "second", "component", "similarity", "matched_tokens", "sizes", "flagged"]
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Similarity report</title><style>
body {{ font-family: sans-serif; margin: 1em; }}
table.pair {{ width: 100%; table-layout: fixed; border-collapse: collapse; }}
table.pair td {{ vertical-align: top; border: 1px solid #ccc; width: 50%; }}
pre {{ font-size: 11px; white-space: pre-wrap; margin: 0; }}
mark {{ background: #ffb347; }}
</style></head><body>
<h1>Similarity report</h1>
<p>{summary}</p>
{sections}
</body></html>
"""


def write_csv_report(matches: list[Match], path: Path) -> Path:
    rows = [CSV_HEADER] + [
        [
            m.first,
            m.second,
            m.component,
            f"{m.similarity:.3f}",
            m.matched,
            f"{m.sizes[0]}/{m.sizes[1]}",
            "yes" if m.flagged else "",
        ]
        for m in matches
    ]
    return write_csv(path, rows)


def write_html_report(matches: list[Match], path: Path, threshold: float) -> Path:
    """The flagged pairs, each flagged component's code side by side, matches marked."""
    flagged = [m for m in matches if m.flagged]
    sections = []
    for m in flagged:
        first, second = (html.escape(n) for n in (m.first, m.second))
        sections.append(
            f"<h2>{first} &harr; {second}: {html.escape(m.component)} "
            f"({m.similarity:.0%} matched)</h2>\n<table class='pair'><tr><th>{first}</th>"
            f"<th>{second}</th></tr><tr><td><pre>{m.regions[0]}</pre></td>"
            f"<td><pre>{m.regions[1]}</pre></td></tr></table>"
        )
    pairs = sorted({(m.first, m.second) for m in flagged})
    summary = (
        f"{len(pairs)} flagged pair(s): at least {threshold:.0%} of a component's code "
        f"(of at least {MIN_TOKENS} fingerprinted tokens, starter code excluded) matched. "
        "Marked: matched regions. Every pair and component is in similarity.csv."
    )
    text = PAGE.format(summary=html.escape(summary), sections="\n".join(sections) or "<p>none</p>")
    atomic_write(path, text.encode("utf-8"))
    return path


def check(
    submissions: Path,
    public: Path | None,
    out: Path,
    starter: Path = BUILT_HANDOUT,
    threshold: float = THRESHOLD,
) -> list[Match]:
    """The whole command: read, compare, write both reports; return the matches. ``starter``
    is a handout folder (default: the one `make handout` builds), whose code matches nothing."""
    if not (starter / "tests" / "adapters.py").is_file():
        raise ValueError(
            f"no handout at {starter} (its tests/adapters.py is missing): build it with "
            "`make handout`, or name one with --starter"
        )
    wanted = component_adapters()
    found = load_submissions(submissions, False, wanted)
    if public is not None:
        found += load_submissions(public, True, wanted)
    if len(found) < 2:
        raise ValueError(f"fewer than two submissions to compare in {submissions}")
    names = [s.name for s in found]
    if len(set(names)) != len(names):
        raise ValueError(f"submission names repeat (a zip and a folder alike?): {sorted(names)}")
    starter_files = read_sources(starter)
    # The starter's components too, as a submission's are put together: definitions joined
    # without the module-level code between them (the adapters' section imports) make k-grams
    # across each join that the files alone do not hold.
    assembled = component_code(starter_files, wanted)
    boilerplate = boilerplate_hashes(starter_files | {f"({c})": s for c, s in assembled.items()})
    matches = compare(found, boilerplate, threshold)
    out.mkdir(parents=True, exist_ok=True)
    write_csv_report(matches, out / "similarity.csv")
    write_html_report(matches, out / "similarity.html", threshold)
    return matches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="a folder of submission zips or folders")
    parser.add_argument("--public", type=Path, help="known public solutions (zips or folders)")
    parser.add_argument("--out", type=Path, default=Path("similarity"))
    parser.add_argument(
        "--starter",
        type=Path,
        default=BUILT_HANDOUT,
        help=f"the handout's folder (default: {relative(BUILT_HANDOUT)}, `make handout`'s)",
    )
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    args = parser.parse_args(argv)
    for folder in (args.submissions, args.public):
        if folder is not None and not folder.is_dir():
            parser.error(f"not a folder: {folder}")
    try:
        matches = check(args.submissions, args.public, args.out, args.starter, args.threshold)
    except ValueError as error:
        print(f"similarity: {error}", file=sys.stderr)
        return 1
    for m in matches:
        if m.flagged:
            print(f"FLAGGED {m.first} ~ {m.second}: {m.component} {m.similarity:.0%}")
    print(f"wrote {args.out / 'similarity.csv'} and {args.out / 'similarity.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
