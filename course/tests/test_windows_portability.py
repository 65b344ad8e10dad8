"""What ships to students must run on Windows too, as far as reading the code can tell: every
text file is opened as UTF-8 (Windows' default encoding is the locale's, cp1252 on most
machines), no POSIX-only module or function is used without a guard, and no path is a string
built with "/" (pathlib builds them, and ``Path.as_uri`` file URLs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from course.handout.build import shipped_files
from course.paths import REPO_ROOT

# Modules Windows' Python does not have.
POSIX_MODULES = frozenset(
    {"fcntl", "termios", "tty", "pty", "pwd", "grp", "resource", "posix", "crypt", "syslog"}
)
# Functions and constants of cross-platform modules that Windows' Python lacks.
POSIX_NAMES = frozenset(
    {
        ("os", "fork"),
        ("os", "forkpty"),
        ("os", "getuid"),
        ("os", "geteuid"),
        ("os", "getpgid"),
        ("os", "killpg"),
        ("os", "setsid"),
        ("os", "setpgrp"),
        ("os", "sched_getaffinity"),
        ("os", "register_at_fork"),
        ("os", "uname"),
        ("signal", "SIGALRM"),
        ("signal", "SIGHUP"),
        ("signal", "SIGKILL"),
        ("signal", "SIGPROF"),
        ("signal", "SIGQUIT"),
        ("signal", "SIGUSR1"),
        ("signal", "SIGUSR2"),
        ("signal", "alarm"),
        ("signal", "setitimer"),
        ("signal", "pthread_sigmask"),
    }
)
# An import or name under one of these is guarded: it runs only where it exists.
GUARD_WORDS = ("sys.platform", "os.name", "platform.system", "hasattr", "getattr")
GUARD_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "Exception"})
PATH_FUNCTIONS = frozenset({"open", "Path", "PurePath"})
OPENING_MODULES = frozenset({"io", "codecs", "gzip", "bz2", "lzma"})  # module.open(file, mode)


def shipped_python() -> list[Path]:
    """Both handouts' Python files, and course/handout/submission.py (shipped as make_submission.py)."""
    both = set(shipped_files(REPO_ROOT, "base")) | set(shipped_files(REPO_ROOT, "extension"))
    return sorted({p for p in both if p.suffix == ".py"} | {Path("course/handout/submission.py")})


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def guarded(node: ast.AST, up: dict[ast.AST, ast.AST]) -> bool:
    """Inside a ``try`` that catches its failure, or an ``if`` that tests the platform."""
    child, parent = node, up.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            caught = {ast.unparse(h.type) if h.type else "Exception" for h in parent.handlers}
            if any(name in GUARD_ERRORS for c in caught for name in c.strip("()").split(", ")):
                return True
        if isinstance(parent, ast.If | ast.IfExp) and any(
            word in ast.unparse(parent.test) for word in GUARD_WORDS
        ):
            return True
        child, parent = parent, up.get(parent)
    return False


def text_mode(call: ast.Call, default: str, position: int = 1) -> bool:
    """Whether an ``open``-like call opens text (its mode, given as a constant, has no 'b')."""
    given = call.args[position] if len(call.args) > position else None
    given = next((k.value for k in call.keywords if k.arg == "mode"), given)
    if given is None:
        return "b" not in default
    return not (isinstance(given, ast.Constant) and "b" in str(given.value))


def called_name(call: ast.Call) -> tuple[str, str]:
    """``(owner, name)`` of the called function: ``("", "open")``, ``("os", "fdopen")``..."""
    func = call.func
    if isinstance(func, ast.Name):
        return "", func.id
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return owner, func.attr
    return "", ""


def encoding_problem(call: ast.Call) -> str | None:
    """Text opened without ``encoding=``: the locale's encoding, cp1252 on most Windows."""
    if any(k.arg == "encoding" for k in call.keywords):
        return None
    owner, name = called_name(call)
    method = isinstance(call.func, ast.Attribute)
    texts = any(k.arg in ("text", "universal_newlines") for k in call.keywords)
    if (method and name in ("read_text", "write_text")) or (owner == "subprocess" and texts):
        return f"{name}() without encoding="
    # open(file, mode) and io.open(file, mode), but a Path's own path.open(mode).
    position = 0 if method and owner not in OPENING_MODULES else 1
    if name == "open" and owner != "os" and text_mode(call, "r", position):
        return "open() in text mode without encoding="
    if (owner, name) == ("os", "fdopen") and text_mode(call, "r"):
        return "os.fdopen() in text mode without encoding="
    return None


