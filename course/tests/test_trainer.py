"""The training loop: it learns, resumes exactly, stops on NaN, and the CLI drives it."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from cs336_basics.builder import build_model
from cs336_basics.checkpoint import read_checkpoint
from cs336_basics.config import ModelConfig
from cs336_basics.losses import cross_entropy
from cs336_basics.training import TrainConfig, train

TINY_MODEL = ModelConfig(
    vocab_size=32, context_length=8, d_model=32, num_layers=2, num_heads=2, d_ff=64
)


@pytest.fixture
def token_files(tmp_path):
    rng = np.random.default_rng(0)
    # A learnable stream: short counting runs with random starting points.
    pieces = [np.arange(start, start + 6) % 32 for start in rng.integers(0, 32, size=600)]
    tokens = np.concatenate(pieces).astype(np.uint16)
    np.save(tmp_path / "train.npy", tokens[:3000])
    np.save(tmp_path / "val.npy", tokens[3000:])
    return tmp_path / "train.npy", tmp_path / "val.npy"


def _config(token_files, out_dir, **overrides) -> TrainConfig:
    train_path, val_path = token_files
    settings = dict(
        model=TINY_MODEL,
        train_data=str(train_path),
        val_data=str(val_path),
        out_dir=str(out_dir),
        batch_size=4,
        max_steps=8,
        lr_max=3e-3,
        lr_min=3e-4,
        warmup_steps=2,
        cosine_steps=8,
        eval_interval=4,
        eval_batches=2,
        log_interval=1,
        checkpoint_interval=4,
        device="cpu",
        progress=False,
    )
    settings.update(overrides)
    return TrainConfig(**settings)


def _losses(history, split):
    return [(r["step"], r["loss"]) for r in history if r["split"] == split]


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_resume_reproduces_uninterrupted_run(token_files, tmp_path):
    straight = train(_config(token_files, tmp_path / "straight", grad_accum_steps=2))
    assert straight.step == 8 and straight.stopped == "completed"

    interrupted = _config(token_files, tmp_path / "resumed", grad_accum_steps=2, max_steps=5)
    first_half = train(interrupted)
    assert first_half.step == 5
    resumed = train(_config(token_files, tmp_path / "resumed", grad_accum_steps=2), resume=True)
    assert resumed.step == 8

    assert _losses(resumed.history, "train") == _losses(straight.history, "train")
    # The interrupted run also evaluated at its last step (5); the scheduled evaluations agree.
    assert [v for v in _losses(resumed.history, "val") if v[0] != 5] == _losses(
        straight.history, "val"
    )
    assert [s for s, _ in _losses(resumed.history, "train")] == list(range(1, 9))
    saved = read_checkpoint(resumed.checkpoint)
    assert saved["iteration"] == 8 and saved["config"]["model"] == TINY_MODEL.to_dict()
    for name, tensor in read_checkpoint(straight.checkpoint)["model"].items():
        assert torch.equal(tensor, saved["model"][name]), name


def test_training_resume_rejects_a_different_model(token_files, tmp_path):
    train(_config(token_files, tmp_path / "run", max_steps=1))
    other = _config(
        token_files, tmp_path / "run", model=ModelConfig(**{**TINY_MODEL.to_dict(), "d_ff": 96})
    )
    with pytest.raises(ValueError, match="d_ff"):
        train(other, resume=True)


def test_training_stops_on_nan_and_keeps_last_good_checkpoint(token_files, tmp_path, monkeypatch):
    import cs336_basics.training as training

    real_loss = training.language_model_loss
    calls = {"n": 0}

    def loss_that_turns_nan(model, inputs, targets):
        calls["n"] += 1
        loss = real_loss(model, inputs, targets)
        return loss * float("nan") if calls["n"] == 6 else loss

    monkeypatch.setattr(training, "language_model_loss", loss_that_turns_nan)
    result = train(_config(token_files, tmp_path / "run", checkpoint_interval=2))
    assert result.stopped == "non-finite loss" and result.step == 5
    assert "loss is nan at step 6" in result.failure and "(step 4)" in result.failure
    saved = read_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert saved["iteration"] == 4
    assert all(torch.isfinite(t).all() for t in saved["model"].values())
    assert result.checkpoint == tmp_path / "run" / "checkpoints" / "latest.pt"


def test_training_cli_with_toml_config_and_overrides(token_files, tmp_path):
    from cs336_basics.runner.cli import main

    train_path, val_path = token_files
    model_table = "\n".join(
        f"{k} = {json.dumps(v)}" for k, v in TINY_MODEL.to_dict().items() if v is not None
    )
    (tmp_path / "run.toml").write_text(
        f'train_data = "{train_path}"\nval_data = "{val_path}"\nmax_steps = 50\nbatch_size = 4\n'
        f'warmup_steps = 1\neval_batches = 1\nprogress = false\ndevice = "cpu"\n[model]\n{model_table}\n'
    )
    out_dir = tmp_path / "cli_run"
    code = main(
        [
            "train",
            "--config",
            str(tmp_path / "run.toml"),
            "--max-steps",
            "3",
            "--out-dir",
            str(out_dir),
            "--d-model",
            "16",
            "--log-interval",
            "1",
        ]
    )
    assert code == 0
    saved = read_checkpoint(out_dir / "checkpoints" / "latest.pt")
    assert saved["iteration"] == 3 and saved["config"]["model"]["d_model"] == 16
    assert (out_dir / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["split"] == "train"] == [1, 2, 3]
    assert main(["train", "--config", str(tmp_path / "run.toml"), "--num-heads", "5"]) == 2


def test_cli_train_reports_a_nan_as_its_one_error_line(token_files, tmp_path, monkeypatch, capsys):
    import cs336_basics.training as training
    from cs336_basics.runner.cli import main

    real_loss = training.language_model_loss
    calls = {"n": 0}

    def loss_that_turns_nan(model, inputs, targets):
        calls["n"] += 1
        return real_loss(model, inputs, targets) * (float("nan") if calls["n"] == 3 else 1.0)

    monkeypatch.setattr(training, "language_model_loss", loss_that_turns_nan)
    train_path, _ = token_files
    model = [f"--{k.replace('_', '-')}={v}" for k, v in TINY_MODEL.to_dict().items()]
    flags = ["--device=cpu", "--no-progress", "--max-steps=4", "--batch-size=2", *model]
    status = main(["train", f"--train-data={train_path}", f"--out-dir={tmp_path / 'run'}", *flags])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert lines[-1].startswith("cs336 train: error: the training loss is nan at step 3"), lines


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_tiny_pipeline_lowers_val_loss_and_leaves_loadable_checkpoint(tmp_path, capsys):
    from cs336_basics.checkpoint import model_from_checkpoint
    from cs336_basics.generation import generate
    from cs336_basics.runner.cli import main

    run_dir = tmp_path / "pipeline"
    assert (
        main(
            [
                "pipeline",
                "--tiny",
                "--run-dir",
                str(run_dir),
                "--device",
                "cpu",
                "--workers",
                "1",
            ]
        )
        == 0
    )
    # The progress goes to a capture, as to a log file: whole lines, no carriage returns.
    output = capsys.readouterr()
    assert "validation loss" in output.out
    assert "\r" not in output.out + output.err
    assert re.search(r"^train: done, \d+/\d+ step in ", output.err, re.MULTILINE), output.err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped"] == "completed"
    assert summary["final_val_loss"] < summary["first_val_loss"] - 1.5  # about 5.7 -> 3.5 or below
    for name in (
        "tokenizer/vocab.json",
        "tokenizer/merges.txt",
        "data/train.npy",
        "data/valid.npy",
        "metrics.jsonl",
        "loss.png",
        "samples.txt",
        "config.json",
    ):
        assert (run_dir / name).is_file(), name
    model = model_from_checkpoint(run_dir / "checkpoints" / "latest.pt")
    assert model.lm_head.weight.shape[0] == summary["vocab_size"]
    assert len(generate(model, [1, 2, 3], 5, temperature=0.0)) == 5
    assert summary["samples"][0].startswith("Once upon a time")


def test_training_wandb_missing_gives_clear_error(token_files, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    build_model(TINY_MODEL)  # the run gets as far as building its model
    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(RuntimeError, match="uv sync --extra wandb"):
        train(_config(token_files, tmp_path / "run", wandb_project="cs336"))


@pytest.mark.slow  # a whole training pipeline: run by `make test-all` and CI, not by plain `pytest`
def test_training_pipeline_takes_user_data_at_every_stage(tmp_path):
    import numpy as np

    from cs336_basics.runner.cli import main

    first = tmp_path / "first"
    common = [
        "pipeline",
        "--tiny",
        "--no-progress",
        "--device",
        "cpu",
        "--workers",
        "1",
        "--max-steps",
        "6",
    ]
    assert main([*common, "--run-dir", str(first)]) == 0
    # user text and a user tokenizer: the encode stage must reproduce the first run's arrays
    second = tmp_path / "second"
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(second),
                "--train-text",
                str(first / "data" / "train.txt"),
                "--val-text",
                str(first / "data" / "valid.txt"),
                "--tokenizer",
                str(first / "tokenizer"),
            ]
        )
        == 0
    )
    assert not (second / "data" / "train.txt").exists()
    for name in ("train.npy", "valid.npy"):
        assert np.array_equal(np.load(second / "data" / name), np.load(first / "data" / name))
    # ready token arrays skip encoding altogether
    third = tmp_path / "third"
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(third),
                "--tokenizer",
                str(first / "tokenizer"),
                "--train-tokens",
                str(first / "data" / "train.npy"),
                "--val-tokens",
                str(first / "data" / "valid.npy"),
            ]
        )
        == 0
    )
    assert json.loads((third / "summary.json").read_text())["steps"] == 6
    assert (
        main(
            [
                *common,
                "--run-dir",
                str(third),
                "--train-text",
                str(tmp_path / "missing.txt"),
                "--val-text",
                str(tmp_path / "missing.txt"),
            ]
        )
        == 2
    )


def test_training_loss_adds_the_moe_auxiliary_loss():
    from cs336_basics.training import language_model_loss

    torch.manual_seed(0)
    model = build_model(
        ModelConfig.from_dict({**TINY_MODEL.to_dict(), "ffn": "moe", "num_experts": 4, "top_k": 2})
    )
    inputs = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 32, (2, 8), generator=torch.Generator().manual_seed(2))
    loss = language_model_loss(model, inputs, targets)
    expected = cross_entropy(model(inputs), targets) + model.aux_loss()
    assert model.aux_loss().item() > 0
    torch.testing.assert_close(loss, expected)


def test_training_time_budget_stops_and_reaches_the_schedule_floor(token_files, tmp_path):
    result = train(
        _config(token_files, tmp_path / "run", max_seconds=1e-9, max_steps=50, cosine_steps=None)
    )
    assert result.stopped == "time budget" and result.step == 1
    first = next(r for r in result.history if r["split"] == "train")
    assert first["lr"] == 3e-4  # already past the deadline: the schedule sits at lr_min
    assert read_checkpoint(result.checkpoint)["iteration"] == 1
