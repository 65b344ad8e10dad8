"""tests/cpu_limit.py: the grader's CPU limit per case, applied to the public cases under pytest.

It must stop a loop in the student's code and say where it was, stay out of the way of code that
returns in time, outlast a broad ``except``, and agree with the rubric's limit.
"""

from __future__ import annotations

import signal

import pytest

from course.grading.judge import load_rubric
from cs336_basics.bpe import train_bpe
from tests.cpu_limit import CASE_CPU_SECONDS, OutOfTime, case_cpu_limit
from tests.localize import diagnosed_if_raised
from tests.raised_in import raised_in_lines

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no CPU timer here")


def busy(seconds_of_work: int = 10**9) -> int:
    total = 0
    for i in range(seconds_of_work):
        total += i
    return total


def test_the_limit_is_the_graders():
    assert load_rubric().limits["case_cpu_s"] == CASE_CPU_SECONDS


def test_a_loop_in_the_package_is_stopped_and_named(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(" ".join(f"w{i}x{i % 97}" for i in range(200_000)), encoding="utf-8")
    with pytest.raises(OutOfTime) as caught, case_cpu_limit("a slow case", seconds=0.05):
        train_bpe(corpus, 2000, [])
    message = str(caught.value)
    assert message.startswith("a slow case used 0.05 s of CPU time without returning")
    assert "diagnosis: it was still running " in message
    assert "(cs336_basics/" in message  # the student's function, with its file and line
    # Not "your code raised ...": the student's code did not raise this.
    assert raised_in_lines(caught.value) == []


def test_code_outside_the_package_is_stopped_without_a_where_line():
    with pytest.raises(OutOfTime) as caught, case_cpu_limit("a slow case", seconds=0.05):
        busy()
    assert "diagnosis:" not in str(caught.value)


def test_a_broad_except_is_interrupted_again():
    def swallowing() -> None:
        try:
            busy()
        except Exception:  # noqa: BLE001  (what a student's code may do)
            busy()

    with pytest.raises(OutOfTime), case_cpu_limit("a stubborn case", seconds=0.05):
        swallowing()


def test_code_that_returns_in_time_runs_as_before_and_the_timer_is_disarmed():
    before = signal.getsignal(signal.SIGPROF)
    with case_cpu_limit("a quick case", seconds=5):
        assert busy(1000) == sum(range(1000))
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGPROF) is before


def test_a_case_out_of_time_gets_no_probe():
    probed = []
    with (
        pytest.raises(OutOfTime) as caught,
        case_cpu_limit("a slow case", seconds=0.05),
        diagnosed_if_raised(lambda: probed.append(1) or ["a probe's line"]),
    ):
        busy()
    assert probed == [] and not getattr(caught.value, "__notes__", [])
