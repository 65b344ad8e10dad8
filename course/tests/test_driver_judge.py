"""The driver and the judge without a sandbox: the reference passes every case (public and
hidden), a bare handout fails every case, known mistakes fail their component's cases, the
driver survives exits and prints, and malformed outputs fail cleanly without the judge raising.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch

import tests.adapters as reference
from course.grading.driver import (
    IMPORT_ENDED,
    Worker,
    case_runner,
    load_instances,
    load_student_adapters,
    with_versions,
)
from course.grading.grade import import_report
from course.grading.judge import (
    INPUTS_ROOT,
    case_points,
    hidden_feedback,
    judge_component,
    load_rubric,
)
from course.paths import DRIVER
from course.paths import REPO_ROOT as ROOT
from tests.cases import components
from tests.cases.wire import Caps, write_bundle

RUBRIC = load_rubric()
NAMES = [c.name for c in RUBRIC.components]
ADAPTER_NAMES = [n for n in dir(reference) if n.startswith(("run_", "get_"))]


def drive(adapters, out: Path, names: list[str] = NAMES) -> Path:
    case_runner()(load_instances(INPUTS_ROOT, names, set()), adapters, None, out, 0)
    return out


def score(out: Path, names: list[str] = NAMES) -> dict[str, list]:
    return {name: judge_component(name, out, rubric=RUBRIC) for name in names}


@pytest.fixture(scope="module")
def reference_outputs(tmp_path_factory) -> Path:
    return drive(reference, tmp_path_factory.mktemp("reference"))


def test_rubric_covers_every_component_with_public_and_hidden_cases():
    assert sorted(NAMES) == components()
    assert RUBRIC.total == 64
    assert {"cpu_s", "wall_s", "memory_gib"} <= set(RUBRIC.limits)
    assert {"tiktoken", "tokenizers", "transformers"} <= set(RUBRIC.blocked_packages)
    for component in RUBRIC.components:
        ids = [p.stem for p in (INPUTS_ROOT / component.name).glob("*.json")]
        points = case_points(component, ids)
        hidden = sum(v for k, v in points.items() if "-hidden-" in k)
        assert any("-public-" in i for i in ids) and any("-hidden-" in i for i in ids)
        assert hidden == pytest.approx(component.points)
        assert all(v == 0 for k, v in points.items() if "-public-" in k)


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_reference_passes_every_public_and_hidden_case(reference_outputs):
    for name, results in score(reference_outputs).items():
        failed = [(r.case, r.message) for r in results if not r.passed]
        assert not failed, f"{name}: {failed}"
        assert sum(r.points for r in results) == pytest.approx(RUBRIC.component(name).points)


def stub(behaviour) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{n: behaviour for n in ADAPTER_NAMES})


def test_bare_handout_fails_every_case(tmp_path):
    def not_implemented(*args, **kwargs):
        raise NotImplementedError

    for name, results in score(drive(stub(not_implemented), tmp_path)).items():
        assert all(not r.passed and "NotImplementedError" in r.message for r in results), name
        assert sum(r.points for r in results) == 0


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_plausible_constant_answers_fail_every_case(tmp_path):
    """Outputs of the right kind but wrong values (zeros, empty lists) never pass a case."""

    def zeros(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        return torch.zeros_like(tensors[-1], dtype=torch.float32) if tensors else 0.0

    scores = score(drive(stub(zeros), tmp_path))
    assert sum(r.points for results in scores.values() for r in results) == 0


@pytest.mark.parametrize(
    ("component", "mistake", "failing"),
    [
        ("softmax", "no_max_subtraction", {"large_inputs"}),
        ("cross_entropy", "summed", {"basic", "leading_dims", "large_logits", "gradient"}),
        ("rope", "rotate_half", {"basic", "heads"}),
    ],
)
def test_known_mistakes_fail_public_and_hidden_cases(tmp_path, component, mistake, failing):
    def softmax(x, dim):
        return x.exp() / x.exp().sum(dim, keepdim=True)

    def cross_entropy(logits, targets):
        return reference.run_cross_entropy(logits, targets) * targets.numel()

    def rope(d_k, theta, max_seq_len, x, positions):
        halves = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)  # interleaved read as halves
        return reference.run_rope(d_k, theta, max_seq_len, halves, positions)

    mutant = types.ModuleType("mutant")
    mutant.__dict__.update(vars(reference))
    replacement = {"softmax": softmax, "cross_entropy": cross_entropy, "rope": rope}[component]
    setattr(mutant, f"run_{component}", replacement)
    results = score(drive(mutant, tmp_path, [component]), [component])[component]
    failed = {r.case.split("-")[2] for r in results if not r.passed}
    assert failed == failing
    assert any(r.hidden and not r.passed for r in results)


def corrupt(out: Path, case: str, how: str) -> None:
    """Damage one case's outputs the way a hostile or crashing driver could."""
    json_path, tensor_path = out / f"{case}.json", out / f"{case}.safetensors"
    header = json.loads(json_path.read_text())
    if how == "missing":
        json_path.unlink()
    elif how == "garbage_json":
        json_path.write_bytes(b"\x00\xff{not json")
    elif how == "deep_json":
        json_path.write_text("[" * 100_000 + "]" * 100_000)
    elif how == "huge_json":
        json_path.write_text(json.dumps(header | {"values": {"x": "a" * 5000}}))
    elif how == "symlink":
        json_path.unlink()
        json_path.symlink_to("/etc/passwd")
    elif how == "fifo":
        json_path.unlink()
        os.mkfifo(json_path)
    elif how == "directory":
        json_path.unlink()
        json_path.mkdir()
    elif how == "other_case":
        json_path.write_text(json.dumps(header | {"case": "rope-public-heads"}))
    elif how == "no_tensor_file":
        tensor_path.unlink()
    elif how == "garbage_tensors":
        tensor_path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}" + os.urandom(64))
    elif how in ("int_dtype", "wrong_shape", "nan", "extra_tensor", "not_a_tensor"):
        from safetensors.torch import load_file, save_file

        tensors = load_file(tensor_path)
        out_tensor = tensors["out"]
        tensors["out"] = {
            "int_dtype": out_tensor.round().to(torch.int64),
            "wrong_shape": out_tensor[..., :-1].contiguous(),
            "nan": out_tensor.clone().fill_(float("nan")),
        }.get(how, out_tensor)
        names = sorted(tensors)
        if how == "extra_tensor":
            tensors["sneaky"] = torch.zeros(1)
        if how == "not_a_tensor":
            del tensors["out"]
            names = []
            header["values"]["out"] = [1.0, 2.0]
        save_file(tensors, tensor_path)
        json_path.write_text(json.dumps(header | {"tensors": names}))
    elif how == "raised_status_forged":
        json_path.write_text(json.dumps(header | {"status": "passed"}))


