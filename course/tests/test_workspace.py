"""The workspace helper (course/workspace.py): staging a tree, edits, pytest runs in a copy."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from course.workspace import Edit, apply_edits, edited, edits_from_toml, run_pytest, stage


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_stage_copies_files_and_folders_without_bytecode_caches(tmp_path):
    source = tmp_path / "source"
    write(source / "pkg" / "a.py", "A = 1\n")
    write(source / "pkg" / "__pycache__" / "a.cpython-312.pyc", "stale")
    write(source / "tests" / "one.py", "x\n")
    write(source / "tests" / "other.py", "y\n")
    staged = stage(tmp_path / "copy", ["pkg", Path("tests/one.py")], source=source)
    assert sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()) == [
        "pkg/a.py",
        "tests/one.py",
    ]


def test_stage_names_a_path_that_is_not_there(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot stage nowhere.py"):
        stage(tmp_path / "copy", ["nowhere.py"], source=tmp_path)


def test_edits_are_made_in_order_each_on_the_text_so_far(tmp_path):
    write(tmp_path / "m.py", "a = 1\nb = 2\n")
    apply_edits(
        tmp_path,
        [Edit("m.py", "a = 1", "a = 10", "first"), Edit("m.py", "a = 10", "a = 11", "second")],
    )
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == "a = 11\nb = 2\n"


@pytest.mark.parametrize(("before", "count"), [("c = 3", 0), ("= ", 2)])
def test_an_edit_that_does_not_occur_once_is_refused_by_name(tmp_path, before, count):
    write(tmp_path / "m.py", "a = 1\nb = 2\n")
    with pytest.raises(ValueError, match=f"bug off_by_one: .* occurs {count} times in m.py"):
        apply_edits(tmp_path, [Edit("m.py", before, "x", "bug off_by_one")])
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == "a = 1\nb = 2\n"


def test_edited_restores_the_files_after_the_block_and_after_a_stale_edit(tmp_path):
    original = "a = 1\nb = 2\n"
    write(tmp_path / "m.py", original)
    with edited(tmp_path, [Edit("m.py", "a = 1", "a = 5", "why")]):
        assert (tmp_path / "m.py").read_text(encoding="utf-8") == "a = 5\nb = 2\n"
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == original
    fits, stale = Edit("m.py", "b = 2", "b = 0", "fits"), Edit("m.py", "zzz", "y", "stale")
    with pytest.raises(ValueError, match="stale"), edited(tmp_path, [fits, stale]):
        pass
    assert (tmp_path / "m.py").read_text(encoding="utf-8") == original


def test_edits_from_toml_read_the_edit_tables_and_name_a_bad_one():
    entry = {"path": "m.py", "before": "a", "after": "b", "why": "a choice"}
    assert edits_from_toml([entry], "x.toml") == [Edit("m.py", "a", "b", "a choice")]
    with pytest.raises(ValueError, match=r"x.toml: edit 1 needs exactly .*has \['path'\]"):
        edits_from_toml([{"path": "m.py"}], "x.toml")
    with pytest.raises(ValueError, match="x.toml: edit 2: every field must be a string"):
        edits_from_toml([entry, entry | {"after": 3}], "x.toml")
    with pytest.raises(ValueError, match=r"x.toml: \[\[edit\]\] must be a list"):
        edits_from_toml({"path": "m.py"}, "x.toml")


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_run_pytest_reads_each_outcome_with_the_copy_importable(tmp_path, monkeypatch):
    # The helper module sits at the root, outside the tests' folder: importable only through
    # the PYTHONPATH the workspace sets (any PYTHONPATH of ours is not passed on).
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "elsewhere"))
    write(tmp_path / "helper.py", "VALUE = 2\n")
    write(
        tmp_path / "tests" / "test_things.py",
        """
        import helper

        def test_passes():
            assert helper.VALUE == 2

        def test_fails():
            assert helper.VALUE == 3, "hint: the value is two"
        """,
    )
    run = run_pytest(tmp_path, ["tests"], "mine", capture=True)
    assert run.returncode == 1 and not run.note
    assert {k: v["outcome"] for k, v in run.outcomes.items()} == {
        "tests/test_things.py::test_passes": "passed",
        "tests/test_things.py::test_fails": "failed",
    }
    assert "hint: the value is two" in run.outcomes["tests/test_things.py::test_fails"]["message"]
    assert "1 failed, 1 passed" in run.output
    assert (tmp_path / ".workspace" / "mine.jsonl").is_file()


@pytest.mark.slow  # seconds of the whole tree or of subprocesses: `make test-all` and CI
def test_run_pytest_stops_a_run_at_its_time_limit(tmp_path):
    write(
        tmp_path / "tests" / "test_slow.py",
        "import time\n\ndef test_sleeps():\n    time.sleep(120)\n",
    )
    scratch = tmp_path / "scratch"
    run = run_pytest(tmp_path, ["tests"], timeout=2, scratch=scratch)
    assert run.returncode is None and run.note == "tests hung past 2 s"
    assert not (tmp_path / ".workspace").exists()
