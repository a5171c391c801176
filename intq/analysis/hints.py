"""What a compared tensor's symptoms point to: one short hint per cause, never the method in use.

:func:`hints` looks at one integer tensor's metrics and at the graph around it and returns the
causes that apply, most specific first:

* **fixed-range output** — LOGISTIC, SOFTMAX, TANH, L2_NORMALIZATION, LOG_SOFTMAX outputs have
  parameters the int8 spec fixes (e.g. 1/256): their saturation or coarseness is the op's int8
  form, which no calibration changes;
* **range-mismatched join** — a CONCATENATION or ADD whose inputs' float ranges differ by more than
  :data:`JOIN_RATIO` (32): one int8 scale cannot hold both (a detector's box coordinates 0..320
  beside class scores 0..1 lose the scores), whatever the tensor's overall SQNR says;
* **unfolded affine** — a MUL/ADD/SUB by a constant right after a linear layer: one more
  requantization that folding into the layer removes;
* **dead / saturated channels** — output channels of a linear layer that are always 0 (named on a
  poor layer only: they cost compute, not accuracy), or whose values mostly lie beyond the int8
  grid;
* **clipping** / **resolution** — the range is too narrow / too wide for the data; the advice
  names calibration methods *other* than the one in use;
* **inherited** — the error comes from an input that is already poor;
* **weights** — a linear layer with poor SQNR and none of the above; the advice knows the settings
  in use (no "per-channel weights" on a per-channel graph, no AdaRound once it was applied).

:func:`weight_bound_hints` adds one hint per graph output whose weight-only bound
(:mod:`intq.analysis.weight_bound`: int8 weights, every activation float) is below
:data:`POOR_SQNR_DB`: no activation precision or calibration brings that output higher.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

SATURATION_HINT = 0.01  # more than 1% of values at qmin/qmax
RANGE_USED_HINT = 0.25  # fewer than a quarter of the codes used
POOR_SQNR_DB = 25.0  # below this a layer's error is worth a look
INHERITED_DB = 3.0  # a layer within this many dB of its worst input mostly carries upstream error
JOIN_RATIO = 32.0  # inputs of a join whose ranges differ by more than this cannot share one int8 scale
DEAD_OR_SATURATED_CHANNEL = 0.5  # a channel with more than half its values beyond the grid is saturated

#: Integer ops whose output parameters the int8 spec fixes (spec 003).
FIXED_RANGE_OPS = frozenset({"LOGISTIC", "SOFTMAX", "TANH", "L2_NORMALIZATION", "LOG_SOFTMAX"})
LINEAR_INT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"})
JOIN_OPS = frozenset({"CONCATENATION", "ADD"})
CLIPPING_METHODS = ("percentile", "mse", "entropy", "auto")


@dataclass(frozen=True)
class TensorFacts:
    """What :func:`hints` needs to know of one compared tensor."""

    op: str  # the integer op that produced it
    sqnr_db: float
    saturated: float  # fraction of float values beyond the int8 grid
    range_used: float  # fraction of the codes taken
    method: str = ""  # the calibration method the graph was made with ("" if unknown)
    per_channel: bool | None = None  # the graph's weights are per channel (None: unknown)
    notes: tuple[str, ...] = ()  # the graph's conversion notes (what was applied: AdaRound, bias correction...)
    scale: float = 0.0
    upstream: tuple[str, float] | None = None  # the worst compared input and its SQNR
    input_ranges: tuple[tuple[str, float, float], ...] = ()  # (float name, min, max) of each joined input
    affine_after: str | None = None  # the linear op a constant MUL/ADD/SUB follows
    dead_channels: int = 0
    saturated_channels: int = 0
    channels: int = 0
    notes: list[str] = field(default_factory=list)


def _other_methods(method: str) -> str:
    others = [m for m in CLIPPING_METHODS if m != method]
    return ", ".join(others[:-1]) + " or " + others[-1]


def _join_hint(f: TensorFacts) -> str | None:
    spans = [(name, max(abs(lo), abs(hi))) for name, lo, hi in f.input_ranges]
    spans = [(n, s) for n, s in spans if s > 0]
    if len(spans) < 2:
        return None
    (small, s_lo), (large, s_hi) = min(spans, key=lambda t: t[1]), max(spans, key=lambda t: t[1])
    if s_hi <= JOIN_RATIO * s_lo:
        return None
    return (f"range-mismatched join: input {small} spans +-{s_lo:.3g}, input {large} +-{s_hi:.3g} "
            f"({s_hi / s_lo:.0f}x): one int8 scale cannot hold both (the smaller loses its signal); keep "
            f"this tensor out of int8 (intq compare --sensitivity ranks it) or bring the inputs to similar ranges")


def _weights_hint(f: TensorFacts) -> str:
    """What can still help a linear layer whose int8 weights lose its signal, given what is in use:
    per-channel weights unless they are (``per_channel``), AdaRound unless a note says it was applied."""
    adaround = any(n.startswith("AdaRound:") for n in f.notes)
    tries = [] if f.per_channel else ["per-channel weights (drop --per-tensor)"]
    tries += [] if adaround else ["AdaRound (--adaround)"]
    if f.per_channel:
        head = "weights: per-channel int8 weights already lose this layer's signal"
    elif f.per_channel is None:
        head = "weights: the int8 weights lose this layer's signal"
    else:
        head = "weights: per-tensor int8 weights lose this layer's signal"
    advice = f"try {' or '.join(tries)}, " if tries else ""
    return f"{head}; {advice}or keep it in int16 or float (intq compare --sensitivity ranks it)"


def hints(f: TensorFacts) -> list[str]:
    """The hints that apply to one tensor (see the module docstring), most specific first."""
    out: list[str] = []
    if f.op in FIXED_RANGE_OPS and (f.saturated > SATURATION_HINT or f.sqnr_db < POOR_SQNR_DB):
        out.append(f"fixed-range output: {f.op}'s int8 output has the spec's fixed scale {f.scale:.3g}; "
                   "no calibration changes it (small values round to 0, the top saturates): keep this output "
                   "in float or int16 if that matters")
    if f.op in JOIN_OPS:
        join = _join_hint(f)
        if join:
            out.append(join)
    if f.affine_after:
        out.append(f"unfolded affine: a constant {f.op} right after {f.affine_after} costs a second rounding; "
                   "it folds into the layer when the layer's output has no other reader")
    if f.op in FIXED_RANGE_OPS:  # its grid is not the calibration's: no calibration advice
        pass
    elif f.saturated > SATURATION_HINT:
        if f.method in ("minmax", "ema"):
            out.append(f"clipping under {f.method}: these samples exceed the calibration data's range; calibrate "
                       "on more representative data")
        else:
            suggest = "minmax or a higher percentile" if f.method == "percentile" else "minmax"
            out.append(f"clipping: the {f.method or 'calibrated'} range is too narrow; calibrate with {suggest}, "
                       "or more data")
    elif f.range_used < RANGE_USED_HINT and f.sqnr_db < POOR_SQNR_DB:
        out.append(f"resolution: few codes used; outliers set the range: try {_other_methods(f.method)} calibration")
    elif f.sqnr_db < POOR_SQNR_DB and f.upstream is not None and f.upstream[1] - f.sqnr_db < INHERITED_DB:
        out.append(f"inherited: its input {f.upstream[0]} is already at {f.upstream[1]:.1f} dB; fix that layer first")
    elif f.sqnr_db < POOR_SQNR_DB and f.op in LINEAR_INT_OPS and not (f.dead_channels or f.saturated_channels):
        out.append(_weights_hint(f))
    if f.channels and f.dead_channels and f.sqnr_db < POOR_SQNR_DB:  # harmless on a good layer: not a culprit
        out.append(f"dead channels: {f.dead_channels} of {f.channels} output channels are always 0")
    if f.channels and f.saturated_channels:
        out.append(f"saturated channels: {f.saturated_channels} of {f.channels} output channels lie mostly "
                   "beyond the int8 grid (the range fits the other channels)")
    return out


def weight_bound_hints(bounds: Mapping[str, float], *, per_channel: bool = True, notes: Iterable[str] = ()) -> list[str]:
    """"weight precision caps output X at B dB" for each output (name -> weight-only bound in dB)
    below :data:`POOR_SQNR_DB`, with what could still help and is not already in use: per-channel
    weights if the graph has per-tensor ones, AdaRound unless a conversion note (``notes``) says it
    was applied; otherwise only what leaves int8 weights (QAT, or the layer in float)."""
    applied = any(n.startswith("AdaRound:") for n in notes)
    out = []
    for name, db in bounds.items():
        if db >= POOR_SQNR_DB:
            continue
        tries = ([] if per_channel else ["per-channel weights"]) + ([] if applied else ["AdaRound (--adaround)"])
        advice = (f"try {' or '.join(tries)}" if tries else
                  "no calibration or activation precision helps: train with quantization (QAT) or keep its layers in float")
        out.append(f"weight precision caps output {name} at {db:.1f} dB (int8 weights, every activation in float): "
                   f"{advice}")
    return out
