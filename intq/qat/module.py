"""The QAT model: intq's simplified float graph run in PyTorch with fake quantization at exactly
the tensors the integer graph quantizes.

Forward pass (graph order)::

    x_fq = fq(x; S, Z of the input)                                   graph inputs
    Conv / Gemm / MatMul:  y = QATLinear(x_fq)                         (intq.qat.layers)
    other ops:             y = fq(torch_op(inputs); S, Z of y)         (intq.qat.ops)

where ``fq`` quantizes and dequantizes with intq's arithmetic (:mod:`intq.qat.fake_quant`).
Deployed-form linear layers compute the integer layer's output exactly (int32 accumulator, the
target's double-rounding requantization, the fused activation's clamp). In eval mode the other
requantizing ops take their forward value from intq's integer kernel for that op
(:mod:`intq.qat.exact`), so the eval forward pass *is* the integer model (``exact_ops="frozen"``
does the same in training once the observers are frozen, at some cost per step; ``"never"``
keeps float fake quantization, within about one output step of the kernels). In training
those ops are fake-quantized in float with the target's rounding of the quantize step.
Gradients are always the float ops' with the straight-through estimator (zero where the output
saturates).

Activation parameters. Each quantized tensor keeps a range ``[lo, hi]``, an exponential moving
average of the batch minimum and maximum (Jacob et al. 2018, section 3.1)::

    lo <- decay * lo + (1 - decay) * min(batch),   hi likewise       (decay = ``ema_decay``)

Parameters for a step come from the ranges *before* the step's update: the table of ranges goes
through :func:`intq.calibration.reconcile_ranges` and :func:`intq.qmath.choose_qparams` exactly as in
:func:`intq.quantize`, and the plan (:mod:`intq.qat.plan`) says which tensors follow their
own range, which are fixed (sigmoid, softmax, tanh) and which share an input's parameters. The
batch's min/max then update the ranges (training mode only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import torch
from torch import nn

from intq.calibration import CalibrationTable
from intq.errors import QuantizationError
from intq.ir import Graph, Tensor
from intq.kernels.requantize import ACTIVATION_BOUNDS
from intq.qat.errors import QATError
from intq.qat.exact import VALUE_PRESERVING, VALUE_SELECTING, KernelSimulator, range_for
from intq.qat.fake_quant import fake_quantize_activation
from intq.qat.layers import QATLinear
from intq.qat.ops import LINEAR_OPS, TORCH_OPS, fused_activation
from intq.qat.plan import QuantPoint
from intq.qat.reconcile import RangeReconciler
from intq.qmath import choose_qparams


def _key(name: str) -> str:
    """A module-dict key for a node name (``.`` is not allowed in module names)."""
    return name.replace(".", "_")


class QATModule(nn.Module):
    """A float graph with trainable layers and fake quantization; build it with :func:`intq.qat.prepare`.

    Attributes: ``graph`` (the simplified float graph, batch norm folded as in deployment: its
    folded layers' constants are placeholders, the trained values live in ``layers``),
    ``plan`` (:class:`~intq.qat.plan.QuantPoint` per quantized tensor), ``per_channel``,
    ``ema_decay``. Buffer ``act_ranges`` ([tensors, 2], float64) holds the ranges, in the order of
    ``range_names``.
    """

    def __init__(self, graph: Graph, layers: Mapping[str, QATLinear], plan: Mapping[str, QuantPoint], *,
                 per_channel: bool, ema_decay: float = 0.99):
        super().__init__()
        if not 0.0 <= ema_decay < 1.0:
            raise QATError(f"ema_decay must be in [0, 1), got {ema_decay}")
        self.graph = graph
        self.plan = dict(plan)
        self.per_channel = per_channel
        self.ema_decay = float(ema_decay)
        self.layers = nn.ModuleDict({_key(k): v for k, v in layers.items()})
        self.range_names = list(self.plan)
        self._index = {n: i for i, n in enumerate(self.range_names)}
        self.register_buffer("act_ranges", torch.zeros(len(self.range_names), 2, dtype=torch.float64))
        self.observers_frozen = False
        self.fake_quant_enabled = True
        self.exact_ops = "eval"  # when non-linear ops take the integer kernel's value: "eval", "frozen", "never"
        self._simulator = KernelSimulator(graph)
        self._reconciler = RangeReconciler(graph, self.range_names)
        self._own = np.array([i for i, n in enumerate(self.range_names) if self.plan[n].kind == "range"], dtype=np.int64)
        self._reconciled: dict[str, tuple[float, float]] = {}
        self._cache: tuple[bytes, dict[str, tuple[float, int]]] | None = None
        self._constants = {k: t.data for k, t in graph.tensors.items() if t.is_constant}
        self._last_use = {}
        for i, n in enumerate(graph.nodes):
            for t in n.inputs:
                if t:
                    self._last_use[t] = i

    # -- facts the ops read -------------------------------------------------------------------------

    def layer(self, node_name: str) -> QATLinear:
        return self.layers[_key(node_name)]

    def constant(self, name: str):
        return self._constants.get(name)

    def static_shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.graph.tensors[name].shape)

    # -- ranges and parameters -----------------------------------------------------------------------

    def ranges(self) -> dict[str, tuple[float, float]]:
        """The current range of every quantized tensor (before reconciliation)."""
        r = self.act_ranges.detach().cpu().numpy()
        return {n: (float(r[i, 0]), float(r[i, 1])) for i, n in enumerate(self.range_names)}

    def set_ranges(self, ranges: Mapping[str, tuple[float, float]]) -> None:
        """Set the ranges of some tensors (names of the float graph)."""
        with torch.no_grad():
            for name, (lo, hi) in ranges.items():
                if name in self._index:
                    self.act_ranges[self._index[name], 0] = float(lo)
                    self.act_ranges[self._index[name], 1] = float(hi)
        self._cache = None

    def calibration_table(self) -> CalibrationTable:
        """The ranges as a :class:`CalibrationTable` (method ``"qat-ema"``), before reconciliation."""
        return CalibrationTable("qat-ema", self.ranges(), options={"ema_decay": self.ema_decay},
                                model=self.graph.name)

    def quant_params(self) -> dict[str, tuple[float, int]]:
        """``{tensor: (scale, zero_point)}`` the forward pass uses now (= what convert will choose)."""
        r = self.act_ranges.detach().cpu().numpy()
        key = r.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        lo, hi = self._reconciler(r[:, 0].copy(), r[:, 1].copy())
        self._reconciled = {n: (float(lo[i]), float(hi[i])) for i, n in enumerate(self.range_names)}
        own = self._own
        out: dict[str, tuple[float, int]] = {}
        if own.size:
            try:
                qp = choose_qparams(lo[own], hi[own], "int8", axis=0, name="QAT activation ranges")
            except QuantizationError as e:
                raise QATError(f"activation parameters cannot be chosen: {e} "
                               f"(tensors in order: {[self.range_names[i] for i in own]})") from None
            for k, i in enumerate(own):
                out[self.range_names[i]] = (float(qp.scale[k]), int(qp.zero_point[k]))
        for n, p in self.plan.items():
            if p.kind == "fixed":
                out[n] = (p.scale, p.zero_point)
            elif p.kind == "same":
                out[n] = out[p.source]
        self._cache = (key, out)
        return out

    def _range_of(self, name: str) -> tuple[float, float]:
        """A range reproducing ``name``'s current parameters (for the exact simulation of an op)."""
        p = self.plan[name]
        if p.kind == "range":
            return self._reconciled[name]
        if p.kind == "same":
            return self._range_of(p.source)
        return range_for(p.scale, p.zero_point)

    # -- training controls ------------------------------------------------------------------------------

    def freeze_observers(self, frozen: bool = True) -> "QATModule":
        """Stop (or resume) updating activation ranges; the parameters stay where they are."""
        self.observers_frozen = frozen
        return self

    def freeze_bn(self, frozen: bool = True) -> "QATModule":
        """Use (and stop updating) the running batch-norm statistics in training too: the forward
        pass becomes the deployed folded layer (gamma and beta keep training)."""
        for layer in self.layers.values():
            layer.bn_frozen = frozen
        return self

    def enable_fake_quant(self, enabled: bool = True) -> "QATModule":
        """Turn all fake quantization on or off (off: the float model, e.g. to observe ranges)."""
        self.fake_quant_enabled = enabled
        return self

    @torch.no_grad()
    def observe(self, batches) -> "QATModule":
        """Set every range to the min/max over ``batches`` (tensors, or tuples of tensors) of the
        float model (fake quantization off, batch norm on running statistics): a calibration."""
        was_training, was_fq = self.training, self.fake_quant_enabled
        self.eval()
        self.fake_quant_enabled = False
        lo = np.full(len(self.range_names), np.inf)
        hi = np.full(len(self.range_names), -np.inf)
        seen = 0
        try:
            for batch in batches:
                args = batch if isinstance(batch, tuple) else (batch,)
                stats = self._run(args, record=True)[1]
                lo = np.minimum(lo, stats[:, 0])
                hi = np.maximum(hi, stats[:, 1])
                seen += 1
        finally:
            self.train(was_training)
            self.fake_quant_enabled = was_fq
        if seen == 0:
            raise QATError("observe() got no batches")
        self.act_ranges.copy_(torch.from_numpy(np.stack([lo, hi], 1)))
        self._cache = None
        return self

    # -- forward -----------------------------------------------------------------------------------------

    def forward(self, *inputs: torch.Tensor):
        update = self.training and not self.observers_frozen and self.fake_quant_enabled
        outs, stats = self._run(inputs, record=update)
        if update:  # the moving average, in place on the buffer's memory
            r = self.act_ranges.detach().numpy()
            r *= self.ema_decay
            r += (1.0 - self.ema_decay) * stats
            self._cache = None
        return outs[0] if len(outs) == 1 else tuple(outs)

    @torch.no_grad()
    def tensors(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every tensor of one forward pass (inputs included), fake-quantized where the integer graph
        quantizes: the simulated counterpart of ``Interpreter.tensors()``. Ranges are not updated."""
        return self._run(inputs, record=False, keep=True)[0]

    def _run(self, inputs, record: bool, keep: bool = False):
        """Outputs (or every tensor with ``keep``) and, with ``record``, each quantized tensor's
        observed ``[min, max]`` this pass (float64 [tensors, 2]; unobserved rows keep the range)."""
        g = self.graph
        if len(inputs) != len(g.inputs):
            raise QATError(f"{g.name}: expected {len(g.inputs)} input(s) ({', '.join(g.inputs)}), got {len(inputs)}")
        fq = self.fake_quant_enabled
        self._qparams = self.quant_params() if fq else {}
        stats = self.act_ranges.detach().cpu().numpy().copy() if record else None
        env: dict[str, torch.Tensor] = {}
        if self.exact_ops not in ("eval", "frozen", "never"):
            raise QATError(f"exact_ops must be 'eval', 'frozen' or 'never', got {self.exact_ops!r}")
        exact = fq and ((self.exact_ops != "never" and not self.training)
                        or (self.exact_ops == "frozen" and self.observers_frozen))

        def emit(name: str, y: torch.Tensor, exact_value: Callable[[], torch.Tensor] | None = None) -> None:
            k = self._index.get(name)
            if k is not None:
                if fq:
                    s, z = self._qparams[name]
                    seen: list | None = [] if record else None
                    y = fake_quantize_activation(y, s, z, observed=seen)
                    if record:
                        stats[k] = seen
                    if exact_value is not None:  # the integer op's value, the fake quantizer's gradient
                        y = y + (exact_value() - y).detach()
                elif record:
                    stats[k] = (float(y.detach().min()), float(y.detach().max()))
            env[name] = y

        for name, x in zip(g.inputs, inputs):
            emit(name, x)
        for i, node in enumerate(g.nodes):
            args = [env.get(t) if t else None for t in node.inputs]
            out = node.outputs[0]
            if node.op_type in LINEAR_OPS:
                layer = self.layer(node.name)
                if not fq:
                    emit(out, fused_activation(node, layer.forward_float(args[0])))
                elif layer.batch_stats_mode():
                    emit(out, fused_activation(node, layer.forward_batch_stats(args[0])))
                else:
                    s_y, z_y = self._qparams[out]
                    act = node.attrs.get("fused_activation")
                    env[out] = layer.forward_deployed(args[0], self._qparams[node.inputs[0]][0], s_y, z_y, act)
                    if record:  # the float output's range, from the unclamped integer output
                        lo, hi = ((v - z_y) * s_y for v in layer.last_output_range)
                        b_lo, b_hi = ACTIVATION_BOUNDS.get(act, (None, None))
                        if b_lo is not None:
                            lo, hi = max(lo, b_lo), max(hi, b_lo)
                        if b_hi is not None:
                            lo, hi = min(lo, b_hi), min(hi, b_hi)
                        stats[self._index[out]] = (lo, hi)
            else:
                y = TORCH_OPS[node.op_type](self, node, *args)
                selects = node.op_type in VALUE_SELECTING and node.inputs[0] in self._index \
                    and self._qparams.get(out) == self._qparams.get(node.inputs[0])
                simulate = None
                if exact and node.op_type not in VALUE_PRESERVING and not selects and out in self._index:
                    simulate = partial(self._simulator.run, node, args, tuple(y.shape), self._qparams, self._range_of)
                emit(out, y, simulate)
            for t in node.inputs:
                if not keep and t and self._last_use.get(t) == i and t not in g.outputs:
                    env.pop(t, None)
        return (env if keep else [env[o] for o in g.outputs]), stats

    # -- deployment --------------------------------------------------------------------------------------

    @torch.no_grad()
    def float_graph(self) -> Graph:
        """The deployed float graph: every layer's folded float32 weights and bias (running
        statistics), the rest of ``graph`` unchanged. :func:`intq.qat.convert` converts it."""
        tensors = dict(self.graph.tensors)
        for node in self.graph.nodes:
            if node.op_type not in ("Conv", "Gemm", "MatMul"):
                continue
            w, b = self.layer(node.name).folded()
            w_name = node.inputs[1]
            tensors[w_name] = Tensor(w_name, data=w.detach().cpu().numpy().astype(np.float32))
            if b is not None:
                b_name = node.inputs[2]
                old = self.graph.tensors[b_name].data
                tensors[b_name] = Tensor(b_name, data=b.detach().cpu().numpy().astype(np.float32).reshape(old.shape))
        return self.graph.replace(tensors=tensors)
