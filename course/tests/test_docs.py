"""The README and docs/*.md are checked like code: every command, module, path and link they show
names something real, and the cheap commands run.

What a doc names is read from its fenced code blocks (shell lines, Python imports) and its inline
code spans; `find_problems` returns one line per thing that does not exist, so a failure says
which doc and what to fix. Commands that take minutes (training, grading, `make fixtures`) are
checked for their names only, never run.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest

from course.paths import REPO_ROOT

REPO = REPO_ROOT
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 220

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
HTML_ANCHOR = re.compile(r'<a id="([^"]+)">')
COMMAND_START = re.compile(r"^(?:[A-Z_0-9]+=\S+ +)*(?:uv run |make |python -m |cs336 |\.ci/run\b)")
REPO_PATH = re.compile(r"^(?:cs336_basics|tests|course|benchmarks|fixtures|docs|\.ci)/[\w./-]*$")
DOTTED_NAME = re.compile(r"^(?:cs336_basics|course|benchmarks)(?:\.\w+)+$")
PLACEHOLDER = re.compile(r"[<>*]|\.\.\.|__pycache__")


# --- extraction ---------------------------------------------------------------------------------


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def inline_spans(text: str) -> list[str]:
    """Inline code outside fenced blocks, whitespace collapsed, table pipes unescaped."""
    prose = FENCE.sub("", text)
    return [" ".join(s.replace("\\|", "|").split()) for s in INLINE_CODE.findall(prose)]


def commands(text: str) -> list[str]:
    """Every shell command shown: lines of unlabelled/sh blocks and inline spans, joined over
    backslash continuations, split at `&&` and `;`, comments dropped."""
    found = []
    for language, body in code_blocks(text):
        if language in ("", "sh", "bash", "console"):
            found += body.replace("\\\n", " ").splitlines()
    found += inline_spans(text)
    pieces = [p.strip() for line in found for p in shell_pieces(line)]
    return [p for p in pieces if COMMAND_START.match(p)]


def shell_pieces(line: str) -> list[str]:
    """``line`` cut at `&&` and `;` outside quotes, up to a `#` comment (shlex splits words but
    keeps no text, and a comment may hold an apostrophe that shlex would take for a quote)."""
    pieces, start, quote, i = [], 0, None, 0
    while i < len(line):
        char = line[i]
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            break
        elif char == ";" or line.startswith("&&", i):
            pieces.append(line[start:i])
            i += 1 if char == ";" else 2
            start = i
            continue
        i += 1
    return [*pieces, line[start:i]]


def split_command(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    while words and re.match(r"^[A-Z_0-9]+=", words[0]):  # leading VAR=value assignments
        words.pop(0)
    return words


# --- what exists --------------------------------------------------------------------------------


@cache
def make_targets(makefile: Path) -> frozenset[str]:
    return frozenset(re.findall(r"^([\w-]+):", makefile.read_text(), re.MULTILINE))


@cache
def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def registered_markers() -> set[str]:
    entries = pyproject()["tool"]["pytest"]["ini_options"]["markers"]
    return {entry.split(":")[0] for entry in entries}


def module_source(name: str) -> Path | None:
    """The file of module ``name`` if it can be imported (without importing it)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else Path()


def defines(source: Path, name: str) -> bool:
    """Whether a module's top level defines or imports ``name`` (a class, function, constant)."""
    submodule = source.name == "__init__.py" and (source.parent / f"{name}.py").exists()
    if source == Path() or submodule:
        return True  # a namespace/compiled module, or ``name`` is a submodule of a package
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        else:
            continue
        if name in names:
            return True
    return False


