"""The ``cs336`` command line, run as subprocesses (slow: ``make test-all`` and CI) and in process.

- Bad input: every command on bad input gives a one-line error that names the problem, exit
  status 2, no traceback, and no user file changed or left behind. Each probe runs in its own copy
  of a session-wide workspace (see ``cli_workspace``); the probes run concurrently, once per
  session, and each test checks one of them.
- Real signals: Ctrl-C in ``encode`` stops the worker pool at once and leaves no partial output;
  SIGINT/SIGTERM in ``train`` save a checkpoint and print the command that resumes; a write
  killed by SIGKILL leaves a temporary file the next start removes. ``encode`` failing in its
  writer (a full disk), its reader (bad UTF-8) or a worker (SIGKILL) ends within seconds with one
  line and no output, run after run. A terminal's Ctrl-C reaches every process in the foreground
  group, so the commands run in a new session and the tests signal the whole group (``killpg``),
  as the terminal would.
- Hugging Face directories: ``cs336 generate --hf-model`` and ``cs336 export-hf`` on
  directories that ``transformers`` itself writes and reads (tiny random models, offline).
- Streaming: ``cs336 generate`` prints text as tokens are produced: whole characters only (a
  UTF-8 character split across tokens waits for its last byte), flushed per token, and the same
  text as the sample printed at the end (``--no-stream``), with or without the static KV cache.
"""

from __future__ import annotations

import json
import os
import random
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from cs336_basics.checkpoint import save_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.model import transformer_lm
from cs336_basics.runner.cli import main
from cs336_basics.runner.commands.text_stream import TextStream
from cs336_basics.tokenizer import Tokenizer
from cs336_basics.variants.builders import with_cache_capable_attention
from cs336_basics.variants.decoding.kv_cache import caching_layers
from reference_tests.cli_workspace import CLI, REPO, make_workspace, run_cli, snapshot
from tests.variants.test_hf_tokenizer import build

TRAIN = ["train", "--config", "run.json"]
GENERATE = ["generate", "--checkpoint", "existing_run/checkpoints/latest.pt", "--tokenizer", "tok"]
ENCODE_TO_NEW = ["--tokenizer", "tok", "--out", "new.npy", "--no-progress"]
TRAIN_BPE_TO_NEW = ["--vocab-size", "300", "--out-dir", "newtok", "--no-progress"]