def path_problem(call: ast.Call, source: str) -> str | None:
    """A path or file URL built as a string with '/', where pathlib would build it."""
    _, name = called_name(call)
    built = [a for a in call.args[:1] if isinstance(a, ast.JoinedStr)]
    built += [a for a in call.args[:1] if isinstance(a, ast.BinOp) and isinstance(a.op, ast.Add)]
    built += [k.value for k in call.keywords if isinstance(k.value, ast.JoinedStr)]
    for node in built:
        text = ast.get_source_segment(source, node) or ""
        if text.lstrip("rfb").strip("\"'").startswith("file://"):
            return f"a file URL built as a string ({text}): use Path.as_uri()"
        if name in PATH_FUNCTIONS and "/" in text:
            return f"a path built as a string with '/' ({text}): use pathlib's /"
    return None


def problems(path: Path, root: Path = REPO_ROOT) -> list[str]:
    source = (root / path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    up = parents(tree)
    found = []
    for node in ast.walk(tree):
        problem = None
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            posix = [n for n in names if n and n.split(".")[0] in POSIX_MODULES]
            problem = f"imports POSIX-only {posix[0]}" if posix and not guarded(node, up) else None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in POSIX_NAMES and not guarded(node, up):
                problem = f"uses POSIX-only {node.value.id}.{node.attr}"
        elif isinstance(node, ast.Call):
            problem = encoding_problem(node) or path_problem(node, source)
        if problem:
            found.append(f"{path}:{node.lineno}: {problem}")
    return found


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_shipped_code_reads_as_windows_portable() -> None:
    files = shipped_python()
    assert len(files) > 50 and Path("tests/adapters.py") in files  # the handouts, both kinds
    assert [problem for path in files for problem in problems(path)] == []


CAUGHT = {
    "text open": ("open(name)", "open() in text mode"),
    "text open with a mode": ("open(name, 'w')", "open() in text mode"),
    "path open": ("path.open()", "open() in text mode"),
    "io open": ("io.open(name, 'w')", "open() in text mode"),
    "read_text": ("path.read_text()", "read_text() without"),
    "subprocess text": ("subprocess.run(cmd, text=True)", "run() without"),
    "fdopen": ("os.fdopen(fd, 'w')", "os.fdopen() in text mode"),
    "posix module": ("import fcntl", "POSIX-only fcntl"),
    "posix from-import": ("from resource import setrlimit", "POSIX-only resource"),
    "posix function": ("os.killpg(group, 9)", "POSIX-only os.killpg"),
    "string path": ("Path(f'{root}/data/x.txt')", "path built as a string"),
    "joined path": ("open(root + '/x.txt', 'rb')", "path built as a string"),
    "file url": ("f(init_method=f'file://{tmp}/store')", "file URL"),
}
PASSED = {
    "binary open": "open(name, 'rb')",
    "binary path open": "path.open('rb')",
    "a function of that name": "read_text(path)",
    "utf-8 open": "open(name, encoding='utf-8')",
    "utf-8 read_text": "path.read_text(encoding='utf-8')",
    "os.open": "os.open(name, os.O_RDONLY)",
    "guarded import": "try:\n    import fcntl\nexcept ImportError:\n    fcntl = None",
    "platform test": "if sys.platform != 'win32':\n    os.killpg(group, 9)",
    "pathlib": "Path(root) / 'data' / 'x.txt'",
    "file url": "f(init_method=(tmp / 'store').as_uri())",
}


@pytest.mark.parametrize("code,expected", CAUGHT.values(), ids=list(CAUGHT))
def test_the_check_catches(tmp_path: Path, code: str, expected: str) -> None:
    (tmp_path / "x.py").write_text(code + "\n", encoding="utf-8")
    found = problems(Path("x.py"), tmp_path)
    assert len(found) == 1 and expected in found[0], found


@pytest.mark.parametrize("code", PASSED.values(), ids=list(PASSED))
def test_the_check_passes(tmp_path: Path, code: str) -> None:
    (tmp_path / "x.py").write_text(code + "\n", encoding="utf-8")
    assert problems(Path("x.py"), tmp_path) == []