def dotted_name_problem(dotted: str) -> str | None:
    """``pkg.module.attr``: the longest importable prefix must define the next name."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        source = module_source(".".join(parts[:cut]))
        if source is None:
            continue
        if cut == len(parts) or defines(source, parts[cut]):
            return None
        return f"`{dotted}`: module {'.'.join(parts[:cut])} defines no {parts[cut]}"
    return f"`{dotted}`: no such module"


def repo_path_exists(repo: Path, rel: str) -> bool:
    return (repo / rel).exists()


@cache
def cli_help(script: str, *argv: str) -> str:
    """The ``--help`` text of a console script (in process: the entry point with that argv)."""
    module_name, function = pyproject()["project"]["scripts"][script].split(":")
    entry = getattr(importlib.import_module(module_name), function)
    out = io.StringIO()
    saved = sys.argv
    sys.argv = [script, *argv, "--help"]
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            contextlib.suppress(SystemExit),
        ):
            entry()
    finally:
        sys.argv = saved
    return out.getvalue()


def subcommands(script: str) -> set[str]:
    """argparse lists each subcommand on its own line, indented four spaces, under COMMAND."""
    return set(re.findall(r"^    ([a-z][\w-]*)\s", cli_help(script), re.MULTILINE))


def mentions_flag(help_text: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


# --- checks -------------------------------------------------------------------------------------


def python_code_problems(code: str) -> list[str]:
    """Every import in a Python snippet names a real module and, for `from`, a real name."""
    try:
        statements = ast.parse(code).body
    except SyntaxError:  # a fragment (indented, or with `...`): its import lines alone
        lines = [line for line in code.splitlines() if re.match(r"(from|import) \w", line)]
        statements = ast.parse("\n".join(lines)).body
    problems = []
    for node in statements:
        if isinstance(node, ast.Import):
            problems += [
                f"import {a.name}: no such module" for a in node.names if not module_source(a.name)
            ]
        elif isinstance(node, ast.ImportFrom) and node.module:
            problems += filter(
                None, (dotted_name_problem(f"{node.module}.{a.name}") for a in node.names)
            )
    return problems


def pytest_problems(args: list[str], repo: Path) -> list[str]:
    """Paths exist and `-m` uses registered markers (`-k` needs a collection: the slow test)."""
    problems, values_of = [], {"-k", "-m", "-p", "-n", "--jobs"}
    for i, word in enumerate(args):
        if word.startswith("-") or (i and args[i - 1] in values_of) or REPO_PATH.match(word):
            continue  # an option, its value, or a repo path (checked with every command's paths)
        if not (repo / word.split("::")[0]).exists():
            problems.append(f"pytest path {word} does not exist")
    for i, word in enumerate(args[:-1]):
        if word == "-m":
            unknown = (
                set(re.findall(r"\w+", args[i + 1])) - {"and", "or", "not"} - registered_markers()
            )
            problems += [f"pytest -m {args[i + 1]!r}: no marker {m!r}" for m in sorted(unknown)]
    return problems


def cli_problems(script: str, args: list[str]) -> list[str]:
    """A subcommand the script has, and flags its (sub)command's --help lists."""
    words = [w for w in args if not w.startswith("-")]
    has_subcommands = bool(subcommands(script))
    sub = words[0] if has_subcommands and words else None
    if has_subcommands and (sub is None or PLACEHOLDER.search(sub)):
        return []  # `cs336 --help` alone, or `cs336 <command>` standing for any
    if sub is not None and sub not in subcommands(script):
        return [
            f"`{script} {sub}`: no such subcommand (has {', '.join(sorted(subcommands(script)))})"
        ]
    help_text = cli_help(script, *([sub] if sub else []))
    flags = {w.split("=")[0] for w in args if w.startswith("--") and w != "--help"}
    name = f"{script} {sub}" if sub else script
    return [f"`{name}` has no flag {f}" for f in sorted(flags) if not mentions_flag(help_text, f)]


def uv_run_problems(args: list[str], repo: Path) -> list[str]:
    tool, rest = args[0], args[1:]
    if tool == "python":
        return python_problems(rest)
    if tool == "pytest":
        return pytest_problems(rest, repo)
    if tool in pyproject()["project"]["scripts"]:
        return cli_problems(tool, rest)
    if not (Path(sys.executable).parent / tool).exists():
        return [f"uv run {tool}: no such program in the environment"]
    return python_problems(rest[rest.index("-m") :]) if "-m" in rest else []  # torchrun -m M


def python_problems(args: list[str]) -> list[str]:
    if args[:1] == ["-m"] and len(args) > 1:
        return [] if module_source(args[1]) else [f"python -m {args[1]}: no such module"]
    if args[:1] == ["-c"] and len(args) > 1:
        return python_code_problems(args[1])
    return []


