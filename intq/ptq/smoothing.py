"""SmoothQuant-style migration of activation outlier channels into the weights (Xiao et al. 2022,
"SmoothQuant: Accurate and Efficient Post-Training Quantization for Large Language Models", §4).

A linear layer ``Y = X W`` (Gemm / MatMul with constant weights, ``X [..., K]``, ``W [K, N]``)
computes the same function with input channel ``j`` divided by ``s_j`` and weight row ``j``
multiplied by it::

    Y = (X diag(s)^-1) (diag(s) W),      s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)

``max|X_j|`` over the calibration data (:class:`~intq.calibration.PerChannelMinMaxObserver` on the
last axis), ``max|W_j|`` over every layer reading ``X`` (Q, K and V reading one LayerNorm output
share one ``s``). ``alpha`` moves the difficulty: 0 leaves the activation alone, 1 puts all of
its channel range into the weights; 0.5 (the paper's default) balances the two. With per-tensor
int8 activations and per-channel int8 weights, outlier channels of ``X`` stop setting the step
of every other channel.

``X / s`` costs no operator: it is folded into the producer of ``X``, exactly where the algebra
allows, a rewrite of the float graph before calibration:

* an affine tail ``X = N * g + c`` or ``X = N * g`` (LayerNorm's gamma and beta, the
  LayerNormalization op as :mod:`intq.passes.layer_norm` writes it and the exporters' decomposed
  form alike; any per-channel Mul / Add of constants on the last axis): ``g / s`` and ``c / s``;
* a linear producer (Gemm / MatMul with constant weights) whose output is ``X``: its output
  channels and bias divided by ``s``.

``X`` reaches its layers directly or through a Reshape that keeps its last axis (a 3-D hidden
state flattened for a Gemm). Where ``X`` also has other readers (a post-norm transformer's
residual Add reads the LayerNorm output too), ``X`` itself cannot change: the affine tail is then
*duplicated* (a second Mul / Add of ``N``, exact, two elementwise ops) and only the layers read the
smoothed copy; a linear producer is not duplicated (a second matrix product) and the tensor is
skipped, with the reason in the report. The rewrite is exact in real arithmetic; in float32 it
differs by the rounding of ``g / s``, ``c / s`` and ``s W`` (a few ulps per term).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from intq.calibration.observers import PerChannelMinMaxObserver
from intq.errors import IntqError
from intq.ir import Graph, Node, Tensor
from intq.passes.linear_layers import bias_vector, channel_vector, fresh_name, scale_output_channels

#: The default migration strength (the paper's, and the best of 0.5 / 0.75 on MiniLM-L6: docs/models.md).
DEFAULT_ALPHA = 0.5
#: Calibration samples the channel maxima are measured on (the paper uses 512 sentences).
SMOOTH_SAMPLES = 256
#: Bounds of s: a channel is never scaled by more than this factor either way (keeps W and g finite in float32).
MAX_SCALE = 1e4


class SmoothingError(IntqError):
    """Smoothing asked with an impossible setting (alpha outside [0, 1], no data)."""


@dataclass(frozen=True)
class SmoothSite:
    """A tensor ``X`` whose channels can move into the weights of ``layers``.

    ``fold``: ``"affine"`` (the Mul / Add nodes ``tail`` absorb ``1/s``) or ``"linear"`` (the
    layer ``tail[0]`` does); ``duplicate``: the tail is copied because ``X`` has ``others`` readers;
    ``readers``: the nodes reading ``X`` on the way to ``layers`` (the layers or their Reshapes)."""

    tensor: str
    layers: tuple[str, ...]
    readers: tuple[str, ...]
    fold: str
    tail: tuple[str, ...]
    duplicate: bool
    others: tuple[str, ...] = ()


@dataclass(frozen=True)
class SmoothSkip:
    """A tensor read by linear layers that was not smoothed, and why."""

    tensor: str
    layers: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class SmoothReport:
    """What :func:`smooth` did: ``alpha``, the smoothed tensors with their channel range ratio
    (max / median of ``max|X_j|``) before and after, and the tensors skipped with the reason."""

    alpha: float
    sites: tuple[SmoothSite, ...]
    ratios: Mapping[str, tuple[float, float]]
    skipped: tuple[SmoothSkip, ...]

    @property
    def layers(self) -> int:
        return sum(len(s.layers) for s in self.sites)

    def note(self) -> str:
        """One conversion note: how many layers and tensors were smoothed, and what was skipped."""
        dup = sum(s.duplicate for s in self.sites)
        text = (f"smoothing (alpha {self.alpha:g}): {self.layers} layer(s) read {len(self.sites)} smoothed "
                f"tensor(s)")
        if dup:
            text += f" ({dup} through a copy of their affine tail: the tensor has other readers)"
        if self.ratios:
            before = np.median([r[0] for r in self.ratios.values()])
            after = np.median([r[1] for r in self.ratios.values()])
            text += f"; channel range max/median {before:.1f} -> {after:.1f} (median over tensors)"
        if self.skipped:
            text += f"; {len(self.skipped)} skipped: " + "; ".join(f"{s.tensor}: {s.reason}" for s in self.skipped[:3])
            if len(self.skipped) > 3:
                text += f"; and {len(self.skipped) - 3} more"
        return text


# ------------------------------------------------------------------------------- where

def _weight_in_axis(graph: Graph, node: Node, x: str) -> int | None:
    """The axis of ``node``'s weights that ``x``'s channels index, when ``node`` is a layer
    ``x W`` with constant 2-D float weights reading ``x`` as its first input; None otherwise."""
    if node.op_type not in ("Gemm", "MatMul") or len(node.inputs) < 2 or node.inputs[0] != x:
        return None
    w = graph.constant(node.inputs[1])
    if w is None or w.ndim != 2 or not np.issubdtype(w.dtype, np.floating) or node.inputs[1] == x:
        return None
    if node.op_type == "Gemm":
        if node.attrs.get("transA", 0):
            return None
        return 1 if node.attrs.get("transB", 0) else 0
    return 0


def _channels(graph: Graph, name: str) -> int | None:
    shape = graph.tensors[name].shape
    return shape[-1] if shape and shape[-1] is not None else None


def _layer_readers(graph: Graph, x: str) -> tuple[list[Node], list[Node], list[Node]]:
    """``(layers, readers, others)``: the linear layers ``x`` reaches (directly or through a
    Reshape keeping its last axis and read by layers only), the nodes reading ``x`` on the way,
    and the other readers of ``x``."""
    layers, readers, others = [], [], []
    c = _channels(graph, x)
    for r in graph.consumers(x):
        if _weight_in_axis(graph, r, x) is not None:
            layers.append(r)
            readers.append(r)
            continue
        if r.op_type == "Reshape" and r.inputs[0] == x and c is not None and _channels(graph, r.outputs[0]) == c \
                and r.outputs[0] not in graph.outputs:
            after = graph.consumers(r.outputs[0])
            if after and all(_weight_in_axis(graph, a, r.outputs[0]) is not None for a in after):
                layers.extend(after)
                readers.append(r)
                continue
        others.append(r)
    return layers, readers, others


def _per_channel(graph: Graph, node: Node, out: str) -> int | None:
    """The index of ``node``'s constant input holding one value per channel of ``out``'s last axis
    (``out``: the tail's last output, whose shape is known; the constants broadcast against it)."""
    shape, c = graph.tensors[out].shape, _channels(graph, out)
    if c is None:
        return None
    for k, name in enumerate(node.inputs[:2]):
        v = graph.constant(name)
        if v is not None and channel_vector(v, shape, len(shape) - 1, c) is not None \
                and graph.constant(node.inputs[1 - k]) is None:
            return k
    return None


def _affine_tail(graph: Graph, x: str) -> tuple[Node, ...] | None:
    """``(Mul,)`` or ``(Mul, Add)`` writing ``x = N * g (+ c)`` with per-channel constants, the
    Mul's output read by the Add only; None otherwise."""
    p = graph.producer(x)
    if p is None or _channels(graph, x) is None:
        return None
    if p.op_type == "Mul" and _per_channel(graph, p, x) is not None:
        return (p,)
    if p.op_type != "Add" or (k := _per_channel(graph, p, x)) is None:
        return None
    a = p.inputs[1 - k]
    m = graph.producer(a)
    if m is None or m.op_type != "Mul" or _per_channel(graph, m, x) is None or len(graph.consumers(a)) != 1 \
            or a in graph.outputs:
        return None
    return (m, p)


def _linear_producer(graph: Graph, x: str) -> Node | None:
    p = graph.producer(x)
    if p is None or p.op_type not in ("Gemm", "MatMul") or p.attrs.get("fused_activation") is not None:
        return None
    w = graph.constant(p.inputs[1]) if len(p.inputs) > 1 else None
    if w is None or w.ndim != 2 or (p.op_type == "Gemm" and (p.attrs.get("transA", 0)
                                                             or float(p.attrs.get("alpha", 1.0)) != 1.0)):
        return None
    c = _channels(graph, x)
    n = w.shape[0] if p.op_type == "Gemm" and p.attrs.get("transB", 0) else w.shape[1]
    return p if c == n and bias_vector(graph, p, n) is not None else None


def smoothing_sites(graph: Graph) -> tuple[tuple[SmoothSite, ...], tuple[SmoothSkip, ...]]:
    """Every float tensor read by linear layers with constant weights: the ones whose producer can
    absorb ``1/s`` (module docstring) and the others with the reason."""
    sites, skipped = [], []
    for t in graph.tensors.values():
        if t.is_constant or graph.producer(t.name) is None:
            continue
        layers, readers, others = _layer_readers(graph, t.name)
        if not layers:
            continue
        names = tuple(n.name for n in layers)
        other_names = tuple(n.name for n in others) + (("<graph output>",) if t.name in graph.outputs else ())
        tail = _affine_tail(graph, t.name)
        if tail is not None:
            sites.append(SmoothSite(t.name, names, tuple(r.name for r in readers), "affine",
                                    tuple(n.name for n in tail), bool(other_names), other_names))
            continue
        lin = _linear_producer(graph, t.name)
        if lin is not None and not other_names:
            sites.append(SmoothSite(t.name, names, tuple(r.name for r in readers), "linear", (lin.name,), False))
            continue
        p = graph.producer(t.name)
        if lin is not None:
            reason = (f"its producer {lin.name} ({lin.op_type}) is a matrix product and {', '.join(other_names)} "
                      f"also read it (a residual cannot take 1/s without scaling the residual; not duplicated)")
        else:
            reason = f"its producer {p.name} ({p.op_type}) cannot absorb a per-channel 1/s"
        skipped.append(SmoothSkip(t.name, names, reason))
    covered = {name for s in sites for name in s.layers}  # a site's flattened copy (Reshape) is not a second tensor
    return tuple(sites), tuple(s for s in skipped if not set(s.layers) <= covered)


# ------------------------------------------------------------------------------- how much

def channel_maxima(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], tensors) -> dict[str, np.ndarray]:
    """``max |X_j|`` over ``samples`` along the last axis of each of ``tensors`` (float graph run by
    the interpreter; :class:`~intq.calibration.PerChannelMinMaxObserver`)."""
    from intq.runtime import Interpreter

    wanted = set(tensors)
    observers: dict[str, PerChannelMinMaxObserver] = {}

    def see(name, value):
        if name in wanted:
            v = np.asarray(value)
            observers.setdefault(name, PerChannelMinMaxObserver(v.ndim - 1, name=name)).update(v)

    it = Interpreter(graph)
    for s in samples:
        it.run(s, keep=False, capture=see)
    out = {}
    for k, o in observers.items():
        lo, hi = o.range()
        out[k] = np.maximum(np.abs(lo), np.abs(hi))
    return out