CORRUPTIONS = [
    "missing", "garbage_json", "deep_json", "huge_json", "symlink", "fifo", "directory",
    "other_case", "no_tensor_file", "garbage_tensors", "int_dtype", "wrong_shape", "nan",
    "extra_tensor", "not_a_tensor", "raised_status_forged",
]  # fmt: skip


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_malformed_outputs_fail_only_their_case(tmp_path, how):
    out = drive(reference, tmp_path, ["rope"])
    corrupt(out, "rope-public-basic", how)
    caps = Caps(json_bytes=4096, tensor_bytes=1 << 20)
    results = {r.case: r for r in judge_component("rope", out, rubric=RUBRIC, caps=caps)}
    assert not results["rope-public-basic"].passed
    assert results["rope-public-basic"].message
    assert all(r.passed for case, r in results.items() if case != "rope-public-basic")


def test_hidden_messages_do_not_quote_expected_values(tmp_path):
    def off_by_a_bit(d_in, d_out, weight, x):
        return reference.run_linear(d_in, d_out, weight, x) + 0.01

    mutant = types.SimpleNamespace(run_linear=off_by_a_bit)
    results = judge_component("linear", drive(mutant, tmp_path, ["linear"]), rubric=RUBRIC)
    assert not any(r.passed for r in results)
    for r in results:
        assert ("expected " in r.message) == (not r.hidden), r.message


