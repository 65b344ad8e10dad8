"""Diagnoses read off a failed case's outputs (``diagnosis:`` lines; see ``tests/localize/``):
the cosine schedule phase by phase, gradient clipping against the global L2 norm, AdamW step
by step, with step 1 fitted term by term (the learning rate used, bias correction, decay), and
the defining properties of the single layers (SiLU's ratio, softmax's rows, RMSNorm's axis).
Each says only what it measured, and nothing when its measurement does not hold."""

from __future__ import annotations

import math
from collections.abc import Callable

import regex
import torch

from tests.cases.core import Bundle


def largest(t: torch.Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


def schedule_phases(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """Which phases of the cosine schedule (warm-up, cosine, after the cycle) differ."""
    got, want = outputs.get("lrs"), expected.get("lrs")
    if not isinstance(got, list) or not isinstance(want, list) or len(got) != len(want):
        return []
    tolerance = 1e-9 * max(1.0, abs(inputs["max"]))
    warmup, cycle, its = inputs["warmup"], inputs["cycle"], inputs["its"]
    phases = {
        f"warm-up (it < {warmup})": lambda it: it < warmup,
        f"cosine ({warmup} <= it <= {cycle})": lambda it: warmup <= it <= cycle,
        f"after the cycle (it > {cycle})": lambda it: it > cycle,
    }
    wrong = {
        name: [
            it
            for it, a, b in zip(its, got, want, strict=True)
            if in_phase(it) and not (isinstance(a, float) and abs(a - b) <= tolerance)
        ]
        for name, in_phase in phases.items()
    }
    bad = {name: off for name, off in wrong.items() if off}
    right = [
        name.split(" (")[0]
        for name, off in wrong.items()
        if not off and any(map(phases[name], its))
    ]
    if not bad:
        return []
    parts = [f"{name}: {len(off)} rates off, first at it={off[0]}" for name, off in bad.items()]
    return [
        "the schedule differs in "
        + "; ".join(parts)
        + (f" (right in {', '.join(right)})" if right else "")
    ]


def scale_factors(grads: list[torch.Tensor], outs: list[object]) -> list[float] | None:
    """The factor each nonzero gradient was scaled by; ``None`` unless every output is its
    gradient times a factor."""
    factors = []
    for g, out in zip(grads, outs, strict=True):
        g = g.double()
        if not isinstance(out, torch.Tensor) or out.shape != g.shape:
            return None
        if not g.any():
            continue  # any factor leaves a zero gradient as it is
        factor = float((out.double() * g).sum() / (g * g).sum())
        if largest(out.double() - factor * g) > 1e-4 * largest(g):
            return None
        factors.append(factor)
    return factors


def clipping_lines(grads: list[torch.Tensor], outs: list[object], max_norm: float) -> list[str]:
    """Clipped gradients ``outs`` compared with the global L2 norm of ``grads``: one factor for
    all, and the norm it implies."""
    factors = scale_factors(grads, outs)
    if not factors:
        return []
    norms = torch.stack([g.double().norm() for g in grads])
    global_norm = float(norms.pow(2).sum().sqrt())
    if max(factors) - min(factors) > 1e-6 * max(abs(f) for f in factors):
        return [
            f"your gradients were scaled by different factors ({min(factors):.4g} to "
            f"{max(factors):.4g}): clip all of them by one factor, from one global L2 norm over "
            f"every gradient ({global_norm:.4g})"
        ]
    line = clipping_factor_line(factors[0], max_norm, global_norm, norms)
    return [line] if line else []


def clipping_norms(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """Each round of the clipping case compared with the global L2 norm (every round starts from
    the same gradients)."""
    present = [i for i in range(inputs["count"]) if i not in inputs["missing"]]
    grads = [inputs[f"g{i}"] for i in present]
    for k, max_norm in enumerate(inputs["max_norms"]):
        lines = clipping_lines(grads, [outputs.get(f"round{k}.g{i}") for i in present], max_norm)
        if lines:
            return [f"round {k}: {lines[0]}"]
    return []


def clipping_factor_line(
    factor: float, max_norm: float, global_norm: float, norms: torch.Tensor
) -> str:
    """What one common scale factor says about the norm it was computed from."""
    if math.isclose(factor, min(1.0, max_norm / (global_norm + 1e-6)), rel_tol=1e-6):
        return ""
    if global_norm <= max_norm:
        return (
            f"the global norm {global_norm:.4g} is within max_l2_norm {max_norm:g}, so the "
            f"gradients stay as they are; yours were scaled by {factor:.4g}"
        )
    if math.isclose(factor, 1.0, rel_tol=1e-9):
        return (
            f"the global norm {global_norm:.4g} exceeds max_l2_norm {max_norm:g}, but your "
            "gradients were not scaled"
        )
    if factor > 1:
        inverse = math.isclose(factor, (global_norm + 1e-6) / max_norm, rel_tol=1e-4)
        return (
            f"your gradients grew (scaled by {factor:.4g}): clipping scales them down, by "
            f"max_l2_norm / (global L2 norm + 1e-6) < 1"
            + (", and yours is its inverse" if inverse else "")
        )
    implied = max_norm / factor
    candidates = {
        "the sum of the per-parameter norms": float(norms.sum()),
        "the squared global norm (no square root)": global_norm**2,
        "the largest per-parameter norm": float(norms.max()),
    }
    named = next(
        (n for n, v in candidates.items() if math.isclose(implied, v + 1e-6, rel_tol=1e-4)), ""
    )
    return (
        f"your scale factor {factor:.6g} is max_l2_norm / {implied:.6g}"
        + (f", i.e. {named}" if named else "")
        + f"; it must be max_l2_norm / (global L2 norm + 1e-6), the global norm being "
        f"{global_norm:.6g}"
    )


def first_step_terms(out: torch.Tensor, inputs: Bundle) -> list[tuple[int, float, float]]:
    """Per group: the step-1 update of its parameters fitted as ``a * sign(g) + b * p`` (at step
    1 the handout's update is ``-lr sign(g) - lr weight_decay p``); groups not of that form are
    left out."""
    offset, rows = 0, {}
    for i, group in enumerate(inputs["group_of"]):
        p, g = inputs[f"p{i}"].double().flatten(), inputs[f"g{i}"][0].double().flatten()
        delta = out[0, offset : offset + p.numel()].double() - p
        offset += p.numel()
        rows.setdefault(group, []).append((torch.stack([torch.sign(g), p], 1), delta))
    fitted = []
    for group, parts in sorted(rows.items()):
        design = torch.cat([d for d, _ in parts])
        target = torch.cat([t for _, t in parts])
        solution = torch.linalg.lstsq(design, target[:, None]).solution.flatten()
        if largest(design @ solution - target) <= 1e-6 * max(largest(target), 1e-12):
            fitted.append((group, float(solution[0]), float(solution[1])))
    return fitted


def bias_correction_names(b1: float, b2: float) -> dict[str, float]:
    """Step 1's update in units of lr under each way of getting bias correction wrong."""
    return {
        "no bias correction": (1 - b1) / math.sqrt(1 - b2),
        "the bias corrections swapped (m divided by 1-beta2^t, v by 1-beta1^t)": (
            (1 - b1) / (1 - b2)
        )
        ** 1.5,
        "only m bias-corrected": 1 / math.sqrt(1 - b2),
        "only v bias-corrected": 1 - b1,
    }


def adamw_first_step(out: torch.Tensor, inputs: Bundle) -> list[str]:
    """Step 1 is ``theta - lr sign(g)`` decayed by ``(1 - lr wd)``, the decay applied before the
    update (torch's order: ``a = -lr``) or after it (the handout's: ``a = -lr (1 + b)``)."""
    defaults = inputs["defaults"]
    b1, b2 = defaults["betas"]
    ratios = bias_correction_names(b1, b2)
    for group, a, b in first_step_terms(out, inputs):
        options = defaults | inputs["groups"][group]
        lr, wd = options["lr"], options["weight_decay"]
        where = f"group {group}: " if len(inputs["groups"]) > 1 else ""
        steps = (-a / lr, -a / (lr * (1 + b)))
        if not any(math.isclose(step, 1.0, rel_tol=1e-4) for step in steps):
            if lr != defaults["lr"] and any(
                math.isclose(step * lr, defaults["lr"], rel_tol=1e-4) for step in steps
            ):
                return [
                    f"{where}step 1 moved each parameter by the default lr {defaults['lr']:g}, "
                    f"not its group's lr {lr:g}: read lr (every hyperparameter) from the group"
                ]
            named = next(
                (n for n, r in ratios.items() for st in steps if math.isclose(st, r, rel_tol=1e-3)),
                "",
            )
            return [
                f"{where}step 1 moved each parameter by {steps[0]:.4g} x lr against sign(grad) "
                "(decay aside); with bias correction it is 1 x lr (m_hat / sqrt(v_hat) = g / |g| "
                "at step 1)" + (f": this is {named}" if named else "")
            ]
        decay = -b / (lr * wd) if wd else 0.0
        if wd and not math.isclose(decay, 1.0, rel_tol=1e-4):
            named = {
                0.0: ": no decoupled decay (decay added to the gradient vanishes in m / sqrt(v))",
                1 / lr: ": the decay lacks the lr factor",
                math.sqrt(1 - b2) / (1 - b1): ": the decay uses the bias-corrected step size "
                "alpha_t, not lr",
            }
            found = next((n for v, n in named.items() if math.isclose(decay, v, abs_tol=1e-2)), "")
            return [
                f"{where}step 1's weight decay moved each parameter by {decay:.4g} x lr * "
                f"weight_decay * theta, not 1 x (decoupled: theta -= lr * weight_decay * theta)"
                + found
            ]
    return []


def adamw_steps(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """Which step first diverges, and what step 1 shows about lr, bias correction and decay."""
    out = outputs.get("out")
    if not isinstance(out, torch.Tensor) or out.shape != expected["out"].shape:
        return []
    atol = float(expected["out.atol"])
    error = (out.double() - expected["out"]).abs().amax(1)
    off = [int(s) for s in torch.nonzero(error > atol).flatten()]
    if not off:
        return []
    if off[0] > 0:
        return [
            f"your parameters match for {off[0]} step{'s' * (off[0] > 1)} and first differ after "
            f"step {off[0] + 1}: look at what carries over between steps (m and v kept in the "
            "optimizer's state, t counted per parameter from 1, bias correction with that t)"
        ]
    return adamw_first_step(out, inputs)


def run_starts(data: torch.Tensor, rows: torch.Tensor) -> list[int] | None:
    """Where each row starts in ``data`` (distinct ids) when every row is a run of consecutive
    tokens of it; ``None`` otherwise (or when the rows are empty)."""
    width = rows.shape[-1]
    position = {int(v): i for i, v in enumerate(data.tolist())}
    starts = []
    for row in rows.reshape(-1, width).tolist() if width else []:
        start = position.get(int(row[0]), -1)
        if start < 0 or data[start : start + width].tolist() != row:
            return None
        starts.append(start)
    return starts or None


def window_lines(data: torch.Tensor, x: object, y: object, context_length: int) -> list[str]:
    """What ``get_batch``'s rows are, measured against a dataset of distinct ids: how many
    consecutive tokens each row holds, where it starts, and where the targets start."""
    if not all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in (x, y)):
        return []
    lines = []
    for name, t in (("x", x), ("y", y)):
        if t.shape[-1] == 0:
            lines.append(f"{name} rows are empty, not context_length={context_length} tokens")
    x_starts, y_starts = run_starts(data, x), run_starts(data, y)
    if x_starts and x.shape[-1] != context_length:
        lines.append(
            f"x rows are runs of {x.shape[-1]} consecutive dataset tokens, not "
            f"context_length={context_length}"
        )
    last = len(data) - context_length - 1
    if x_starts and max(x_starts) > last:
        lines.append(
            f"x rows start as late as {max(x_starts)}, past the last valid start {last} "
            "(len(dataset) - context_length - 1): each window needs context_length + 1 tokens"
        )
    if x_starts and y_starts:
        shifts = sorted({b - a for a, b in zip(x_starts, y_starts, strict=True)})
        if shifts != [1]:
            lines.append(
                f"y rows start {', '.join(map(str, shifts))} token(s) after their x row, not 1: "
                "the targets are the inputs shifted by one"
            )
        elif y.shape[-1] != context_length:
            lines.append(
                f"y rows are runs of {y.shape[-1]} consecutive dataset tokens, not "
                f"context_length={context_length}"
            )
    return (lines + batch_lines(data, x, y, x_starts))[:2]


def batch_lines(data: torch.Tensor, x: torch.Tensor, y: torch.Tensor, x_starts) -> list[str]:
    """Rows of a batch that are all one window, and targets that are one token per row."""
    lines = []
    if x.dim() >= 2 and x.shape[-2] > 1 and x.shape[-1] > 0 and x_starts:
        batches = x.reshape(-1, *x.shape[-2:])
        # Rows that all equal their batch's first by chance: (1 / valid starts) per such row.
        starts, repeats = len(data) - x.shape[-1], len(batches) * (x.shape[-2] - 1)
        unlikely = starts >= 2 and repeats * math.log(starts) >= math.log(1e6)
        if unlikely and all(bool((b == b[0]).all()) for b in batches):
            lines.append(
                f"every row of a batch is the same window ({x.shape[-2]} rows, one start per "
                "batch): each row needs its own random start"
            )
    if x_starts and y.shape == x.shape[:-1]:
        after = [s + x.shape[-1] for s in x_starts]
        if all(a < len(data) for a in after) and y.flatten().tolist() == data[after].tolist():
            lines.append(
                "y holds one token per row, the one after the x row: the targets are whole "
                "rows, the inputs shifted by one, shaped (batch_size, context_length) like x"
            )
    return lines


def window_layout(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """A get_batch case's rows measured against its dataset (see :func:`window_lines`)."""
    return window_lines(
        inputs["dataset"], outputs.get("x"), outputs.get("y"), inputs["context_length"]
    )


def rope_frequencies(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """How far each pair turns at position 1, where every frequency theta^(-2k/d_k) is at most
    1 rad (no wrap): the first pair that turns by another angle, and whether by the inverse."""
    x, out = inputs["x"].double(), outputs.get("out")
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return []
    d = x.shape[-1]
    at = inputs["positions"].expand(x.shape[:-1]) == 1
    before, after = x[at].reshape(-1, d // 2, 2), out.double()[at].reshape(-1, d // 2, 2)
    if not torch.allclose(after.norm(dim=-1), before.norm(dim=-1), rtol=1e-3, atol=1e-4):
        return []  # not a rotation of each pair: no angle to read
    angle = torch.atan2(after[..., 1], after[..., 0]) - torch.atan2(before[..., 1], before[..., 0])
    angle = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi
    angle = angle.masked_fill(before.norm(dim=-1) < 0.05, math.nan).nanmedian(0).values
    wanted = inputs["theta"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    off = ((angle - wanted).abs() > 0.02).nonzero().flatten().tolist()
    if not at.any() or angle.isnan().any() or not off:
        return []
    k = off[0]
    line = (
        f"at position 1 pair {k} of your RoPE turns by {float(angle[k]):.4g} rad, not "
        f"theta^(-2k/d_k) = {float(wanted[k]):.4g}"
    )
    if abs(float(angle[k]) - 1 / float(wanted[k])) <= 0.02:
        line += (
            ": the inverse, theta^(+2k/d_k); the frequencies must fall from 1 towards 1/theta "
            "along the pairs"
        )
    return [line]


def rope_positions(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """The position each token was rotated for, read off the angle of every pair whose
    frequency keeps positions up to ``max_seq_len`` within half a turn, against its token
    position."""
    x, out = inputs["x"].double(), outputs.get("out")
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return []
    d = x.shape[-1]
    frequencies = inputs["theta"] ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    # Below 0.01 rad per position a float32 angle's rounding is a sizeable share of a position.
    usable = (frequencies * inputs["max_seq_len"] < math.pi) & (frequencies > 0.01)
    before, after = x.reshape(*x.shape[:-1], -1, 2), out.double().reshape(*x.shape[:-1], -1, 2)
    angle = torch.atan2(after[..., 1], after[..., 0]) - torch.atan2(before[..., 1], before[..., 0])
    angle = torch.remainder(angle + math.pi, 2 * math.pi) - math.pi
    estimates = (angle / frequencies).masked_fill(before.norm(dim=-1) < 0.05, math.nan)
    estimates = estimates[..., usable]
    used = estimates.nanmedian(-1).values
    agreeing = ((estimates - used[..., None]).abs() <= 0.05).double().mean()
    if not usable.any() or used.isnan().any() or agreeing < 0.9:
        return []  # the pairs disagree: not one position per token, so nothing to read
    wanted = inputs["positions"].double().expand(x.shape[:-1])
    if (used - wanted).abs().max() <= 0.05:
        return []
    row = used.reshape(-1, used.shape[-1])[0].round().long().tolist()
    named = ""
    if torch.allclose(used, torch.arange(used.shape[-1], dtype=torch.float64), atol=0.05):
        named = ": the index in the sequence, not token_positions"
    elif torch.allclose(used, -wanted, atol=0.05):
        named = ": the angle's sign is flipped (rotate by +position x frequency)"
    return [
        f"your RoPE rotated the first sequence's tokens for positions {row}, but its "
        f"token_positions are {wanted.reshape(-1, used.shape[-1])[0].long().tolist()}{named}"
    ]


def rope_table_lines(
    state: dict[str, object], weights: set[str], max_seq_len: int, d_k: int
) -> list[str]:
    """The entries of a model's state dict that the handout's ``weights`` lack and that hold a
    RoPE table: ``max_seq_len`` rows of ``d_k / 2`` or ``d_k`` columns (after leading dims of
    size 1) whose row for position 0 is cos 0 = 1 or sin 0 = 0 throughout."""
    entries = []
    for name, value in state.items():
        if name in weights or not isinstance(value, torch.Tensor) or value.dim() < 2:
            continue
        rows, columns = value.shape[-2:]
        if any(n != 1 for n in value.shape[:-2]) or (rows, columns) not in (
            (max_seq_len, d_k // 2),
            (max_seq_len, d_k),
        ):
            continue
        first = value.detach().reshape(rows, columns)[0]
        if bool((first == 1).all()) or bool((first == 0).all()):
            entries.append(f"{name} {tuple(value.shape)}")
    if not entries:
        return []
    more = f" and {len(entries) - 2} more" if len(entries) > 2 else ""
    return [
        f"your model's state dict holds {', '.join(entries[:2])}{more}: RoPE's cos/sin tables "
        f"({max_seq_len} rows, one per position; position 0's row is cos 0 = 1 or sin 0 = 0), "
        "which the handout's weights lack, so loading them strictly fails. They are computed "
        "from theta and d_k, not learned: register them with persistent=False"
    ]


def rmsnorm_axis(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """Over which axis ``out / weight`` has a root mean square of 1: RMSNorm makes it 1 over the
    last axis (each position's features)."""
    x, out, weight = inputs["x"], outputs.get("out"), inputs["weight"].double()
    if not isinstance(out, torch.Tensor) or out.shape != x.shape or (weight.abs() < 0.05).any():
        return []
    normalized = out.double() / weight
    rms = [normalized.pow(2).mean(dim).sqrt() for dim in range(x.dim())]
    if (rms[-1] - 1).abs().max() <= 5e-3:
        return []
    others = [dim for dim in range(x.dim() - 1) if (rms[dim] - 1).abs().max() <= 5e-3]
    return [
        f"out / weight must have a root mean square of 1 over the last axis (each position's "
        f"d_model features); yours has {float(rms[-1].min()):.4g} to {float(rms[-1].max()):.4g}"
        + (f", and 1 over axis {others[0]}: normalize over the last axis" if others else "")
    ]


def float32_line(
    rmsnorm: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    gain: torch.Tensor,
    out: torch.Tensor,
) -> list[str]:
    """An RMSNorm whose output on low-precision ``x`` is off RMSNorm's definition: is it right on
    the same values in float32? Then it computes its statistics in the input's dtype.
    ``rmsnorm(x, gain)`` runs the student's RMSNorm; ``[]`` when ``out`` is right, or the float32
    run is off too."""
    wide = x.double()
    expected = wide * torch.rsqrt(wide.square().mean(-1, keepdim=True) + 1e-5) * gain.double()
    if torch.allclose(out.double(), expected, atol=0.05, rtol=0.02):
        return []
    if not torch.allclose(rmsnorm(x.float(), gain.float()).double(), expected, atol=1e-3):
        return []
    line = (
        f"your RMSNorm is right on these inputs in float32 but not in {x.dtype}: compute the "
        "mean square in float32 (x.float()) and cast the result back to the input's dtype"
    )
    if x.dtype == torch.float16 and float(x.abs().max()) > 256:
        line += f"; in float16 x**2 overflows past |x| = 256, and these reach {float(x.abs().max()):.0f}"
    return [line]


def not_finite_line(x: torch.Tensor, out: torch.Tensor) -> list[str]:
    """Where an elementwise function of finite ``x`` gave NaN or inf: at which inputs, and
    whether only large ones (an exp that overflowed)."""
    bad = ~torch.isfinite(out) if out.shape == x.shape else None
    if bad is None or not bad.any() or not torch.isfinite(x).all():
        return []
    where = sorted({float(v) for v in x[bad].flatten().tolist()})
    line = f"your output is NaN or inf at x = {', '.join(f'{v:g}' for v in where[:4])}"
    if min(abs(v) for v in where) > 80:
        line += (
            ", only where |x| is large: an exp(x) there overflows float32 (past x = 88), and "
            "inf / inf is NaN; write it in a form that stays finite (torch.sigmoid is)"
        )
    return [line]


def silu_ratio(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """``silu(x) / x`` is sigmoid(x): it rises from near 0 (very negative x) through 1/2 to near 1
    (very positive x). Read at the case's most negative and most positive x."""
    x, out = inputs["x"].double().flatten(), outputs.get("out")
    if not isinstance(out, torch.Tensor) or out.numel() != x.numel():
        return []
    ratio = out.double().flatten() / x
    low, high = int(x.argmin()), int(x.argmax())
    if x[low] > -1 or x[high] < 1 or not ratio[[low, high]].isfinite().all():
        return []
    at = [(float(x[i]), float(ratio[i]), 1 / (1 + math.exp(-float(x[i])))) for i in (low, high)]
    if all(abs(got - wanted) <= 0.02 for _, got, wanted in at):
        return []
    (x_low, r_low, s_low), (x_high, r_high, s_high) = at
    trend = "falls" if r_low > r_high + 0.5 else "is"
    return [
        f"silu(x) / x must be sigmoid(x), rising with x from near 0 to near 1; yours {trend} "
        f"{r_low:.3g} at x={x_low:.3g} (sigmoid {s_low:.3g}) and {r_high:.3g} at x={x_high:.3g} "
        f"(sigmoid {s_high:.3g}): silu(x) = x * sigmoid(x), sigmoid(x) = 1 / (1 + exp(-x))"
    ]


def softmax_rows(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """Softmax along ``dim`` gives probabilities: non-negative, summing to 1 along ``dim``, the
    largest to each row's largest x. Which of these the output breaks."""
    x, out, dim = inputs["x"], outputs.get("out"), inputs["dim"]
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return []
    out = out.double()
    if not out.isfinite().all():
        return []
    sums = out.sum(dim)
    if (sums - 1).abs().max() > 1e-3:
        along = [d for d in range(x.dim()) if (out.sum(d) - 1).abs().max() <= 1e-3]
        named = f", and 1 along dim {along[0]}: normalize along the dim given" if along else ""
        if not named and out.min() >= 0:
            named = ": divide each exp by the sum of the exps along dim"
        return [
            f"softmax along dim={dim} must sum to 1 along it; yours sums to "
            f"{float(sums.min()):.4g} to {float(sums.max()):.4g}{named}"
        ]
    if out.min() < 0:
        return [f"softmax's outputs are probabilities; yours has {float(out.min()):.3g}"]
    favoured = (out.argmax(dim) == x.argmax(dim)).double().mean()
    if favoured < 0.5:
        return [
            f"each row's largest x must get its largest probability; yours does in "
            f"{float(favoured):.0%} of the rows along dim={dim}: exp(x - max), not exp(max - x)"
        ]
    return []


def softmax_outputs(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """A softmax case along one dim (:func:`softmax_rows`), or along several (``dims``, one
    output each): the dims it is right along and the ones it is not."""
    if "dims" not in inputs:
        return softmax_rows(inputs, outputs, expected)
    x, right, wrong = inputs["x"].double(), [], []
    for dim in inputs["dims"]:
        out = outputs.get(f"dim{dim}")
        ok = isinstance(out, torch.Tensor) and out.shape == x.shape
        ok = ok and torch.allclose(out.double(), torch.softmax(x, dim), atol=1e-5)
        (right if ok else wrong).append(dim)
    if not wrong:
        return []
    if not right:
        dim = wrong[0]
        return softmax_rows(inputs | {"dim": dim}, {"out": outputs.get(f"dim{dim}")}, expected)
    out = outputs.get(f"dim{wrong[0]}")
    broken = isinstance(out, torch.Tensor) and not out.double().isfinite().all()
    return [
        f"your softmax of these inputs (up to |x| = {float(x.abs().max()):g}) is right along "
        f"dim {right} but not along dim {wrong}"
        + (" (NaN or inf there: an exp overflowed)" if broken else "")
        + ": take the max you subtract and the sum you divide by along the dim given, with "
        "keepdim=True"
        + (", not along the last axis" if all(d % x.dim() == x.dim() - 1 for d in right) else "")
    ]


def bpe_vocab_structure(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """A trained vocabulary is the 256 bytes, the special tokens and one token per merge, and
    stops at ``vocab_size``: which of these the output breaks."""
    vocab, merges = outputs.get("vocab"), outputs.get("merges")
    if not isinstance(vocab, list) or not isinstance(merges, list):
        return []
    tokens = {bytes.fromhex(t) for t in vocab}
    specials = [s.encode("utf-8") for s in inputs["special_tokens"]]
    lines = []
    missing_specials = [s.decode("utf-8") for s in specials if s not in tokens]
    if missing_specials:
        lines.append(f"your vocab lacks the special token(s) {missing_specials}: each gets an id")
    missing_bytes = 256 - sum(bytes([b]) in tokens for b in range(256))
    if missing_bytes:
        lines.append(f"your vocab lacks {missing_bytes} of the 256 single bytes")
    size, wanted = len(vocab), inputs["vocab_size"]
    merged = wanted - 256 - len(specials)
    # Only where the reference's vocabulary reaches vocab_size (a small corpus may run out).
    if size != wanted and len(merges) != merged and len(expected.get("vocab", ())) == wanted:
        lines.append(
            f"your vocab has {size} entries from {len(merges)} merges; vocab_size={wanted} holds "
            f"256 bytes + {len(specials)} special token(s) + {merged} merges"
        )
    return lines[:2]


# --- the training step: gradient accumulation -------------------------------------------------


def accumulation_lines(
    got: list[torch.Tensor], want: list[torch.Tensor], stale: float, forwards: int, batches: int
) -> list[str]:
    """Accumulated gradients ``got`` against the big batch's ``want``: how many forward passes
    ran for ``batches`` micro-batches, one factor for every gradient, or the ``stale`` value the
    gradients held before the call left in them."""
    if forwards != batches:
        return [
            f"your accumulation ran the model forward {forwards} times for {batches} "
            "micro-batches: each micro-batch once"
        ]
    if len(got) != len(want) or any(
        not isinstance(g, torch.Tensor) or g.shape != w.shape
        for g, w in zip(got, want, strict=True)
    ):
        return []
    leftover = [g.double() - w.double() for g, w in zip(got, want, strict=True)]
    if all(largest(d - stale) <= 1e-4 * max(1.0, stale) for d in leftover):
        return [
            f"your gradients are the big batch's plus the {stale:g} they held before the call: "
            "zero the gradients first"
        ]
    factors = scale_factors(want, got)
    if not factors or max(factors) - min(factors) > 1e-3 * max(map(abs, factors)):
        return []
    factor = sum(factors) / len(factors)
    if math.isclose(factor, 1.0, rel_tol=1e-3):
        return []
    return [
        f"your gradients are {factor:.4g} times the big batch's, for every parameter: the "
        f"gradient of the mean loss over {batches} micro-batches is the sum of theirs divided "
        f"by {batches}"
    ]


# --- BPE training and the tokenizer ---------------------------------------------------------

# GPT-2's pre-tokenization pattern, as the handout gives it.
PRETOKEN_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The handout's corpus, one pre-token per word when the words are joined by a special token.
HANDOUT_WORDS = ["low"] * 5 + ["lower"] * 2 + ["widest"] * 3 + ["newest"] * 6
# The handout example worked by hand: before each merge, every pair's count (each word's pairs
# times the word's count: low 5, lower 2, widest 3, newest 6) and the merge the counts decide
# (the most frequent pair; a tie goes to the greater pair). Not a trainer: fixed data.
HANDOUT_STEPS: list[tuple[tuple[str, str], dict[str, int]]] = [
    (("s", "t"), {"l o": 7, "o w": 7, "w e": 8, "e r": 2, "w i": 3, "i d": 3, "d e": 3,
                  "e s": 9, "s t": 9, "n e": 6, "e w": 6}),
    (("e", "st"), {"l o": 7, "o w": 7, "w e": 8, "e r": 2, "w i": 3, "i d": 3, "d e": 3,
                   "e st": 9, "n e": 6, "e w": 6}),
    (("o", "w"), {"l o": 7, "o w": 7, "w e": 2, "e r": 2, "w i": 3, "i d": 3, "d est": 3,
                  "n e": 6, "e w": 6, "w est": 6}),
    (("l", "ow"), {"l ow": 7, "ow e": 2, "e r": 2, "w i": 3, "i d": 3, "d est": 3, "n e": 6,
                   "e w": 6, "w est": 6}),
    (("w", "est"), {"low e": 2, "e r": 2, "w i": 3, "i d": 3, "d est": 3, "n e": 6, "e w": 6,
                    "w est": 6}),
    (("n", "e"), {"low e": 2, "e r": 2, "w i": 3, "i d": 3, "d est": 3, "n e": 6,
                  "e west": 6}),
]  # fmt: skip
# Enough merges to find the first wrong one; a runaway trainer's thousands are not all read.
MERGES_READ = 2000


def handout_merge_line(merges: object) -> str:
    """The counts that decide the first merge that differs from the handout's (``""`` when
    none does, or the merges are not pairs of bytes)."""
    try:
        got = [(a.decode(), b.decode()) for a, b in merges]  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001  (not a list of byte pairs: the assertion says so)
        return ""
    for k, ((want, counts), mine) in enumerate(zip(HANDOUT_STEPS, got, strict=False)):
        if mine != want:
            theirs, yours = counts[" ".join(want)], counts.get(" ".join(mine), 0)
            why = (
                "a tie, which goes to the lexicographically greater pair"
                if theirs == yours
                else "merge the most frequent pair, counting each word's pairs times its count"
            )
            return (
                f"merge #{k} differs: before it, the expected {want} occurs "
                f"{theirs} times and your {mine} {yours} times: {why}"
            )
    return ""


def pretokens_of(text: str, special_tokens: list[str]) -> set[bytes]:
    """The distinct pre-tokens of ``text``: split on the special tokens, then the GPT-2 pattern."""
    pieces = [text]
    if special_tokens:
        ordered = sorted(special_tokens, key=len, reverse=True)
        pieces = regex.split("|".join(map(regex.escape, ordered)), text)
    return {m.group().encode("utf-8") for p in pieces for m in regex.finditer(PRETOKEN_PATTERN, p)}


def merge_sequence_line(merges: list[tuple[bytes, bytes]]) -> str:
    """Each merge must join two tokens that exist by then and make a new one."""
    made = {bytes([b]) for b in range(256)}
    for k, (a, b) in enumerate(merges[:MERGES_READ]):
        unmade = [t for t in (a, b) if t not in made]
        if unmade:
            return (
                f"your merge #{k} {(a, b)} joins {unmade[0]!r}, which is neither a byte nor the "
                "result of an earlier merge: a merge joins two tokens that exist by then"
            )
        if a + b in made:
            return (
                f"your merge #{k} {(a, b)} makes {a + b!r}, a token that already exists (a byte "
                "or an earlier merge's result): each merge makes a new token"
            )
        made.add(a + b)
    return ""


def merge_outside_pretokens_line(merges: list[tuple[bytes, bytes]], pretokens: set[bytes]) -> str:
    """A merge whose token no pre-token of the corpus contains crossed a pre-token boundary."""
    for k, (a, b) in enumerate(merges[:MERGES_READ]):
        if not any(a + b in p for p in pretokens):
            return (
                f"your merge #{k} makes {a + b!r}, which is inside no pre-token of the corpus (the "
                "text split on the special tokens, then cut by the GPT-2 pattern): merges must "
                "stay inside pre-tokens"
            )
    return ""


def tie_break_reason(winner: tuple[bytes, bytes], loser: tuple[bytes, bytes]) -> str:
    """Why ``winner`` is the greater pair of bytes: the first of its tokens that differs from
    ``loser``'s, and the byte (or the end of the shorter token) that decides; ``""`` when
    ``winner`` is not the greater."""
    if winner <= loser:
        return ""
    side = 0 if winner[0] != loser[0] else 1
    big, small = winner[side], loser[side]
    at = next(
        (i for i, (x, y) in enumerate(zip(big, small, strict=False)) if x != y),
        min(len(big), len(small)),
    )
    which = ("first", "second")[side]
    if at == len(small):
        return f"their {which} tokens agree until {small!r} ends, and the longer is greater"
    return (
        f"their {which} tokens differ first at byte {at}: "
        f"{bytes([big[at]])!r} ({big[at]}) > {bytes([small[at]])!r} ({small[at]})"
    )


def counted_order_line(
    first: int, later: int, wanted: list[tuple[bytes, bytes]], counts: list[int]
) -> str:
    """The student's merge #``first`` is the expected merge #``later``; ``counts`` holds each
    expected merge's count when it was made. Once both tokens of a pair exist, no merge adds to
    its count, so a pair merged at #later with the count of #first had that count at #first:
    a tie there, broken the other way."""
    mine, want = wanted[later], wanted[first]
    same = f"your first {first} merges are the expected ones; " if first else ""
    if counts[later] == counts[first] and tie_break_reason(want, mine):
        return (
            f"{same}your merge #{first} {mine} and the expected {want} both occur "
            f"{counts[first]} times there: a tie, which goes to the lexicographically greater "
            f"pair of bytes, the expected one ({tie_break_reason(want, mine)}); compare the "
            "pairs as bytes, not as decoded strings or joined tokens"
        )
    return (
        f"{same}your merge #{first} {mine} is the expected merge #{later}, made at a count of "
        f"{counts[later]}; the expected {want} occurs {counts[first]} times there: merge the "
        "most frequent pair, counting each pre-token's pairs times its count"
    )


def merge_order_line(
    merges: list[tuple[bytes, bytes]],
    wanted: list[tuple[bytes, bytes]],
    counts: list[int] | None = None,
) -> str:
    """Where the merges leave the expected ones: a pair picked early (with ``counts``, each
    expected merge's count when made: whether it was a tie there), or one never picked."""
    first = next((k for k, (a, b) in enumerate(zip(merges, wanted, strict=False)) if a != b), None)
    if first is None:
        return ""
    mine = merges[first]
    same = f"your first {first} merges are the expected ones; " if first else ""
    if mine in wanted[first + 1 :]:
        later = wanted.index(mine, first + 1)
        if counts is not None and len(counts) == len(wanted):
            return counted_order_line(first, later, wanted, counts)
        return (
            f"{same}your merge #{first} {mine} is the expected merge #{later}: from #{first} on "
            f"your trainer picks pairs in another order (expected next: {wanted[first]})"
        )
    return (
        f"{same}your merge #{first} {mine} is not among the {len(wanted)} expected merges: the "
        f"pair counts your trainer picks from differ from the corpus's at #{first}"
    )


def exhaustion_line(made: int, possible: int) -> str:
    """The merges agree as far as both go, but there are too few or too many for the corpus."""
    if made < possible:
        return (
            f"your trainer stopped after {made} merges; {possible} are possible before every "
            "pre-token is one token: a pair whose count dropped is still merged at its new count"
        )
    return (
        f"your trainer made {made} merges where only {possible} are possible on this corpus "
        "(by then every pre-token is one token): stop when no pair is left, vocab_size is a "
        "maximum"
    )


def bpe_training_lines(inputs: Bundle, outputs: Bundle, expected: Bundle) -> list[str]:
    """A trained vocabulary's structure, then properties of the merges: too many for a corpus
    that runs out of pairs, each joins tokens that exist, stays inside a pre-token, and where
    the sequence leaves the expected one (with the two pairs' counts there)."""
    lines = bpe_vocab_structure(inputs, outputs, expected)
    wire = outputs.get("merges")
    if len(lines) >= 2 or not isinstance(wire, list):
        return lines
    merges = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in wire]
    wanted = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in expected["merges"]]
    specials = list(inputs["special_tokens"])
    ran_out = len(expected.get("vocab", ())) < inputs["vocab_size"]
    # A corpus of one unit repeated (then a tail) has the pre-tokens of three units (each join
    # included) and the tail.
    text = inputs.get("text") or inputs["unit"] * min(inputs["repeat"], 3) + inputs["tail"]
    handout = bool(specials) and text == specials[0].join(HANDOUT_WORDS)
    checks = [
        lambda: (
            exhaustion_line(len(merges), len(wanted))
            if ran_out and len(merges) > len(wanted) and merges[: len(wanted)] == wanted
            else ""
        ),
        lambda: merge_sequence_line(merges),
        lambda: merge_outside_pretokens_line(merges, pretokens_of(text, specials)),
        lambda: handout_merge_line(merges) if handout else "",
        lambda: merge_order_line(merges, wanted, expected.get("merge_counts")),
    ]
    found = next((line for line in (check() for check in checks) if line), "")
    return [*lines, found][:2] if found else lines