def _weight_maxima(graph: Graph, site: SmoothSite) -> np.ndarray:
    """``max |W_j|`` over every layer of ``site``, per input channel ``j``."""
    rows = []
    for name in site.layers:
        layer = graph.node(name)
        axis = _weight_in_axis(graph, layer, layer.inputs[0])
        w = np.abs(graph.constant(layer.inputs[1]).astype(np.float64))
        rows.append(w.max(axis=1 - axis))
    return np.max(rows, axis=0)


def smoothing_scales(x_max: np.ndarray, w_max: np.ndarray, alpha: float) -> np.ndarray:
    """``s_j = max|X_j|^alpha / max|W_j|^(1-alpha)``, 1 where either maximum is 0, within
    [1/MAX_SCALE, MAX_SCALE]."""
    x_max, w_max = np.asarray(x_max, np.float64), np.asarray(w_max, np.float64)
    ok = (x_max > 0) & (w_max > 0)
    s = np.ones_like(x_max)
    s[ok] = x_max[ok] ** alpha / w_max[ok] ** (1 - alpha)
    return np.clip(s, 1 / MAX_SCALE, MAX_SCALE)


# ------------------------------------------------------------------------------- the rewrite

def apply_smoothing(graph: Graph, scales: Mapping[str, np.ndarray],
                    sites: Iterable[SmoothSite] | None = None) -> Graph:
    """``graph`` with each site's tensor divided by ``scales[tensor]`` (one value per channel) in
    its producer and its layers' weight rows multiplied by it (module docstring); the same function
    in real arithmetic. ``sites``: :func:`smoothing_sites` (default: found again)."""
    sites = {s.tensor: s for s in (sites if sites is not None else smoothing_sites(graph)[0])}
    nodes = {n.name: n for n in graph.nodes}
    tensors = dict(graph.tensors)
    taken: set[str] = set()
    added: dict[str, list[Node]] = {}  # node name -> new nodes to place right after it

    def store(hint: str, value: np.ndarray) -> str:
        name = fresh_name(graph, hint, taken)
        taken.add(name)
        tensors[name] = Tensor(name, data=np.asarray(value, np.float64).astype(np.float32))
        return name

    def weights(layer: Node) -> np.ndarray:  # the current weights: a layer may be one site's producer and another's reader
        return tensors[layer.inputs[1]].data

    for x, s in scales.items():
        site = sites.get(x)
        if site is None:
            raise SmoothingError(f"tensor {x!r} is not a smoothing site of graph {graph.name!r}")
        s = np.asarray(s, np.float64).reshape(-1)
        target = x
        if site.fold == "linear":
            layer = nodes[site.tail[0]]
            n = s.size
            w2 = scale_output_channels(layer, weights(layer), 1 / s)
            b = bias_vector(graph, layer, n) / s
            inputs = [layer.inputs[0], store(f"{layer.name}/weight_smoothed", w2)]
            attrs = dict(layer.attrs)
            if layer.op_type == "Gemm":  # a MatMul has no bias: 0 / s stays 0
                inputs.append(store(f"{layer.name}/bias_smoothed", b))
                attrs["beta"] = 1.0
            nodes[layer.name] = layer.with_(inputs=tuple(inputs), attrs=attrs)
        else:
            chain = [nodes[n] for n in site.tail]
            prev = None
            shape = graph.tensors[x].shape
            for node in chain:
                out = node.outputs[0]
                k = _per_channel(graph, node, x)
                v = channel_vector(graph.constant(node.inputs[k]), shape, len(shape) - 1, s.size)
                new_inputs = list(node.inputs)
                new_inputs[k] = store(f"{node.name}/{'scale' if node.op_type == 'Mul' else 'bias'}_smoothed", v / s)
                if prev is not None:
                    new_inputs[1 - k] = prev
                if site.duplicate:
                    new_out = fresh_name(graph, f"{out}/smoothed", taken)
                    taken.add(new_out)
                    tensors[new_out] = Tensor(new_out, dtype=graph.tensors[out].dtype, shape=graph.tensors[out].shape)
                    copy = node.with_(name=fresh_name(graph, f"{node.name}/smoothed", taken | set(nodes)),
                                      inputs=tuple(new_inputs), outputs=(new_out,))
                    added.setdefault(chain[-1].name, []).append(copy)
                    prev = new_out
                else:
                    nodes[node.name] = node.with_(inputs=tuple(new_inputs))
            if site.duplicate:
                target = prev
        for r in site.readers:
            reader = nodes[r]
            if target != x:
                nodes[r] = reader = reader.with_(inputs=(target,) + tuple(reader.inputs[1:]))
        for name in site.layers:
            layer = nodes[name]
            axis = _weight_in_axis(graph, graph.node(name), graph.node(name).inputs[0])
            w = weights(layer).astype(np.float64)
            w2 = w * (s.reshape(-1, 1) if axis == 0 else s.reshape(1, -1))
            nodes[name] = layer.with_(inputs=(layer.inputs[0], store(f"{name}/weight_smoothed", w2))
                                      + tuple(layer.inputs[2:]))
    order = []
    for n in graph.nodes:
        order.append(nodes[n.name])
        order.extend(added.get(n.name, ()))
    return graph.replace(nodes=order, tensors=tensors).prune()


