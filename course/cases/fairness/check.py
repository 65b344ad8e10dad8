"""Does correct code pass whatever its arithmetic order? ``python -m course.cases.fairness``.

Every numeric graded case, public and hidden (``course/cases/hidden``), is run through the reference's
adapters and through each correct style of ``course/cases/fairness/styles.py`` and
``course/cases/fairness/training.py`` (other summation orders, ``rsqrt``, ``logsumexp``, fused or
looped heads, float64 inside, ``torch.compile`` on request), judged by the grader's own checks,
in several CPU configurations (one thread, all threads, and torch's scalar code path
``ATEN_CPU_CAPABILITY=default``, each in a process of its own). A case's *margin* is the
smallest factor by which its stored tolerances could be scaled with the case still passing
(error / tolerance): above 1 a correct solution fails; the check also fails above
``--max-margin`` (default 0.5), keeping headroom for CPUs and BLAS libraries not tried here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import torch

import tests.adapters as reference_adapters
from course.cases.fairness.styles import OPTIONAL_STYLES, STYLES
from course.cases.fairness.training import TRAINING_STYLES
from course.grading.judge import EXPECTED_ROOT, INPUTS_ROOT
from tests.cases import CASES, judge_case, run_case
from tests.cases.core import Bundle, Case
from tests.cases.wire import read_bundle

# The graded components whose outputs are numbers computed by the student's arithmetic, each
# with the adapter a style must have to be tried on it.
NUMERIC = {
    "linear": "run_linear",
    "embedding": "run_embedding",
    "rmsnorm": "run_rmsnorm",
    "silu": "run_silu",
    "swiglu": "run_swiglu",
    "softmax": "run_softmax",
    "scaled_dot_product_attention": "run_scaled_dot_product_attention",
    "multihead_self_attention": "run_multihead_self_attention_with_rope",
    "rope": "run_rope",
    "transformer_block": "run_transformer_block",
    "transformer_lm": "run_transformer_lm",
    "cross_entropy": "run_cross_entropy",
    "adamw": "get_adamw_cls",
    "gradient_clipping": "run_gradient_clipping",
    "cosine_schedule": "run_get_lr_cosine_schedule",
}
# (name, torch threads or 0 for every core, ATEN_CPU_CAPABILITY or "" for the CPU's best).
CONFIGS = (
    ("1 thread", 1, ""),
    ("all threads", 0, ""),
    ("1 thread, scalar", 1, "default"),
    ("all threads, scalar", 0, "default"),
)
SMOKE_CONFIGS = (CONFIGS[1], CONFIGS[2])
MAX_MARGIN = 0.5
# The bisection's range and steps: margins below the floor print as 0, above the ceiling as inf.
MARGIN_FLOOR, MARGIN_CEILING, BISECTIONS = 1e-6, 1e6, 40


@dataclass(frozen=True)
class Row:
    config: str
    style: str
    case: str
    passed: bool
    margin: float | None  # None: the case's check has no stored tolerance to scale
    message: str = ""


def instances(components: list[str]) -> Iterator[tuple[Case, str, Bundle, Bundle]]:
    """Every (case, id, inputs, expected) of ``components`` that the grader judges."""
    for component in components:
        for path in sorted((EXPECTED_ROOT / component).glob("*.json")):
            header, expected = read_bundle(EXPECTED_ROOT / component, path.stem)
            _, inputs = read_bundle(INPUTS_ROOT / component, path.stem)
            yield CASES[(component, header["kind"])], path.stem, inputs, expected


def scaled(expected: Bundle, factor: float) -> Bundle:
    """``expected`` with every stored tolerance times ``factor`` and no hint-revealing text."""
    out = {k: v * factor if k.endswith(".atol") else v for k, v in expected.items()}
    return out | {"reveal": False}


def margin(case: Case, outputs, expected: Bundle, inputs: Bundle) -> float | None:
    """The smallest factor on the tolerances at which the case passes (log bisection)."""
    if not any(k.endswith(".atol") for k in expected):
        return None

    def passes(factor: float) -> bool:
        return judge_case(case, outputs, scaled(expected, factor), inputs) is None

    low, high = math.log(MARGIN_FLOOR), math.log(MARGIN_CEILING)
    if passes(MARGIN_FLOOR):
        return 0.0
    if not passes(MARGIN_CEILING):
        return math.inf
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        low, high = (low, middle) if passes(math.exp(middle)) else (middle, high)
    return math.exp(high)


def styles(compiled: bool) -> dict[str, ModuleType]:
    found = {"reference": reference_adapters}
    makers = {**STYLES, **TRAINING_STYLES, **(OPTIONAL_STYLES if compiled else {})}
    return found | {name: make() for name, make in makers.items()}


def run_config(config: str, components: list[str], compiled: bool) -> list[Row]:
    """Every style on every case of ``components`` in this process's torch configuration."""
    rows = []
    cases = list(instances(components))
    for style, adapters in styles(compiled).items():
        for case, case_id, inputs, expected in cases:
            if not hasattr(adapters, NUMERIC[case.component]):
                continue
            outputs = run_case(case, adapters, inputs)
            message = judge_case(case, outputs, expected, inputs)
            found = margin(case, outputs, expected, inputs)
            rows.append(Row(config, style, case_id, message is None, found, message or ""))
    return rows


