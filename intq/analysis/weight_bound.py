"""The weight-only bound: how close to float a model's outputs can come with int8 weights.

Every precision intq offers for activations (int8, int16 / 16x8, float islands) keeps the linear
layers' weights in int8. The **weight-only bound** of a graph output is the SQNR of that output when
*only* the weights are int8 and every activation stays float:

* each linear layer (:data:`intq.passes.linear_layers.LINEAR_OPS`: Conv, ConvTranspose, Gemm,
  MatMul) whose weight is a constant of two or more dimensions gets ``W_hat = q * S``, the int8
  weights exactly as the converter makes them (:func:`intq.convert.weights.weight_scales` and
  :func:`~intq.convert.weights.quantize_weights`: ``S_c = max|W_c| / 127`` per output channel, or one
  ``S`` per tensor without ``per_channel``; ``q = round_half_away(W / S)`` in [-127, 127]);
* the float graph runs with ``W_hat`` on the samples; per output, the score is
  :func:`intq.analysis.sensitivity.output_sqnrs`'s (per axis-1 channel ``10 log10(sum f^2 / sum
  (f - f_hat)^2)`` capped at 60 dB, averaged over the channels), and the per-channel values are kept.

Contract: the bound is what the weights alone cost; activation rounding adds noise that is
independent of it, so a mixed-precision search that keeps int8 weights is not expected to exceed it
(measured, not proven: noise sources could cancel by chance, which is why the message says "caps" and
gives both numbers). Not modelled: the converter raising a channel's weight scale so its int32 bias
fits (a conversion note names such channels) — it only lowers the bound further.

Cost: one forward pass of the float graph per sample, and one with the int8 weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph, Tensor


@dataclass(frozen=True)
class OutputBound:
    output: str  # the float graph output
    bound_db: float  # its score with int8 weights and float activations
    channels_db: tuple[float, ...]  # per axis-1 channel (a detector's box and class rows), capped


@dataclass(frozen=True)
class WeightBound:
    outputs: tuple[OutputBound, ...]  # in the graph's output order
    layers: int  # linear layers whose weights were quantized
    per_channel: bool
    samples: int

    def __getitem__(self, output: str) -> OutputBound:
        for o in self.outputs:
            if o.output == output:
                return o
        raise KeyError(output)

    @property
    def bound_db(self) -> float:
        """The mean over outputs (the score ``--target-sqnr`` is measured on)."""
        return float(np.mean([o.bound_db for o in self.outputs]))


def int8_weight_graph(graph: Graph, per_channel: bool = True) -> tuple[Graph, int]:
    """``graph`` with each linear layer's constant weight replaced by its int8 quantize-dequantize
    (see the module docstring) and the number of layers changed."""
    from intq.analysis.sensitivity import _weight_axis
    from intq.convert.weights import quantize_weights, weight_scales
    from intq.passes.linear_layers import LINEAR_OPS
    from intq.qmath import dequantize

    tensors, done = dict(graph.tensors), set()
    for n in graph.nodes:
        if n.op_type not in LINEAR_OPS or len(n.inputs) < 2 or n.inputs[1] in done:
            continue
        w = graph.constant(n.inputs[1])
        if w is None or w.ndim < 2:
            continue
        axis = _weight_axis(n.op_type, n.attrs) if per_channel else None
        q, qp = quantize_weights(w, weight_scales(w, axis), axis)
        tensors[n.inputs[1]] = Tensor(n.inputs[1], data=dequantize(q, qp).astype(w.dtype))
        done.add(n.inputs[1])
    return graph.replace(tensors=tensors), len(done)


def weight_only_bound(float_graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], *,
                      per_channel: bool = True) -> WeightBound:
    """The weight-only bound of every output of ``float_graph`` (simplified, as quantized: e.g.
    ``intq.passes.simplify(intq.load(path))``) on ``samples`` (feeds of its inputs; the calibration
    samples); ``per_channel`` as the conversion quantizes weights. See the module docstring."""
    from intq.analysis.sensitivity import channel_sqnr
    from intq.runtime import Interpreter

    samples = list(samples)
    if not samples:
        raise IntqError("the weight-only bound needs at least one sample")
    fake, layers = int8_weight_graph(float_graph, per_channel)
    ref_it, fake_it = Interpreter(float_graph), Interpreter(fake)
    ref: dict[str, list] = {o: [] for o in float_graph.outputs}
    got: dict[str, list] = {o: [] for o in float_graph.outputs}
    for s in samples:
        for k, v in ref_it.run(s).items():
            ref[k].append(v)
        for k, v in fake_it.run(s).items():
            got[k].append(v)
    outs = []
    for name in float_graph.outputs:
        db = channel_sqnr(ref[name], got[name])
        outs.append(OutputBound(name, float(np.mean(db)), tuple(float(x) for x in db)))
    return WeightBound(tuple(outs), layers, per_channel, len(samples))
