"""Resource accounting: the parameter and FLOP counts, measured term by term against the
handout's."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from functools import cache

# A count is probed on one small shape, one hyperparameter changed at a time, and what each change
# adds is compared with what the handout's terms add for it. Counts are integers, so the
# comparison is exact; the shape is small, so a count that builds the model or runs a FLOP
# counter stays cheap.

ACCOUNTING_SHAPE = dict(
    vocab_size=100, context_length=16, d_model=32, num_layers=2, num_heads=4, d_ff=48
)
FLOP_BATCH = 3
FLOP_SEQS = (4, 8, 12, 16)  # the per-layer count as a polynomial in seq: 3 points fit, 1 checks
FLOP_SIZES = f"batch={FLOP_BATCH}, seq={FLOP_SEQS[1]}, d_model={ACCOUNTING_SHAPE['d_model']}"


def exact(count: object) -> Fraction:
    """A returned count as an exact number (an int, a float or a 0-d array or tensor)."""
    value = count.item() if hasattr(count, "item") else count
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"a count must be a number, got {type(value).__name__}")
    return Fraction(value)


def shown(value: Fraction) -> str:
    return f"{value.numerator:,}" if value.denominator == 1 else f"{float(value):,.6g}"


Term = tuple[Callable[[], Fraction], int, str]


def first_term_off(terms: list[Term]) -> list[str]:
    """The first term whose measured share differs from the handout's, as ``[line]`` (the line's
    ``{got}`` and ``{want}`` filled in); a probe whose call fails is skipped."""
    for measure, want, line in terms:
        try:
            got = measure()
        except Exception:  # noqa: BLE001  (the count refuses that shape: nothing measured)
            continue
        if got != want:
            return [line.format(got=shown(got), want=f"{want:,}")]
    return []


def parameter_terms(count: Callable[..., object]) -> list[str]:
    """Which term of the parameter count differs: the vocab_size terms, the feed-forward, the
    rest of a layer, the final norm (``count`` takes ``run_count_parameters``' arguments)."""
    s = ACCOUNTING_SHAPE
    d, layers, d_ff, vocab = s["d_model"], s["num_layers"], s["d_ff"], s["vocab_size"]

    def at(**changed: int) -> Fraction:
        return exact(count(**(s | changed)))

    def rest_of_layer(width: int) -> Fraction:  # one more layer, less the handout's feed-forward
        return at(d_model=width, num_layers=layers + 1) - at(d_model=width) - 3 * width * d_ff

    layer = 4 * d * d + 3 * d * d_ff + 2 * d
    return first_term_off(
        [
            (
                lambda: at(vocab_size=vocab + 1) - at(),
                2 * d,
                "your count grows by {got} per vocab entry, the handout's by 2 d_model = {want}: "
                "the token embeddings and the LM head (vocab_size x d_model each, not shared)",
            ),
            (
                lambda: at(d_ff=d_ff + 1) - at(),
                3 * d * layers,
                "your count grows by {got} per unit of d_ff, the handout's by 3 d_model "
                "num_layers = {want}: the feed-forward (w1, w2, w3, d_model x d_ff each, per layer)",
            ),
            (
                lambda: rest_of_layer(d),
                4 * d * d + 2 * d,
                "besides the feed-forward, each layer adds {got} parameters to your count, the "
                "handout's 4 d_model^2 + 2 d_model = {want}: the Q, K, V and output projections "
                f"(d_model x d_model each) and ln1, ln2 (d_model each), at d_model={d}",
            ),
            (
                lambda: (
                    at(num_heads=2 * s["num_heads"], context_length=2 * s["context_length"]) - at()
                ),
                0,
                "your count changes by {got} when num_heads and context_length double, the "
                "handout's by {want}: the projections are d_model x d_model whatever the heads, "
                "and RoPE has no parameters",
            ),
            (
                lambda: at() - layers * layer - 2 * vocab * d,
                d,
                "besides the layers and the vocab_size terms your count holds {got}, the "
                "handout's d_model = {want}: the final norm's gain (ln_final)",
            ),
        ]
    )


def seq_polynomial(values: list[Fraction]) -> tuple[Fraction, Fraction, Fraction]:
    """``(c2, c1, c0)`` with ``values[i] = c2 T^2 + c1 T + c0`` at ``T = FLOP_SEQS[i]``, fitted on
    the first three points; ``ValueError`` when the last does not lie on it (nothing to name)."""
    (t0, t1, t2, t3), (v0, v1, v2, v3) = FLOP_SEQS, values
    slope01, slope12 = (v1 - v0) / (t1 - t0), (v2 - v1) / (t2 - t1)
    c2 = (slope12 - slope01) / (t2 - t0)
    c1 = slope01 - c2 * (t0 + t1)
    c0 = v0 - c2 * t0 * t0 - c1 * t0
    if c2 * t3 * t3 + c1 * t3 + c0 != v3:
        raise ValueError("the count is not a quadratic in seq")
    return c2, c1, c0


def flop_terms(flops: Callable[..., object]) -> list[str]:
    """Which term of the forward FLOP count differs: the LM head, the feed-forward, then the rest
    of a layer as a polynomial in the sequence length (attention's seq^2, the projections' seq),
    then anything outside the layers (``flops`` takes ``run_forward_flops``' arguments)."""
    s, batch, seq = ACCOUNTING_SHAPE, FLOP_BATCH, FLOP_SEQS[1]
    d, layers, d_ff, vocab = s["d_model"], s["num_layers"], s["d_ff"], s["vocab_size"]

    def at(seq: int = seq, **changed: int) -> Fraction:
        return exact(flops(**(s | changed), batch_size=batch, sequence_length=seq))

    def rest_of_layer(t: int) -> Fraction:  # one more layer, less the handout's feed-forward
        return at(t, num_layers=layers + 1) - at(t) - 6 * batch * t * d * d_ff

    rest = 8 * batch * seq * d * d + 4 * batch * seq * seq * d
    outer = [
        (
            lambda: at(num_heads=2 * s["num_heads"]) - at(),
            0,
            "your count changes by {got} when num_heads doubles, the handout's by {want}: "
            "splitting d_model into heads changes no matmul's size",
        ),
        (
            lambda: (
                at() - layers * (rest + 6 * batch * seq * d * d_ff) - 2 * batch * seq * d * vocab
            ),
            0,
            "besides the layers and the LM head your count holds {got} FLOPs, the handout's "
            "{want}: the embedding lookup and the norms are not matmuls",
        ),
    ]
    growth = [
        (
            lambda: at(vocab_size=vocab + 1) - at(),
            2 * batch * seq * d,
            "your count grows by {got} per vocab entry, the handout's by 2 batch seq d_model "
            f"= {{want}} ({FLOP_SIZES}): the LM head's matmul",
        ),
        (
            lambda: at(d_ff=d_ff + 1) - at(),
            6 * batch * seq * d * layers,
            "your count grows by {got} per unit of d_ff, the handout's by 6 batch seq d_model "
            "num_layers = {want}: the feed-forward's three matmuls in every layer (2 FLOPs per "
            "multiply-add)",
        ),
    ]
    return first_term_off([*growth, *layer_flop_terms(rest_of_layer), *outer])


def layer_flop_terms(rest_of_layer: Callable[[int], Fraction]) -> list[Term]:
    """A layer's FLOPs beyond the feed-forward (``rest_of_layer(seq)``) as ``c2 seq^2 + c1 seq +
    c0``: attention's term, the projections' term, and a term that should not be there."""
    batch, d, seq = FLOP_BATCH, ACCOUNTING_SHAPE["d_model"], FLOP_SEQS[1]

    @cache
    def coefficients() -> tuple[Fraction, Fraction, Fraction]:
        return seq_polynomial([rest_of_layer(t) for t in FLOP_SEQS])

    return [
        (
            lambda: coefficients()[0],
            4 * batch * d,
            "per layer, the seq^2 term of your count is {got} seq^2, the handout's 4 batch "
            f"d_model = {{want}} ({FLOP_SIZES}): Q K^T and the weighted sum of V, 2 batch seq^2 "
            "d_model FLOPs each (the full seq x seq matrix)",
        ),
        (
            lambda: coefficients()[1],
            8 * batch * d * d,
            "per layer, besides the feed-forward, the seq-linear term of your count is {got} "
            "seq, the handout's 8 batch d_model^2 = {want}: the Q, K, V and output projections "
            "(2 batch seq d_model^2 FLOPs each)",
        ),
        (
            lambda: coefficients()[2],
            0,
            "per layer, your count holds {got} FLOPs that do not grow with seq, the handout's "
            "{want}: every matmul's FLOPs are proportional to the tokens",
        ),
        (
            lambda: rest_of_layer(seq),
            8 * batch * seq * d * d + 4 * batch * seq * seq * d,
            "besides the feed-forward, each layer adds {got} FLOPs to your count, the "
            f"handout's {{want}} ({FLOP_SIZES}): the four projections (8 batch seq d_model^2) "
            "and attention (4 batch seq^2 d_model)",
        ),
    ]