def write_submission(root: Path, adapters: str) -> Path:
    (root / "cs336_basics").mkdir(parents=True)
    (root / "cs336_basics" / "__init__.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "adapters.py").write_text(textwrap.dedent(adapters))
    return root


def run_driver(
    submission: Path, out: Path, components: str, *options: str
) -> subprocess.CompletedProcess:
    out.mkdir()
    command = [sys.executable, str(DRIVER), "--cases-root", str(ROOT)]
    command += ["--submission", str(submission), "--inputs", str(INPUTS_ROOT)]
    command += ["--component", components, "--out", str(out), *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=submission)


HOSTILE_ADAPTERS = """
import atexit, os, sys
from cs336_basics.only_in_submission import MARK  # the reference (cases root) must not shadow it

atexit.register(lambda: open(os.path.join(sys.argv[sys.argv.index("--out") + 1], "x.json"), "w"))
for name in [m for m in sys.modules if m.startswith("tests")]:
    del sys.modules[name]  # the driver keeps the functions it bound before this ran
sys.path[:] = [p for p in sys.path if "site-packages" in p]

def run_softmax(x, dim):
    print("student output on stdout")
    sys.exit(0)

def run_silu(x):
    raise KeyboardInterrupt

def run_linear(d_in, d_out, weight, x):
    import torch
    return weight  # the wrong shape: fails, but the driver saves it
"""


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_driver_subprocess_survives_exits_interrupts_and_prints(tmp_path):
    submission = write_submission(tmp_path / "submission", HOSTILE_ADAPTERS)
    # Modules the driver needs, shadowed: it imports them before the student's folder is on
    # the path, so these never run.
    for shadow in ("safetensors.py", "numpy.py", "json.py"):
        (submission / shadow).write_text("raise SystemExit('shadowed')\n")
    (submission / "cs336_basics" / "only_in_submission.py").write_text("MARK = 1\n")
    result = run_driver(submission, tmp_path / "out", "softmax,silu,linear")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""  # the student's print went to stderr
    assert "student output on stdout" in result.stderr
    assert not (tmp_path / "out" / "x.json").exists()  # atexit handlers never ran
    scores = score(tmp_path / "out", ["softmax", "silu", "linear"])
    messages = {r.case: r.message for results in scores.values() for r in results}
    assert all(r.points == 0 for results in scores.values() for r in results)
    assert "SystemExit" in messages["softmax-public-basic"]
    assert "KeyboardInterrupt" in messages["silu-public-basic"]
    assert "shape" in messages["linear-public-basic"]


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_driver_reports_an_adapters_import_error_for_every_case(tmp_path):
    """Every case fails; the public ones say on which Python and torch the code would not parse
    (it may parse on the student's), the hidden ones keep their fixed text."""
    submission = write_submission(tmp_path / "submission", "def broken(:\n")
    result = run_driver(submission, tmp_path / "out", "rope")
    assert result.returncode == 0, result.stderr
    results = judge_component("rope", tmp_path / "out", rubric=RUBRIC)
    assert all("SyntaxError" in r.message and not r.passed for r in results)
    versions = f"graded with Python {platform.python_version()}, torch {torch.__version__}, numpy "
    assert all(versions in r.message for r in results if not r.hidden)
    assert {r.message for r in results if r.hidden} == {
        "importing your tests/adapters.py failed: raised SyntaxError"
    }


@pytest.mark.slow
def test_a_submission_in_python_3_12_syntax_is_graded_normally(tmp_path):
    """Upstream's handout needs 3.12, so students write its syntax (a `type` statement): the
    grader's Python must parse it, or every tokenizer case scores 0."""
    submission = tmp_path / "submission"
    shutil.copytree(ROOT / "cs336_basics", submission / "cs336_basics")
    (submission / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "adapters.py", submission / "tests" / "adapters.py")
    tokenizer = submission / "cs336_basics" / "tokenizer.py"
    tokenizer.write_text(tokenizer.read_text() + "\n\ntype _TokenIds = list[int]\n")
    result = run_driver(submission, tmp_path / "out", "tokenizer")
    assert result.returncode == 0, result.stderr
    results = judge_component("tokenizer", tmp_path / "out", rubric=RUBRIC)
    assert results and all(r.passed for r in results), [r.message for r in results]


@pytest.mark.parametrize(
    "message",
    [
        "AssertionError: wrong",
        "ModuleNotFoundError: tiktoken is blocked while grading: the course's policy",
        "ImportError: cannot import name 'Foo' from 'cs336_basics.model'",
    ],
)
def test_versions_are_left_out_where_they_explain_nothing(message):
    assert with_versions(message, "graded with Python 9.9") == message
    missing = "ImportError: cannot import name 'FILE_LIKE' from 'torch.serialization'"
    assert with_versions(missing, "v") == f"{missing} (v; code must parse and import there)"
    assert with_versions("SyntaxError: invalid syntax", "v").endswith(
        "(v; code must parse and import there)"
    )


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_driver_says_whether_importing_the_adapters_ended(tmp_path):
    """import.json: ended for an import that raised; not ended for one its alarm stopped."""
    slow = "import time\nwhile True:\n    time.sleep(0.05)\n"
    for name, adapters, ended in (("raised", "def broken(:\n", True), ("looped", slow, False)):
        submission = write_submission(tmp_path / name, adapters)
        out = tmp_path / f"{name}-out"
        result = run_driver(submission, out, "rope", "--case-timeout", "1")
        assert result.returncode == 0, result.stderr
        assert json.loads((out / "import.json").read_text()) == {"ended": ended}
        assert (IMPORT_ENDED in result.stderr.splitlines()) == ended


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_an_import_that_waits_for_a_busy_child_is_stopped_at_the_import_limit(tmp_path):
    """The import's limit counts its children's CPU too, and stops them."""
    token = f"cs336busy{os.getpid()}"
    busy = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'while True: pass', '{token}'])\n"
    submission = write_submission(tmp_path / "submission", busy)
    result = run_driver(submission, tmp_path / "out", "silu", "--case-timeout", "1")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "out" / "import.json").read_text()) == {"ended": False}
    assert not processes_with(token)
    message = judge_component("silu", tmp_path / "out", rubric=RUBRIC, hidden=False)[0].message
    assert "counted over every process it started" in message, message