def run_in_subprocess(config, components: list[str], compiled: bool) -> list[Row]:
    """One configuration in a fresh interpreter (the CPU code path is chosen at import)."""
    name, threads, capability = config
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    command = [sys.executable, "-m", "course.cases.fairness", "--worker", name]
    command += ["--threads", str(threads or os.cpu_count() or 1), "--components", *components]
    command += ["--compiled"] if compiled else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {name!r} worker failed:\n{done.stderr[-3000:]}")
    return [Row(**row) for row in json.loads(done.stdout)]


def worst_by_case(rows: list[Row]) -> dict[str, Row]:
    """Each case's worst row: a failure first, then the largest margin."""
    worst: dict[str, Row] = {}

    def badness(row: Row) -> tuple[bool, float]:
        return (not row.passed, -1.0 if row.margin is None else row.margin)

    for row in rows:
        if row.case not in worst or badness(row) > badness(worst[row.case]):
            worst[row.case] = row
    return worst


def report(rows: list[Row], max_margin: float) -> tuple[str, bool]:
    """A table of each case's worst margin and who made it; whether every row is fine."""
    worst = worst_by_case(rows)
    width = max(len(c) for c in worst)
    lines = [f"{'case':<{width}}  worst margin  by (style, configuration)"]
    for case_id, row in sorted(worst.items()):
        shown = "  pass/fail" if row.margin is None else f"{row.margin:11.3g}"
        flag = (
            ""
            if row.passed and (row.margin or 0) <= max_margin
            else "  <-- " + ("FAILS" if not row.passed else f"above {max_margin}")
        )
        lines.append(f"{case_id:<{width}}  {shown}  {row.style}, {row.config}{flag}")
    bad = [r for r in rows if not r.passed or (r.margin or 0) > max_margin]
    styles_seen = sorted({r.style for r in rows})
    configs_seen = sorted({r.config for r in rows})
    lines.append(
        f"{len(rows)} runs: {len(worst)} cases x {len(styles_seen)} styles x "
        f"{len(configs_seen)} configurations ({', '.join(configs_seen)}); "
        f"{sum(not r.passed for r in rows)} failed, "
        f"{sum(r.passed and (r.margin or 0) > max_margin for r in rows)} above margin {max_margin}"
    )
    for row in bad[:20]:
        lines.append(f"  {row.case} [{row.style}, {row.config}]: {row.message[:300]}")
    return "\n".join(lines), not bad


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--components", nargs="+", default=sorted(NUMERIC), choices=sorted(NUMERIC), metavar="C"
    )
    parser.add_argument("--smoke", action="store_true", help="two configurations, not four")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also the torch.compile'd style, in the first configuration (slow)",
    )
    parser.add_argument("--max-margin", type=float, default=MAX_MARGIN)
    parser.add_argument("--json", type=Path, help="also write every run's row here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a configuration's name
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        torch.set_num_threads(args.threads)
        rows = run_config(args.worker, args.components, args.compiled)
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    rows = []
    for index, config in enumerate(SMOKE_CONFIGS if args.smoke else CONFIGS):
        print(f"running {config[0]} ...", file=sys.stderr, flush=True)
        # The compiled style in the first configuration only: inductor compiles each shape anew
        # in every process (minutes on 2 cores).
        rows += run_in_subprocess(config, args.components, args.compiled and index == 0)
    text, fine = report(rows, args.max_margin)
    print(text)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
    return 0 if fine else 1