def command_problems(command: str, repo: Path) -> list[str]:
    words = split_command(command)
    if not words:
        return []
    paths = [w for w in words if REPO_PATH.match(w) and not PLACEHOLDER.search(w)]
    problems = [f"path {p} does not exist" for p in paths if not repo_path_exists(repo, p)]
    if words[0] == "make":
        targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
        known = make_targets(repo / "Makefile")
        problems += [f"make {t}: no such target in the Makefile" for t in targets if t not in known]
    elif words[:2] == ["uv", "run"] and len(words) > 2:
        problems += uv_run_problems(words[2:], repo)
    elif words[0] == "python":
        problems += python_problems(words[1:])
    elif words[0] == "cs336":  # prose names the command without `uv run`
        problems += cli_problems("cs336", words[1:])
    return [f"{command!r}: {p}" for p in problems]


def anchors(markdown: Path) -> set[str]:
    """GitHub's heading ids (lowercased, punctuation dropped, spaces to hyphens) and <a id>s."""
    text = FENCE.sub("", markdown.read_text())
    slugs = {
        re.sub(r"[^\w\- ]", "", h.replace("`", "").lower()).replace(" ", "-")
        for h in HEADING.findall(text)
    }
    return slugs | set(HTML_ANCHOR.findall(text))