# id: (arguments, words the one-line message must contain)
PROBES: dict[str, tuple[list[str], list[str]]] = {
    # train-bpe
    "train-bpe/missing input": (
        ["train-bpe", "nothere.txt", *TRAIN_BPE_TO_NEW],
        ["nothere.txt", "not found"],
    ),
    "train-bpe/directory input": (["train-bpe", "tok", *TRAIN_BPE_TO_NEW], ["tok", "directory"]),
    "train-bpe/latin-1 input": (
        ["train-bpe", "latin1.txt", *TRAIN_BPE_TO_NEW, "--workers", "1"],
        ["latin1.txt", "UTF-8"],
    ),
    "train-bpe/binary input": (
        ["train-bpe", "binary.bin", *TRAIN_BPE_TO_NEW, "--workers", "1"],
        ["binary.bin", "UTF-8"],
    ),
    "train-bpe/vocab below 256 + specials": (
        ["train-bpe", "corpus.txt", "--vocab-size", "200", "--out-dir", "newtok"],
        ["--vocab-size 200", "257"],
    ),
    "train-bpe/existing tokenizer": (
        ["train-bpe", "corpus.txt", "--vocab-size", "300", "--out-dir", "tok"],
        ["tok/vocab.json", "--force"],
    ),
    "train-bpe/workers 0": (
        ["train-bpe", "corpus.txt", *TRAIN_BPE_TO_NEW, "--workers", "0"],
        ["--workers", "at least 1"],
    ),
    "train-bpe/workers -2": (
        ["train-bpe", "corpus.txt", *TRAIN_BPE_TO_NEW, "--workers", "-2"],
        ["--workers", "-2"],
    ),
    # encode
    "encode/missing input": (
        ["encode", "nothere.txt", *ENCODE_TO_NEW],
        ["nothere.txt", "not found"],
    ),
    "encode/directory input": (["encode", "tok", *ENCODE_TO_NEW], ["tok", "directory"]),
    "encode/latin-1 input": (
        ["encode", "latin1.txt", *ENCODE_TO_NEW, "--workers", "1"],
        ["latin1.txt", "UTF-8"],
    ),
    "encode/binary input": (
        ["encode", "binary.bin", *ENCODE_TO_NEW, "--workers", "1"],
        ["binary.bin", "UTF-8"],
    ),
    "encode/tokenizer without merges.txt": (
        ["encode", "corpus.txt", "--tokenizer", "tok_no_merges", "--out", "new.npy"],
        ["tok_no_merges", "merges.txt"],
    ),
    "encode/tokenizer without vocab.json": (
        ["encode", "corpus.txt", "--tokenizer", "tok_no_vocab", "--out", "new.npy"],
        ["tok_no_vocab", "vocab.json"],
    ),
    "encode/missing tokenizer": (
        ["encode", "corpus.txt", "--tokenizer", "nowhere", "--out", "new.npy"],
        ["nowhere", "not found"],
    ),
    "encode/existing output": (
        ["encode", "corpus.txt", "--tokenizer", "tok", "--out", "tokens.npy"],
        ["tokens.npy", "--force"],
    ),
    "encode/workers 0": (
        ["encode", "corpus.txt", *ENCODE_TO_NEW, "--workers", "0"],
        ["--workers", "at least 1"],
    ),
    "encode/workers -2": (
        ["encode", "corpus.txt", *ENCODE_TO_NEW, "--workers", "-2"],
        ["--workers", "-2"],
    ),
    # train
    "train/missing config": (["train", "--config", "nothere.toml"], ["nothere.toml", "not found"]),
    "train/config is a directory": (["train", "--config", "tok"], ["tok", "directory"]),
    "train/unparsable TOML": (["train", "--config", "broken.toml"], ["broken.toml", "TOML"]),
    "train/unparsable JSON": (["train", "--config", "broken.json"], ["broken.json", "JSON"]),
    "train/unknown flag": (
        [*TRAIN, "--out-dir", "new", "--learning-rate", "1"],
        ["--learning-rate"],
    ),
    "train/existing run": (
        [*TRAIN, "--out-dir", "existing_run"],
        ["existing_run", "--resume", "--overwrite"],
    ),
    "train/nothing to resume": (
        [*TRAIN, "--out-dir", "new", "--resume"],
        ["nothing to resume", "latest.pt"],
    ),
    "train/float token array": (
        [*TRAIN, "--out-dir", "new", "--train-data", "float.npy"],
        ["float.npy", "float32"],
    ),
    "train/2-D token array": (
        [*TRAIN, "--out-dir", "new", "--train-data", "matrix.npy"],
        ["matrix.npy", "(10, 10)"],
    ),
    "train/truncated token array": (
        [*TRAIN, "--out-dir", "new", "--train-data", "truncated.npy"],
        ["truncated.npy", "truncated"],
    ),
    "train/missing token array": (
        [*TRAIN, "--out-dir", "new", "--train-data", "nothere.npy"],
        ["nothere.npy", "not found"],
    ),
    "train/context longer than the data": (
        [*TRAIN, "--out-dir", "new", "--train-data", "short.npy"],
        ["short.npy", "context_length=16", "at least 17"],
    ),
    "train/ids beyond the vocabulary": (
        [*TRAIN, "--out-dir", "new", "--vocab-size", "100"],
        ["tokens.npy", "vocabulary of 100"],
    ),
    "train/validation ids beyond the vocabulary": (
        [*TRAIN, "--out-dir", "new", "--val-data", "tokens.npy", "--vocab-size", "200"],
        ["tokens.npy", "vocabulary of 200"],
    ),
    "train/max-steps 0": ([*TRAIN, "--out-dir", "new", "--max-steps", "0"], ["--max-steps", "0"]),
    "train/bad model shape": ([*TRAIN, "--out-dir", "new", "--num-heads", "5"], ["num_heads=5"]),
    # generate
    "generate/max-new-tokens -4": (
        [*GENERATE, "--max-new-tokens", "-4"],
        ["--max-new-tokens", "-4"],
    ),
    "generate/temperature -1": ([*GENERATE, "--temperature", "-1"], ["--temperature", "-1"]),
    "generate/top-p 2": ([*GENERATE, "--top-p", "2"], ["--top-p", "2"]),
    "generate/top-p 0": ([*GENERATE, "--top-p", "0"], ["--top-p", "(0, 1]"]),
    "generate/missing checkpoint": (
        ["generate", "--checkpoint", "nothere.pt", "--tokenizer", "tok"],
        ["nothere.pt", "not found"],
    ),
    "generate/not a checkpoint": (
        ["generate", "--checkpoint", "tokens.npy", "--tokenizer", "tok"],
        ["tokens.npy", "checkpoint"],
    ),
    "generate/tokenizer without merges.txt": (
        [*GENERATE[:3], "--tokenizer", "tok_no_merges"],
        ["tok_no_merges", "merges.txt"],
    ),
    "generate/tokenizer of another model": (
        [*GENERATE[:3], "--tokenizer", "tok_280"],
        ["280", "300", "tok_280"],
    ),
    "generate/missing prompts file": (
        [*GENERATE, "--prompts-file", "nothere.txt"],
        ["nothere.txt", "not found"],
    ),
    # pipeline
    "pipeline/missing text": (
        ["pipeline", "--train-text", "nothere.txt", "--val-text", "corpus.txt", "--run-dir", "new"],
        ["nothere.txt", "not found"],
    ),
    "pipeline/unparsable config": (
        ["pipeline", "--config", "broken.toml"],
        ["broken.toml", "TOML"],
    ),
    "pipeline/existing run": (
        ["pipeline", "--tiny", "--run-dir", "existing_run"],
        ["existing_run", "--overwrite"],
    ),
    "pipeline/workers 0": (["pipeline", "--tiny", "--workers", "0"], ["--workers"]),
    "pipeline/tokenizer without vocab.json": (
        ["pipeline", "--tiny", "--tokenizer", "tok_no_vocab", "--run-dir", "new"],
        ["tok_no_vocab", "vocab.json"],
    ),
    # accounting
    "accounting/unparsable config": (
        ["accounting", "--config", "broken.json"],
        ["broken.json", "JSON"],
    ),
}