def smooth(graph: Graph, samples: Iterable[Mapping[str, np.ndarray]], alpha: float = DEFAULT_ALPHA,
           ) -> tuple[Graph, SmoothReport]:
    """Smooth every site of ``graph`` (:func:`smoothing_sites`) with ``s`` from the channel maxima
    of its tensor over ``samples`` (the first :data:`SMOOTH_SAMPLES` are enough) and ``alpha``;
    returns the new float graph (the same function) and the :class:`SmoothReport`. Run before
    calibration: it changes the activations' ranges."""
    if not 0.0 <= float(alpha) <= 1.0:
        raise SmoothingError(f"smoothing alpha {alpha}: give a value in [0, 1] (0.5 balances activation and weights)")
    sites, skipped = smoothing_sites(graph)
    samples = list(samples)
    if not samples:
        raise SmoothingError("smoothing needs calibration data to measure the activations' channel ranges on")
    maxima = channel_maxima(graph, samples, [s.tensor for s in sites])
    scales, ratios = {}, {}
    for site in sites:
        x_max = maxima.get(site.tensor)
        if x_max is None:
            continue
        s = smoothing_scales(x_max, _weight_maxima(graph, site), float(alpha))
        if np.all(s == 1.0):
            continue
        scales[site.tensor] = s
        after = x_max / s
        ratios[site.tensor] = (float(x_max.max() / max(np.median(x_max), 1e-30)),
                               float(after.max() / max(np.median(after), 1e-30)))
    kept = tuple(s for s in sites if s.tensor in scales)
    out = apply_smoothing(graph, scales, kept) if scales else graph
    return out, SmoothReport(float(alpha), kept, ratios, skipped)


__all__ = ["smooth", "smoothing_sites", "apply_smoothing", "channel_maxima", "smoothing_scales", "SmoothSite",
           "SmoothSkip", "SmoothReport", "SmoothingError", "DEFAULT_ALPHA", "SMOOTH_SAMPLES"]