def processes_with(token: str) -> list[str]:
    """Command lines of live processes that name ``token``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if token.encode() in cmdline and state != "Z":
                found.append(cmdline.decode(errors="replace"))
    return found


def test_the_import_report_survives_a_lost_out_folder(tmp_path):
    """The public run's /out is lost when the watchdog stops its sandbox; the log keeps the
    driver's line saying the import ended, so the hidden runs still start."""
    log = f"student output\n{IMPORT_ENDED}\nTraceback ..."
    assert import_report(tmp_path, log) is True
    assert import_report(tmp_path, "student output only") is None
    (tmp_path / "import.json").write_text(json.dumps({"ended": False}))
    assert import_report(tmp_path, log) is False  # the file, when it came back, says more


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_a_busy_child_counts_against_its_case():
    """The CPU a case's children use is the case's: stopped at the CPU limit (the wall clock's
    set far away), the child with it."""

    def case(index: int) -> None:
        if os.fork() == 0:
            while True:
                pass
        time.sleep(600)  # the case itself uses no CPU

    worker = Worker(case)
    hit, status, stopped = worker.run(0, 0.5, wall_s=600)
    worker.close()
    assert (hit, status, stopped) == ("cpu", None, 1)
    assert worker.processes.running() == []


RUNAWAY_ADAPTERS = """
import os, subprocess, sys

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)", "{token}"]

def run_silu(x):  # waits for a child that busy-loops
    child = os.fork()
    if child == 0:
        while True:
            pass
    os.waitpid(child, 0)

def run_softmax(x, dim):  # waits for a child that sleeps
    subprocess.run(SLEEPER)

def run_linear(d_in, d_out, weight, x):  # answers right, and leaves a sleeper running
    subprocess.Popen(SLEEPER)
    return x @ weight.T

def run_rmsnorm(d_model, eps, weight, x):
    os._exit(3)
"""


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_a_case_is_stopped_with_every_process_it_started(tmp_path):
    """A case's CPU limit counts its children; a sleeping child meets the wall-clock limit;
    what a case leaves running is stopped and noted; an exit costs that case only; once a
    component's case ran past its limits, its later ones get a tenth of them."""
    token = f"cs336runaway{os.getpid()}"
    submission = write_submission(
        tmp_path / "submission", RUNAWAY_ADAPTERS.replace("{token}", token)
    )
    cases = ["silu-public-basic", "silu-public-extremes", "softmax-public-basic"]
    cases += ["linear-public-basic", "rmsnorm-public-basic", "rmsnorm-public-float16"]
    started = time.monotonic()
    result = run_driver(
        submission,
        tmp_path / "out",
        "silu,softmax,linear,rmsnorm",
        "--cases",
        ",".join(cases),
        "--case-timeout",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60  # 1 + 0.1 CPU-seconds, 4 s of wall clock, the rest
    assert not processes_with(token)
    out = tmp_path / "out"
    found = {
        r.case: r
        for name in ("silu", "softmax", "linear", "rmsnorm")
        for r in judge_component(name, out, rubric=RUBRIC, hidden=False)
        if r.case in cases
    }
    # The busy child meets the CPU limit or, on a machine too busy to give it 1 CPU-second in
    # 4 s, the wall clock's (test_a_busy_child_counts_against_its_case's CPU limit: no clock).
    silu, shorter = found["silu-public-basic"].message, found["silu-public-extremes"].message
    assert "CaseTimeout: ran past the per-case limit of " in silu, silu
    assert "; it started 1 process, 1 still running (stopped)" in silu, silu
    assert "(an earlier case of silu ran past its limits)" in shorter, shorter
    assert "limit of 4 s of wall clock" in found["softmax-public-basic"].message
    linear = found["linear-public-basic"]
    assert linear.passed and linear.note == "it left 1 process running; stopped", linear
    for case in ("rmsnorm-public-basic", "rmsnorm-public-float16"):
        assert "CaseEnded" in found[case].message and "exit status 3" in found[case].message


def test_load_student_adapters_registers_the_students_module(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tests.adapters", reference)
    submission = write_submission(tmp_path, "def run_silu(x):\n    return 'mine'\n")
    module = load_student_adapters(submission)
    assert module.run_silu(None) == "mine" and sys.modules["tests.adapters"] is module


def test_only_the_instructors_cases_count(tmp_path):
    """Extra output files (a forged case, a copy of a passing one) earn nothing."""
    out = drive(reference, tmp_path, ["rope"])
    for suffix in (".json", ".safetensors"):
        forged = (out / f"rope-public-basic{suffix}").read_bytes()
        (out / f"rope-hidden-forged-extra{suffix}").write_bytes(forged)
    results = judge_component("rope", out, rubric=RUBRIC)
    assert "rope-hidden-forged-extra" not in {r.case for r in results}
    assert sum(r.max_points for r in results) == pytest.approx(RUBRIC.component("rope").points)


def test_case_weights_and_rubric_errors(tmp_path):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(
        '[[component]]\nname = "rope"\npoints = 4\nweights = { "rope-hidden-basic-d32" = 3 }\n'
    )
    component = load_rubric(rubric).component("rope")
    ids = [
        "rope-public-basic",
        "rope-public-heads",
        "rope-hidden-basic-d32",
        "rope-hidden-heads-four",
    ]
    assert case_points(component, ids) == pytest.approx(
        {ids[0]: 0.0, ids[1]: 0.0, ids[2]: 3.0, ids[3]: 1.0}
    )
    for bad in (
        '[[component]]\nname = "nope"\npoints = 1',
        '[[component]]\nname = "rope"\npoints = -1',
        '[[component]]\nname = "rope"',
        '[[component]]\nname = "rope"\npoints = 1\nhidden_share = 0.5',
        '[grading]\nhidden_share = 0.5\n[[component]]\nname = "rope"\npoints = 1',
        '[grading]\nblocked_packages = ["not a name"]\n[[component]]\nname = "rope"\npoints = 1',
    ):
        rubric.write_text(bad + "\n")
        with pytest.raises(ValueError):
            load_rubric(rubric)


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_driver_soft_timeout_stops_a_hanging_case_and_goes_on(tmp_path):
    adapters = """
    import time

    def run_transformer_block(d_model, *args):
        if d_model == 48:  # the hidden case hangs, even through `except Exception`
            while True:
                try:
                    time.sleep(0.05)
                except Exception:
                    pass
        raise ValueError("second case ran")
    """
    submission = write_submission(tmp_path / "submission", adapters)
    chosen = "transformer_block-hidden-basic-d48,transformer_block-public-basic"
    result = run_driver(
        submission, tmp_path / "out", "transformer_block", "--cases", chosen, "--case-timeout", "1"
    )
    assert result.returncode == 0, result.stderr
    results = {
        r.case: r for r in judge_component("transformer_block", tmp_path / "out", rubric=RUBRIC)
    }
    assert results["transformer_block-hidden-basic-d48"].message == "ran past its time limit"
    assert "second case ran" in results["transformer_block-public-basic"].message
    assert (
        "did not finish" in results["transformer_block-hidden-basic-short_seq"].message
    )  # not chosen


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_the_grader_judge_grades_a_catalogued_bug(tmp_path):
    from course.mutation.catalogue import BUGS
    from course.mutation.judge_grader import CASE_FILES, grade_bug
    from course.workspace import stage

    bug = next(b for b in BUGS if b.name == "linear_weight_not_transposed")
    result = grade_bug(bug, stage(tmp_path, CASE_FILES), timeout=120)
    assert result.lost == pytest.approx(RUBRIC.component("linear").points)
    assert result.hidden_failed == 2 and not result.note


@pytest.mark.slow  # a driver subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_hidden_feedback_is_a_fixed_text_whatever_the_code_raised(tmp_path):
    """A hidden case that fails says which builtin exception was raised and nothing else: not
    its message, not a class name of the student's, not the case's values."""
    secret = "68696464656e20696e707574"  # what an attack would smuggle out (hex of the input)
    adapters = f"""
    class E{secret}(Exception):
        pass

    def run_linear(*args):
        raise ValueError("{secret}")

    def run_silu(*args):
        raise E{secret}()

    def run_softmax(in_features, dim):
        return in_features + 1  # wrong values: the judge's diagnosis would quote them
    """
    submission = write_submission(tmp_path / "submission", adapters)
    assert run_driver(submission, tmp_path / "out", "linear,silu,softmax").returncode == 0
    for name, expected in (
        ("linear", "raised ValueError"),
        ("silu", "raised an exception of a class of your own"),
        ("softmax", "wrong outputs"),
    ):
        results = judge_component(name, tmp_path / "out", rubric=RUBRIC)
        hidden = [r for r in results if r.hidden]
        public = [r for r in results if not r.hidden]
        assert hidden and all(r.message == expected for r in hidden), (name, hidden)
        assert all(not r.passed and r.message != expected for r in public)  # the full diagnosis
        assert secret in " ".join(r.message for r in public) or name == "softmax"
        only_hidden = judge_component(name, tmp_path / "out", rubric=RUBRIC, hidden=True)
        assert only_hidden == hidden


def test_what_the_driver_stopped_reads_as_fixed_text_in_hidden_cases(tmp_path):
    """A hidden case stopped at its limit, or whose process ended, or that left processes
    running, says so in fixed words; a public one keeps the driver's own."""
    from tests.cases import Outputs

    assert hidden_feedback(Outputs({}, "CaseTimeout: ran past ... 60")) == "ran past its time limit"
    assert hidden_feedback(Outputs({}, "CaseEnded: ... (exit status 3: ...)")) == (
        "ended its process before writing its outputs (an exit or a crash)"
    )
    note = "it left 2 processes running; stopped"
    for case in ("silu-hidden-basic-wide", "silu-public-basic"):
        header = {"case": case, "seconds": 0.1, "status": "raised", "error": "ValueError: x"}
        write_bundle(tmp_path, case, {}, header | {"note": note})
    notes = {r.case: r.note for r in judge_component("silu", tmp_path, rubric=RUBRIC)}
    assert notes["silu-hidden-basic-wide"] == "it left processes running; stopped"
    assert notes["silu-public-basic"] == note
    assert notes["silu-public-extremes"] == ""  # no outputs, no note