def link_problems(doc: Path, text: str) -> list[str]:
    problems = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            problems.append(f"link {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"link {target}: no heading #{anchor} in {linked.name}")
    return problems


def find_problems(doc: Path, repo: Path = REPO) -> list[str]:
    """Everything ``doc`` names that does not exist, one line each."""
    text = doc.read_text()
    problems = link_problems(doc, text)
    for command in commands(text):
        problems += command_problems(command, repo)
    for language, body in code_blocks(text):
        if language == "python":
            problems += python_code_problems(body)
    for span in inline_spans(text):
        if (
            REPO_PATH.match(span)
            and not PLACEHOLDER.search(span)
            and not repo_path_exists(repo, span)
        ):
            problems.append(f"path {span} does not exist")
        elif DOTTED_NAME.match(span):
            problems += filter(None, [dotted_name_problem(span)])
    return [f"{doc.name}: {p}" for p in problems]


# --- the tests ----------------------------------------------------------------------------------


def test_the_readme_is_a_front_door():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_module_path_and_link_in_the_docs_exists(doc):
    assert find_problems(doc) == []


def test_commands_are_read_from_blocks_and_inline_code():
    text = (
        'Run `make demo` or `uv run pytest -k "a or b"`; see `cs336_basics/x.py`.\n'
        "| `uv run cs336 encode \\| x` | table |\n"
        "```sh\n"
        "uv run cs336 train --config c.toml \\\n"
        "    --resume          # continue\n"
        "make fixtures && git diff --exit-code fixtures/\n"
        "```\n"
        "```python\nimport os\n```\n"
        "```\nuv run not-a-shell-block-but-unlabelled\n```\n"
    )
    assert commands(text) == [
        "uv run cs336 train --config c.toml      --resume",
        "make fixtures",
        "uv run not-a-shell-block-but-unlabelled",
        "make demo",
        'uv run pytest -k "a or b"',
        "uv run cs336 encode | x",
    ]
    assert split_command("CS336_ISOLATION=container uv run cs336 --help # why") == [
        "uv",
        "run",
        "cs336",
        "--help",
    ]


def test_a_broken_readme_is_reported(tmp_path):
    """The checker is only worth something if it fails: each kind of mistake is named."""
    (tmp_path / "Makefile").write_text((REPO / "Makefile").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Grading steps\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Broken\n\n"
        "[ok](docs/guide.md#grading-steps) [gone](docs/missing.md) [bad anchor](docs/guide.md#nope)\n\n"
        "```sh\n"
        "make handout                      # real\n"
        "make no-such-target\n"
        "uv run python -m course.cases.checksums  # real\n"
        "uv run python -m course.no_such_module\n"
        "uv run cs336 train --max-steps 3  # real\n"
        "uv run cs336 no-such-subcommand\n"
        "uv run cs336 train --no-such-flag\n"
        "uv run pytest docs/guide.md -m 'not slow'  # real path, real marker\n"
        "uv run pytest tests/no_such_test.py -m no_such_marker\n"
        'uv run python -c "from cs336_basics.linear import NoSuchThing"\n'
        "```\n\n"
        "```python\nfrom cs336_basics.rope import RotaryPositionalEmbedding\nimport no_such_package\n```\n\n"
        "Also `docs/guide.md`, `docs/gone.md`, `cs336_basics.linear.Linear` and `cs336_basics.linear.Nope`.\n"
    )
    problems = find_problems(readme, repo=tmp_path)
    expected = [
        "link docs/missing.md: no such file",
        "link docs/guide.md#nope: no heading #nope in guide.md",
        "make no-such-target: no such target",
        "python -m course.no_such_module: no such module",
        "`cs336 no-such-subcommand`: no such subcommand",
        "`cs336 train` has no flag --no-such-flag",
        "path tests/no_such_test.py does not exist",
        "no marker 'no_such_marker'",
        "module cs336_basics.linear defines no NoSuchThing",
        "import no_such_package: no such module",
        "path docs/gone.md does not exist",
        "module cs336_basics.linear defines no Nope",
    ]
    for message in expected:
        assert sum(message in p for p in problems) == 1, (message, problems)
    assert len(problems) == len(expected), "\n".join(problems)


def _cheap_commands() -> list[str]:
    """The doc commands that finish in seconds and change nothing, plus each subcommand's --help."""
    shown = {c.split(" #")[0].strip() for doc in DOCS for c in commands(doc.read_text())}
    shown = {f"uv run {c}" if c.startswith("cs336 ") else c for c in shown}
    cheap = {
        c for c in shown if c.endswith("--help") or c == "uv run python -m course.cases.checksums"
    }
    return sorted(cheap | {f"uv run cs336 {sub} --help" for sub in subcommands("cs336")})


@pytest.mark.slow
@pytest.mark.parametrize("command", _cheap_commands())
def test_the_cheap_commands_run(command):
    done = subprocess.run(
        command, shell=True, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


def _pytest_invocations() -> list[list[str]]:
    shown = [split_command(c) for doc in DOCS for c in commands(doc.read_text())]
    return [w[3:] for w in shown if w[:3] == ["uv", "run", "pytest"]]


def unmatched_keywords(expression: str, collected_ids: str) -> list[str]:
    """The words of a `-k` expression that match no collected test id (pytest matches
    case-insensitive substrings of names)."""
    words = set(re.findall(r"\w+", expression.lower())) - {"and", "or", "not"}
    return [
        f"pytest -k {expression!r}: no test matches {w!r}"
        for w in sorted(words)
        if w not in collected_ids
    ]


def test_a_keyword_no_test_has_is_reported():
    ids = "tests/test_rope.py::test_rope_matches_complex\ntests/test_nn.py::test_silu[bfloat16]\n"
    assert unmatched_keywords('rope or "silu"', ids) == []
    assert unmatched_keywords("ROPE and not swiglu", ids) == [
        "pytest -k 'ROPE and not swiglu': no test matches 'swiglu'"
    ]


@pytest.mark.slow
def test_every_pytest_selection_in_the_docs_selects_tests():
    """Each word of a `-k` expression matches some test (pytest matches case-insensitive
    substrings of names), and every option is one pytest (with our plugins) has."""
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    collected = subprocess.run(
        [*run, "--collect-only", "-q", "-m", ""], cwd=REPO, capture_output=True, text=True
    )
    assert collected.returncode == 0, collected.stdout[-2000:]
    ids = collected.stdout.lower()
    options = subprocess.run([*run, "--help"], cwd=REPO, capture_output=True, text=True).stdout
    problems = []
    for args in _pytest_invocations():
        for i, word in enumerate(args):
            if word.startswith("--") and not mentions_flag(options, word.split("=")[0]):
                problems.append(f"pytest {' '.join(args)}: no option {word}")
            if i and args[i - 1] == "-k":
                problems += unmatched_keywords(word, ids)
    assert problems == []
