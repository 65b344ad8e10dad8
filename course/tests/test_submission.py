"""The submission packer: what goes in, what stays out, the manifest, the size warning."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from course.handout.submission import MANIFEST, main, pack
from course.paths import HANDOUT


@pytest.fixture
def student(tmp_path: Path) -> Path:
    root = tmp_path / "handout"
    files: dict[str, bytes] = {
        "cs336_basics/__init__.py": b"",
        "cs336_basics/model.py": b"x = 1\n",
        "cs336_basics/notes.md": b"my notes\n",
        "cs336_basics/__pycache__/model.cpython-311.pyc": b"\0\0",
        "cs336_basics/weights.pt": b"\0" * 100,
        "cs336_basics/data/tokens.npy": b"\0" * 100,
        "tests/adapters.py": b"def run_linear(): ...\n",
        "tests/test_model.py": b"def test(): pass\n",
        "fixtures/big.npz": b"\0" * 100,
        ".venv/lib/site.py": b"",
        "writeup.pdf": b"%PDF-1.4 fake\n",
        "HANDOUT_VERSION": b"1.2.3 (commit abc, 2025-01-01)\n",
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def test_pack_takes_code_adapters_and_writeup_only(student: Path, tmp_path: Path) -> None:
    out = tmp_path / "submission.zip"
    size, skipped = pack(student, out)
    assert size == out.stat().st_size
    with zipfile.ZipFile(out) as archive:
        names = sorted(archive.namelist())
        manifest = json.loads(archive.read(MANIFEST))
        model = archive.read("cs336_basics/model.py")
    assert names == sorted(
        [
            "MANIFEST.json",
            "cs336_basics/__init__.py",
            "cs336_basics/model.py",
            "cs336_basics/notes.md",
            "tests/adapters.py",
            "writeup.pdf",
        ]
    )
    assert "cs336_basics/weights.pt (data, checkpoint or build output)" in skipped
    assert manifest["handout_version"] == "1.2.3 (commit abc, 2025-01-01)"
    assert manifest["files"]["cs336_basics/model.py"] == {
        "bytes": len(model),
        "sha256": hashlib.sha256(b"x = 1\n").hexdigest(),
    }
    assert set(manifest["files"]) == set(names) - {MANIFEST}


def test_pack_takes_the_adapters_of_tests_in_their_own_folder(student: Path, tmp_path: Path):
    """The extension handout's variant tests have their own adapters.py, which the student wires."""
    (student / "tests" / "variants").mkdir()
    (student / "tests" / "variants" / "adapters.py").write_text("def run_layernorm(): ...\n")
    (student / "tests" / "variants" / "test_layernorm.py").write_text("def test(): pass\n")
    pack(student, tmp_path / "submission.zip")
    with zipfile.ZipFile(tmp_path / "submission.zip") as archive:
        names = set(archive.namelist())
    assert {"tests/adapters.py", "tests/variants/adapters.py"} <= names
    assert "tests/variants/test_layernorm.py" not in names


def test_pack_is_deterministic(student: Path, tmp_path: Path) -> None:
    pack(student, tmp_path / "a.zip")
    pack(student, tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()


def test_missing_package_or_adapters_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["--root", str(tmp_path), "--out", str(tmp_path / "s.zip")]) == 1
    assert "no cs336_basics/ folder" in capsys.readouterr().err
    (tmp_path / "cs336_basics").mkdir()
    assert main(["--root", str(tmp_path), "--out", str(tmp_path / "s.zip")]) == 1
    assert "missing" in capsys.readouterr().err and not (tmp_path / "s.zip").exists()


def test_writeup_must_be_a_pdf(
    student: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    notes = tmp_path / "notes.docx"
    notes.write_bytes(b"x")
    assert (
        main(["--root", str(student), "--out", str(tmp_path / "s.zip"), "--writeup", str(notes)])
        == 1
    )
    assert "must be a PDF" in capsys.readouterr().err


def test_size_limit_warns_but_still_writes(
    student: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (student / "cs336_basics" / "huge_log.txt").write_bytes(random.Random(0).randbytes(64 << 10))
    out = tmp_path / "s.zip"
    assert main(["--root", str(student), "--out", str(out), "--size-limit-mb", "0.01"]) == 0
    assert out.is_file()
    assert "WARNING" in capsys.readouterr().err


def test_handout_script_runs_standalone(student: Path, tmp_path: Path) -> None:
    """Inside the handout it runs as ``python make_submission.py`` without ``course/``."""
    script = student / "make_submission.py"
    script.write_text((HANDOUT / "submission.py").read_text())
    result = subprocess.run(
        [sys.executable, "-S", str(script)], cwd=student, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert (student / "submission.zip").is_file()


def test_pack_takes_the_self_reported_leaderboard_when_present(
    student: Path, tmp_path: Path
) -> None:
    (student / "leaderboard.json").write_text('{"validation_loss": 1.42}\n')
    pack(student, tmp_path / "with.zip")
    with zipfile.ZipFile(tmp_path / "with.zip") as archive:
        assert archive.read("leaderboard.json") == b'{"validation_loss": 1.42}\n'
