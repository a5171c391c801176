"""Each output channel's weight range in a layer, against the int8 grids (the report's weight figures).

:func:`weight_ranges` reads, for every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED of an integer
graph, each output channel's float weight range (from the float graph's weights, or the
dequantized int8 weights when the float node cannot be matched) and the steps the integer graph
uses; :class:`WeightRanges` says which channels a per-tensor grid would crush.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from intq.ir import Graph
from intq.qmath import dequantize

#: A channel that spans fewer codes than this on a per-tensor weight grid keeps under 3 bits of
#: resolution (8 levels on its larger side): per-channel scales are what saves it.
TINY_CHANNEL_CODES = 8

#: Output-channel axis of the integer weight, per op, when the weight is per-tensor (TFLite layouts:
#: CONV_2D OHWI, DEPTHWISE_CONV_2D 1HW(C*M), FULLY_CONNECTED [out, in]).
INT_WEIGHT_AXIS = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}

_HIST_COLOR, _CLIP_COLOR, _OK_COLOR, _BAD_COLOR = "#4c72b0", "#c44e52", "#4c72b0", "#c44e52"


@dataclass(frozen=True)
class WeightRanges:
    """Each output channel's float weight range in one layer, and the int8 grids for it.

    ``low[c]``, ``high[c]``: min and max of channel ``c``'s float weights (the float graph's, or
    the dequantized int8 weights when the float node cannot be matched: ``source``).
    ``scales[c]``: the step the integer graph uses for channel ``c`` (all equal when per-tensor).
    A per-tensor grid would use ``tensor_scale = max_c max(|low_c|, |high_c|) / qmax``.
    """

    layer: str  # the node's name
    op: str
    weight: str  # the integer weight tensor's name
    low: np.ndarray
    high: np.ndarray
    scales: np.ndarray
    per_channel: bool
    qmax: int
    source: str  # "float" or "dequantized"

    @property
    def tensor_scale(self) -> float:
        """The step of a per-tensor symmetric grid: ``max |w| / qmax``."""
        return float(max(np.abs(self.low).max(), np.abs(self.high).max())) / self.qmax

    def per_tensor_codes(self) -> np.ndarray:
        """Codes each channel's larger side spans on the per-tensor grid: ``max(|low_c|, |high_c|) / tensor_scale``."""
        scale = self.tensor_scale
        peak = np.maximum(np.abs(self.low), np.abs(self.high))
        return peak / scale if scale > 0 else np.zeros_like(peak)

    def tiny(self) -> np.ndarray:
        """Channels that would keep fewer than :data:`TINY_CHANNEL_CODES` codes per-tensor."""
        return self.per_tensor_codes() < TINY_CHANNEL_CODES


def _float_weight_axis(node) -> int | None:
    """The output-channel axis of a float node's weight (input 1), or None for other ops."""
    if node.op_type == "Conv":
        return 0  # OIHW, also grouped and depthwise: (C*M, 1, kh, kw)
    if node.op_type == "Gemm":
        return 0 if node.attrs.get("transB", 0) else 1
    if node.op_type == "MatMul":
        return -1
    return None


def _channel_min_max(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    w = np.moveaxis(np.asarray(w, dtype=np.float64), axis, 0).reshape(w.shape[axis], -1)
    return w.min(axis=1), w.max(axis=1)


def _float_weight(float_graph: Graph, int_graph: Graph, node) -> np.ndarray | None:
    """The float weights of the float node an integer node came from (same name, or the producer
    of the float tensor its output stands for), or None."""
    fnodes = {n.name: n for n in float_graph.nodes}
    fnode = fnodes.get(node.name)
    if fnode is None:
        float_name = int_graph.metadata.get("float_tensor_of", {}).get(node.outputs[0], (None,))[0]
        fnode = next((n for n in float_graph.nodes if float_name in n.outputs), None)
    if fnode is None or len(fnode.inputs) < 2 or _float_weight_axis(fnode) is None:
        return None
    t = float_graph.tensors.get(fnode.inputs[1])
    if t is None or not t.is_constant:
        return None
    return np.moveaxis(np.asarray(t.data), _float_weight_axis(fnode), 0)


def weight_ranges(float_graph: Graph, int_graph: Graph) -> list[WeightRanges]:
    """Per-output-channel weight ranges of every conv / depthwise / fully connected layer, in graph order."""
    out = []
    for node in int_graph.nodes:
        if node.op_type not in INT_WEIGHT_AXIS or len(node.inputs) < 2:
            continue
        t = int_graph.tensors.get(node.inputs[1])
        if t is None or not t.is_constant or t.qparams is None:
            continue
        qp = t.qparams
        axis = qp.axis if qp.axis is not None else INT_WEIGHT_AXIS[node.op_type]
        channels = t.data.shape[axis]
        fw = _float_weight(float_graph, int_graph, node)
        if fw is not None and fw.shape[0] == channels:
            low, high = _channel_min_max(fw, 0)
            source = "float"
        else:
            low, high = _channel_min_max(dequantize(t.data, qp), axis)
            source = "dequantized"
        scales = np.broadcast_to(qp.scale, (channels,)).astype(np.float64)
        out.append(WeightRanges(node.name, node.op_type, t.name, low, high, scales, qp.axis is not None,
                                qp.qmax, source))
    return out