@pytest.fixture(scope="session")
def probe_results(tmp_path_factory):
    """Run every probe concurrently, each in its own copy of the workspace."""
    original = make_workspace(tmp_path_factory.mktemp("cli-workspace"))
    before = snapshot(original)
    copies = {}
    for index, name in enumerate(PROBES):
        copies[name] = tmp_path_factory.mktemp(f"probe{index}")
        shutil.copytree(original, copies[name], dirs_exist_ok=True)

    def probe(name):
        result = run_cli(PROBES[name][0], copies[name])
        return name, result, snapshot(copies[name])

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = {name: (result, after) for name, result, after in pool.map(probe, PROBES)}
    return before, results, original


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.parametrize("name", list(PROBES))
def test_cli_bad_input_gives_one_line_error_and_changes_nothing(probe_results, name):
    before, results, _ = probe_results
    result, after = results[name]
    command = PROBES[name][0][0]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, f"exit {result.returncode}; stderr:\n{result.stderr}"
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"cs336 {command}: error: "), lines[0]
    for word in PROBES[name][1]:
        assert word in lines[0], f"{word!r} not named in: {lines[0]}"
    assert result.stdout == ""
    assert after == before, "files changed: " + ", ".join(
        sorted(set(after.items()) ^ set(before.items()))
    )


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_cli_debug_flag_and_variable_show_the_traceback(tmp_path):
    args = ["encode", "nothere.txt", "--tokenizer", "tok", "--out", "x.npy"]
    for extra_args, env in ((["--debug"], {}), ([], {"CS336_DEBUG": "1"})):
        result = run_cli(extra_args + args, tmp_path, env=env)
        assert result.returncode == 2
        assert "Traceback" in result.stderr and "MissingInputError" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("cs336 encode: error: ")


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_cli_force_replaces_an_existing_output_and_removes_stale_temp_files(
    probe_results, tmp_path
):
    import numpy as np

    from cs336_basics.tokenizer import Tokenizer

    original = probe_results[2]
    shutil.copytree(original / "tok", tmp_path / "tok")
    (tmp_path / "corpus.txt").write_text("Once upon a time, hello world.")
    (tmp_path / "out.npy").write_bytes(b"old")
    stale = tmp_path / ".out.npy.abc123.tmp"  # what a killed encode leaves behind
    stale.write_bytes(b"partial")
    args = ["encode", "corpus.txt", "--tokenizer", "tok", "--out", "out.npy", "--no-progress"]
    result = run_cli([*args, "--force"], tmp_path)
    assert result.returncode == 0, result.stderr
    tokenizer = Tokenizer.from_files(
        tmp_path / "tok" / "vocab.json", tmp_path / "tok" / "merges.txt"
    )
    expected = tokenizer.encode("Once upon a time, hello world.")
    assert np.load(tmp_path / "out.npy").tolist() == expected
    assert not stale.exists() and "removed" in result.stderr


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_cli_reports_out_of_memory_in_one_line_and_lets_bugs_raise(monkeypatch, capsys):
    import cs336_basics.runner.commands.accounting as accounting_command
    from cs336_basics.runner.cli import main

    def out_of_memory(args):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(accounting_command, "run", out_of_memory)
    assert main(["accounting"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cs336 accounting: error: out of memory")
    assert "--batch-size" in lines[0]

    def bug(args):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(accounting_command, "run", bug)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        main(["accounting"])


ENV = {**os.environ, "PYTHONPATH": str(REPO), "CS336_DEBUG": ""}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("interrupts"))


def _start(args: list[str], cwd: Path, max_file_bytes: int | None = None) -> subprocess.Popen:
    def prepare() -> None:
        # A shell without job control starts background commands with SIGINT ignored, and the
        # command inherits that (Python then never raises KeyboardInterrupt): a suite run as
        # `.ci/run &` would see Ctrl-C do nothing. Give the command what a terminal gives it.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if max_file_bytes is not None:  # writing past it fails with EFBIG, as a full disk would
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return subprocess.Popen(
        CLI + args,
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=prepare,
    )


def _wait_for(condition, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the command ended early: {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("the command never got to the point of being interrupted")
        time.sleep(0.05)


def _group_is_gone(pgid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _train_records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    return [r for r in map(json.loads, lines) if r["split"] == "train"]


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_ctrl_c_stops_encode_workers_at_once_and_leaves_no_output(workspace):
    # 48 MB of random letter strings: every word is new, so encoding takes seconds even for the
    # compiled encoder (about 30 MB/s on two cores).
    codes = np.random.default_rng(0).integers(0, 31, size=48_000_000, dtype=np.uint8)
    letters = np.where(codes < 26, codes + 97, 32).astype(np.uint8)  # a space one time in six
    (workspace / "big.txt").write_bytes(letters.tobytes())
    args = ["encode", "big.txt", "--tokenizer", "tok", "--out", "big.npy", "--workers", "2"]
    process = _start([*args, "--no-progress"], workspace)
    _wait_for(lambda: any(workspace.glob(".big.npy.*.tmp")), process)
    time.sleep(0.5)  # the workers are busy encoding
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines() == [
        "cs336 encode: interrupted; partial outputs were removed"
    ]
    assert _group_is_gone(process.pid), "encoding workers outlived the command"
    assert not (workspace / "big.npy").exists()
    assert not list(workspace.glob(".big.npy.*"))


# Encoding failures, each repeated: multiprocessing.Pool's terminate() used to hang in about one
# run of two when the writer failed while workers were sending replies bigger than a pipe holds.
REPEATS = 20


@pytest.fixture(scope="module")
def letters(workspace) -> Path:
    """2 MB of random letter strings: with 4 workers, 8 jobs whose replies (about 400 KB of ids
    each) are far bigger than a pipe's buffer, so workers are mid-reply when the command fails."""
    codes = np.random.default_rng(1).integers(0, 31, size=2_000_000, dtype=np.uint8)
    text = np.where(codes < 26, codes + 97, 32).astype(np.uint8).tobytes()
    (workspace / "letters.txt").write_bytes(text)
    (workspace / "letters_bad.txt").write_bytes(text[:1_900_000] + b"\xff" + text[1_900_000:])
    return workspace / "letters.txt"


@pytest.fixture
def full_disk(tmp_path) -> Iterator[tuple[Path, int | None, str]]:
    """Where to write, a file size limit for the command, and the error a full disk gives: a
    64 KB tmpfs where this process may mount one (root), else a file size limit (writing past
    it fails with EFBIG instead of ENOSPC, through the same code)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)], capture_output=True
    )
    if mounted.returncode != 0:
        yield tmp_path / "ids.npy", 1 << 20, "File too large"  # 1 MB: the kernels' caches fit
        return
    yield mount_point / "ids.npy", None, "No space left on device"
    subprocess.run(["umount", str(mount_point)], check=True)


def _encode_fails_cleanly(
    workspace: Path,
    source: str,
    out: Path,
    expected: str,
    max_file_bytes: int | None = None,
    during=None,
) -> None:
    """Run ``cs336 encode`` (4 workers) expecting it to fail: within seconds, with one error
    line containing ``expected``, no output or temporary file, and no process left over."""
    args = ["encode", source, "--tokenizer", "tok", "--out", str(out), "--workers", "4"]
    process = _start([*args, "--no-progress"], workspace, max_file_bytes)
    if during is not None:
        during(process)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"cs336 encode hung after failing ({expected!r})")
    lines = stderr.strip().splitlines()
    assert process.returncode in (1, 2) and len(lines) == 1, stderr
    assert lines[0].startswith("cs336 encode: error: ") and expected in lines[0], stderr
    assert _group_is_gone(process.pid), "encoding workers outlived the command"
    assert not out.exists() and not list(out.parent.glob(f".{out.name}.*")), "partial output"


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_encode_onto_a_full_disk_fails_at_once_every_time(workspace, letters, full_disk):
    out, max_file_bytes, expected = full_disk
    for _ in range(REPEATS):
        _encode_fails_cleanly(workspace, letters.name, out, expected, max_file_bytes)


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_encode_with_a_worker_killed_fails_at_once_every_time(workspace, letters):
    def kill_a_worker(process: subprocess.Popen) -> None:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        _wait_for(lambda: children.read_text().split(), process, timeout=60)
        os.kill(int(children.read_text().split()[0]), signal.SIGKILL)  # as the OOM killer does

    for _ in range(REPEATS):
        _encode_fails_cleanly(
            workspace,
            letters.name,
            workspace / "ids.npy",
            "an encoding worker process was killed by signal 9",
            during=kill_a_worker,
        )


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_encode_of_bad_utf8_fails_at_once(workspace, letters):
    # The bad byte is in the last job: its worker fails while the others are mid-reply.
    for _ in range(5):
        _encode_fails_cleanly(
            workspace, "letters_bad.txt", workspace / "ids.npy", "not valid UTF-8: bad byte"
        )


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.parametrize(
    "signal_number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"]
)
def test_signal_in_train_saves_a_checkpoint_and_prints_the_resume_command(workspace, signal_number):
    from cs336_basics.checkpoint import read_checkpoint

    run = workspace / f"run-{signal_number.name}"
    args = ["train", "--config", "run.json", "--out-dir", run.name, "--max-steps", "100000"]
    args += ["--log-interval", "1", "--checkpoint-interval", "100000"]
    process = _start(args, workspace)
    _wait_for(lambda: len(_train_records(run)) >= 3, process)
    if signal_number == signal.SIGINT:
        os.killpg(process.pid, signal_number)  # Ctrl-C at a terminal
    else:
        os.kill(process.pid, signal_number)  # `kill PID`
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("cs336 train: interrupted at step ")
    step = int(last.split("at step ")[1].split(";")[0])
    assert read_checkpoint(run / "checkpoints" / "latest.pt")["iteration"] == step >= 3
    assert [r["step"] for r in _train_records(run)] == list(range(1, step + 1))
    command = last.split("resume with: ")[1]
    assert shlex.split(command) == [
        "cs336",
        "train",
        "--config",
        f"{run.name}/config.json",
        "--resume",
    ]
    if signal_number == signal.SIGINT:
        _resume_after_a_killed_write(workspace, run, command, step)


def _resume_after_a_killed_write(workspace: Path, run: Path, command: str, step: int) -> None:
    """SIGKILL a process in the middle of an atomic checkpoint write, then run the printed
    resume command: it removes the temporary file and continues from ``step``."""
    checkpoint = run / "checkpoints" / "latest.pt"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from cs336_basics.atomic_write import atomic_writer\n"
            "with atomic_writer(sys.argv[1]) as out:\n"
            "    out.write(b'x' * 100_000); out.flush(); print('writing', flush=True)\n"
            "    time.sleep(60)\n",
            str(checkpoint),
        ],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout.readline().strip() == "writing"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=10)
    leftovers = list(checkpoint.parent.glob(".latest.pt.*.tmp"))
    assert len(leftovers) == 1, "the killed write should have left its temporary file"

    args = shlex.split(command)[1:] + ["--max-steps", str(step + 2)]
    resumed = subprocess.run(
        CLI + args, cwd=workspace, env=ENV, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "removed" in resumed.stderr and not leftovers[0].exists()
    assert [r["step"] for r in _train_records(run)] == list(range(1, step + 3))


PROMPT = "the cat sat"


def cs336(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> tuple[transformers.PreTrainedModel, Path]:
    """A random Llama saved by ``transformers`` with a byte-level BPE ``tokenizer.json``."""
    directory = tmp_path_factory.mktemp("hf")
    tokenizer = HFTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(
        ["the cat sat on the mat and the dog sat on the log. " * 20], trainer
    )
    tokenizer.save(str(directory / "tokenizer.json"))
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(),  # every id the model can emit decodes
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        bos_token_id=0,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim > 1 else 1.0)
    model.save_pretrained(directory)
    return model, directory


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_generate_hf_model_prints_hf_greedy_tokens(hf_dir) -> None:
    from cs336_basics.variants.hf.checkpoint import load_pretrained

    model, directory = hf_dir
    tokenizer = load_pretrained(directory).tokenizer
    prompt = torch.tensor([tokenizer.encode(PROMPT)])
    with torch.no_grad():
        out = model.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=0)
    expected = PROMPT + tokenizer.decode(out[0, prompt.shape[1] :].tolist())
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(expected) > len(PROMPT) + 4  # a real continuation, not an immediate end
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_generate_hf_model_without_tokenizer_is_one_line_error(tmp_path: Path, hf_dir) -> None:
    model, _ = hf_dir
    model.save_pretrained(tmp_path / "bare")
    result = cs336("generate", "--hf-model", str(tmp_path / "bare"), "--prompt", PROMPT)
    assert result.returncode == 2
    assert "no tokenizer.json" in result.stderr and "--tokenizer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_export_hf_writes_a_directory_transformers_loads(tmp_path: Path, hf_dir) -> None:
    from cs336_basics.builder import build_model
    from cs336_basics.checkpoint import save_checkpoint
    from cs336_basics.config import ModelConfig
    from cs336_basics.variants.hf.checkpoint import load_pretrained

    config = ModelConfig(
        vocab_size=hf_dir[0].config.vocab_size,
        context_length=16,
        d_model=16,
        num_layers=2,
        num_heads=2,
        d_ff=32,
    )
    torch.manual_seed(1)
    ours = build_model(config).eval()
    save_checkpoint(ours, None, 0, tmp_path / "ckpt.pt", config=config.to_dict())
    (tmp_path / "tok").mkdir()
    load_pretrained(hf_dir[1]).tokenizer.save(
        tmp_path / "tok" / "vocab.json", tmp_path / "tok" / "merges.txt"
    )
    out = tmp_path / "hf"
    args = ("export-hf", str(tmp_path / "ckpt.pt"), str(out), "--tokenizer", str(tmp_path / "tok"))
    result = cs336(*args)
    assert result.returncode == 0, result.stderr
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert hf.config.model_type == "llama"
    ids = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)).abs().max() < 2e-5
    assert (out / "vocab.json").is_file() and (out / "merges.txt").is_file()

    again = cs336(*args)
    assert again.returncode == 2 and "--force" in again.stderr
    assert cs336(*args, "--force").returncode == 0


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
HUB_PROMPT = "It's 2026: THE cat's 12345 toys\n\n  café 日本"


def hub_directory(directory: Path, family: str) -> Path:
    """A directory as a hub download looks: config.json, generation_config.json, sharded
    safetensors with their index, tokenizer.json, tokenizer_config.json, special_tokens_map.json.
    ``llama``: a Llama-3-style tokenizer whose template puts <|begin_of_text|> first;
    ``qwen3_moe``: a Qwen2-style one (NFC, digits one by one), a dense layer among MoE ones."""
    style, specials = (
        ("llama3", LLAMA3_SPECIALS) if family == "llama" else ("qwen2", QWEN2_SPECIALS)
    )
    tokenizer = build(style, specials=specials)
    bos, eos = (specials[0], specials[1]) if family == "llama" else (None, specials[0])
    if bos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tokenizer.token_to_id(bos))]
        )
    named = {"bos_token": bos, "eos_token": eos} if bos else {"eos_token": eos}
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **named).save_pretrained(
        directory
    )
    (directory / "special_tokens_map.json").write_text(json.dumps(named))
    shape = dict(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        eos_token_id=tokenizer.token_to_id(eos),
        tie_word_embeddings=False,
    )
    if family == "llama":
        config = transformers.LlamaConfig(**shape, bos_token_id=tokenizer.token_to_id(bos))
    else:
        config = transformers.Qwen3MoeConfig(
            **shape, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
            mlp_only_layers=[1], norm_topk_prob=True,
        )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim > 1 else 1.0)
    model.save_pretrained(directory, max_shard_size="100KB")
    return directory


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
@pytest.mark.parametrize("family", ["llama", "qwen3_moe"])
def test_generate_hf_model_on_a_hub_directory_gives_hf_greedy_text(
    tmp_path: Path, family: str
) -> None:
    """What a user does with a download: HF's own tokenizer, model and generate (from the same
    directory) against ``cs336 generate --hf-model``."""
    directory = hub_directory(tmp_path, family)
    assert (directory / "model.safetensors.index.json").is_file()
    assert len(list(directory.glob("model-*.safetensors"))) > 1
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    prompt = tokenizer(HUB_PROMPT, return_tensors="pt").input_ids
    if family == "llama":
        assert prompt[0, 0] == tokenizer.bos_token_id  # the template's token, first
    with torch.no_grad():
        out = hf.generate(prompt, max_new_tokens=12, do_sample=False)
    new = out[0, prompt.shape[1] :]
    assert len(new) == 12
    expected = HUB_PROMPT + tokenizer.decode(new, skip_special_tokens=False)
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", HUB_PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_generate_hf_model_stops_at_the_directorys_eos(tmp_path: Path) -> None:
    """generation_config.json's eos_token_id ends the sample, as it ends HF's: the end token's
    output row is made 1% larger than that of the third greedy token, so it wins there."""
    directory = hub_directory(tmp_path, "llama")
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory).eval()
    prompt = tokenizer(HUB_PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        free = hf.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None)
        third = free[0, prompt.shape[1] + 2]
        hf.lm_head.weight[hf.config.eos_token_id] = 1.01 * hf.lm_head.weight[third]
        hf.save_pretrained(directory, max_shard_size="100KB")
        out = hf.generate(prompt, max_new_tokens=12, do_sample=False)
    new = out[0, prompt.shape[1] :]
    assert len(new) < 12 and new[-1] == hf.config.eos_token_id
    result = cs336(
        "generate", "--hf-model", str(directory), "--prompt", HUB_PROMPT,
        "--temperature", "0", "--max-new-tokens", "12", "--device", "cpu",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = HUB_PROMPT + tokenizer.decode(new, skip_special_tokens=False)
    assert result.stdout == f"--- sample 1 ---\n{expected}\n"


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_export_hf_of_a_moe_checkpoint_writes_the_hubs_per_expert_layout(tmp_path: Path) -> None:
    """A Qwen3-MoE-shaped training checkpoint: the directory holds one tensor per expert, with
    exactly the names ``transformers`` writes for the model it loads from it."""
    from safetensors import safe_open

    from cs336_basics.checkpoint import save_checkpoint
    from cs336_basics.variants.builders import build_variant_model
    from cs336_basics.variants.config import AttentionConfig, MoEConfig, VariantConfig

    config = VariantConfig(
        vocab_size=97, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=24,
        attention=AttentionConfig(qk_norm=True),
        ffn=MoEConfig(num_experts=4, top_k=2, dense_layers=[0], dense_d_ff=40),
    )  # fmt: skip
    torch.manual_seed(2)
    ours = build_variant_model(config).eval()
    save_checkpoint(ours, None, 0, tmp_path / "ckpt.pt", config=config.to_dict())
    out = tmp_path / "hf"
    result = cs336("export-hf", str(tmp_path / "ckpt.pt"), str(out))
    assert result.returncode == 0, result.stderr
    assert "qwen3_moe" in result.stdout
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    hf.save_pretrained(tmp_path / "again")

    def names(directory: Path) -> set[str]:
        with safe_open(directory / "model.safetensors", "pt") as file:
            return set(file.keys())

    assert names(out) == names(tmp_path / "again")
    assert "model.layers.1.mlp.experts.3.down_proj.weight" in names(out)
    ids = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (hf(ids).logits - ours(ids)).abs().max() < 2e-5


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_generate_hf_model_with_a_sentencepiece_tokenizer_is_one_line_error(
    tmp_path: Path, hf_dir
) -> None:
    model, _ = hf_dir
    model.save_pretrained(tmp_path)
    tokenizer = HFTokenizer(models.BPE(byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    result = cs336("generate", "--hf-model", str(tmp_path), "--prompt", PROMPT)
    assert result.returncode == 2
    assert "tokenizer.json" in result.stderr and "byte_fallback" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # a subprocess: run by `make test-all` and CI, not by plain `pytest`
def test_export_lists_the_families_the_converter_knows() -> None:
    from cs336_basics.runner.commands import export_hf
    from cs336_basics.variants.hf import convert as hf_convert

    assert export_hf.FAMILIES == hf_convert.FAMILIES


TEXT = "héllo wörld, 日本語 🙂!"


class Recorder:
    """A stand-in for stdout that keeps the text written between flushes as separate chunks."""

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.chunks.append(self.pending)
        self.pending = ""

    @property
    def text(self) -> str:
        return "".join(self.chunks) + self.pending


def test_text_stream_prints_each_character_once_its_last_byte_arrives() -> None:
    data = TEXT.encode()
    vocab = {i: bytes([byte]) for i, byte in enumerate(data)}  # one token per byte
    out = Recorder()
    stream = TextStream(vocab, out)
    for token_id in range(len(data)):
        before = len(out.chunks)
        stream.write(token_id)
        # a chunk appears exactly when this byte completes a character
        completes = _completes_character(data, token_id)
        assert len(out.chunks) == before + completes
    stream.close()
    assert out.chunks == list(TEXT)


def _completes_character(data: bytes, index: int) -> bool:
    """Whether ``data[index]`` is the last byte of a UTF-8 character (the next byte starts a new
    one: it is not a continuation byte 10xxxxxx)."""
    return index + 1 == len(data) or data[index + 1] & 0xC0 != 0x80


def test_text_stream_equals_one_shot_decoding_on_any_bytes() -> None:
    pool = [b"a", b"\xc3", b"\xa9", b"\xe6\x97", b"\xa5", b"\xf0\x9f", b"\x99\x82", b"\xff", b" "]
    vocab = dict(enumerate(pool))
    rng = random.Random(0)
    for _ in range(300):
        ids = [rng.randrange(len(pool)) for _ in range(rng.randrange(12))]
        out = Recorder()
        stream = TextStream(vocab, out)
        for token_id in ids:
            stream.write(token_id)
        stream.close()
        expected = b"".join(pool[i] for i in ids).decode("utf-8", errors="replace")
        assert out.text == expected and not out.pending


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A byte-level tokenizer whose tokens are pieces of UTF-8 characters, and a checkpoint of a
    random tiny model over it (greedy decoding then emits split and malformed characters)."""
    root = tmp_path_factory.mktemp("streaming")
    pieces = sorted(
        {bytes([b]) for b in range(256)} | {TEXT.encode()[i : i + 2] for i in range(20)}
    )
    vocab = dict(enumerate(pieces))
    Tokenizer(vocab, [], ["<|endoftext|>"]).save(root / "vocab.json", root / "merges.txt")
    config = ModelConfig(
        vocab_size=len(vocab) + 1, context_length=48, d_model=16, num_layers=2, num_heads=2, d_ff=32
    )
    torch.manual_seed(0)
    save_checkpoint(transformer_lm(config), None, 0, root / "model.pt", config=config.to_dict())
    return root


def _generate(run_dir: Path, monkeypatch, *flags: str) -> Recorder:
    out = Recorder()
    monkeypatch.setattr("sys.stdout", out)
    argv = ["generate", "--checkpoint", str(run_dir / "model.pt"), "--tokenizer", str(run_dir)]
    argv += ["--prompt", "héllo", "--prompt", "日本", "--temperature", "0"]
    assert main([*argv, "--max-new-tokens", "30", *flags]) == 0
    return out


def test_generate_streams_the_text_it_prints_at_the_end(run_dir: Path, monkeypatch) -> None:
    at_end = _generate(run_dir, monkeypatch, "--no-stream")
    streamed = _generate(run_dir, monkeypatch)
    assert streamed.text == at_end.text
    assert (
        at_end.text.startswith("--- sample 1 ---\nhéllo")
        and "--- sample 2 ---\n日本" in at_end.text
    )
    # flushed token by token (30 new tokens per sample), not once per sample
    assert len(streamed.chunks) > 20 and len(at_end.chunks) <= 2
    assert _generate(run_dir, monkeypatch, "--static-cache").text == at_end.text
    assert _generate(run_dir, monkeypatch, "--no-kv-cache").text == at_end.text


def test_generate_refuses_a_static_cache_without_the_kv_cache(run_dir: Path, monkeypatch) -> None:
    out = Recorder()
    monkeypatch.setattr("sys.stderr", out)
    argv = ["generate", "--checkpoint", str(run_dir / "model.pt"), "--tokenizer", str(run_dir)]
    assert main([*argv, "--no-kv-cache", "--static-cache"]) == 2
    assert "--no-kv-cache" in out.text


def test_core_model_gets_cache_capable_attention_with_the_same_function() -> None:
    config = ModelConfig(
        vocab_size=50, context_length=16, d_model=16, num_layers=2, num_heads=4, d_ff=32
    )
    torch.manual_seed(0)
    model = transformer_lm(config).double()
    tokens = torch.randint(0, 50, (2, 12))
    with torch.no_grad():
        expected = model(tokens)
        names = set(model.state_dict())
        converted = with_cache_capable_attention(model)
        assert len(caching_layers(converted)) == config.num_layers
        assert set(converted.state_dict()) == names
        torch.testing.assert_close(converted(tokens), expected, rtol=1e-12, atol=1e-12)
