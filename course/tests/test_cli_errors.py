"""Every ``cs336`` command, run as a subprocess on bad input: a one-line error that names the
problem, exit status 2, no traceback, and no user file changed or left behind.

Each probe runs in its own copy of a session-wide workspace (see ``cli_workspace``); the
probes run concurrently, once per session, and each test checks one of them.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from .cli_workspace import make_workspace, run_cli, snapshot

pytestmark = pytest.mark.slow  # subprocesses: run by `make test-all` and CI, not by plain `pytest`

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


def test_cli_debug_flag_and_variable_show_the_traceback(tmp_path):
    args = ["encode", "nothere.txt", "--tokenizer", "tok", "--out", "x.npy"]
    for extra_args, env in ((["--debug"], {}), ([], {"CS336_DEBUG": "1"})):
        result = run_cli(extra_args + args, tmp_path, env=env)
        assert result.returncode == 2
        assert "Traceback" in result.stderr and "MissingInputError" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("cs336 encode: error: ")


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
