"""Lowerings of the window, reduction and row operators (csrc/pool.c, softmax.c, resize.c):
MAX_POOL_2D, AVERAGE_POOL_2D, MEAN, SUM, REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN, SOFTMAX,
LOG_SOFTMAX, L2_NORMALIZATION, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR. Tables, multipliers and
source indices come from the kernels' prepare."""

from __future__ import annotations

import numpy as np

from intq.export.c.lower import (
    Step,
    box_fields,
    c_array,
    c_struct,
    contiguous_strides,
    expect,
    int32,
    lowering,
    merge_box,
    numel,
    prepare,
    require_int8,
    shape_of,
)
from intq.ir import Graph, Node
from intq.kernels import REFERENCE, Target


@lowering("MAX_POOL_2D", "AVERAGE_POOL_2D")
def pool(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels._pool_common import PoolWindow
    from intq.kernels.average_pool_2d import AveragePool2DParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    if node.op_type == "MAX_POOL_2D":
        expect(node, p, PoolWindow)
        window, fn = p, "intq_max_pool"
    else:
        expect(node, p, AveragePool2DParams)
        window, fn = p.pool, "intq_average_pool"
    g = window.geometry
    n, in_h, in_w, c = shape_of(graph, step.node.inputs[0])  # an absorbed PAD's input, if any
    step.data.append(c_struct("intq_pool_params", sym, [
        ("batch", n), ("in_h", in_h), ("in_w", in_w), ("channels", c), ("out_h", g.out_h), ("out_w", g.out_w),
        ("filter_h", g.filter_h), ("filter_w", g.filter_w), ("stride_h", g.stride_h), ("stride_w", g.stride_w),
        ("pad_top", g.pad_h + step.pad[0]), ("pad_left", g.pad_w + step.pad[1]), ("act_min", window.act_min),
        ("act_max", window.act_max)]))
    step.blocks = (fn,)
    step.call = f"{fn}(&{sym}, {{in0}}, {{out0}});"


def _reduce_box(node: Node, graph: Graph, axes) -> list[tuple[str, object]]:
    """The intq_reduce_box fields: the kept and the reduced dimensions of input 0 with their element
    strides (merged where contiguous), the kept ones in output order."""
    shape = shape_of(graph, node.inputs[0])
    strides = contiguous_strides(shape)
    kept = [k for k in range(len(shape)) if k not in axes]
    red = [k for k in range(len(shape)) if k in axes]
    kd, (ks,) = merge_box([shape[k] for k in kept], [strides[k] for k in kept]) if kept else ([1], [[0]])
    rd, (rs,) = merge_box([shape[k] for k in red], [strides[k] for k in red]) if red else ([1], [[0]])
    kept_rank, red_rank = (len(kd) if kept else 0), len(rd)
    kd, ks = box_fields(node, kd, ks)
    rd, rs = box_fields(node, rd, rs)
    return [("kept_rank", kept_rank), ("kept_dims", kd), ("kept_strides", ks), ("red_rank", red_rank),
            ("red_dims", rd), ("red_strides", rs)]


@lowering("SUM", families=(REFERENCE, "litert"))  # LiteRT's reference SUM: the bytes read as uint8 (as_uint8)
@lowering("MEAN")
def mean(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """MEAN and SUM: ``clamp(mbqm(sum - Z_in count, m, shift) + Z_out)`` with (m, shift) from prepare
    (MEAN's 1/count folded in); ``as_uint8``: LiteRT 2.3's reference SUM, which reads the bytes as
    uint8 and stores a uint8 (target ``litert-ref``, intq.kernels.sum)."""
    from intq.kernels._pool_common import QuantizedSumParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, QuantizedSumParams)
    step.data.append(c_struct("intq_mean_params", sym, [
        ("box", [v for _, v in _reduce_box(node, graph, p.axes)]), ("input_offset", p.input_offset),
        ("mult", p.multiplier), ("shift", p.shift), ("out_zp", p.zero_point), ("as_uint8", int(p.bytes_as_uint8))]))
    step.blocks = ("intq_mean",)
    step.call = f"intq_mean(&{sym}, {{in0}}, {{out0}});"


@lowering("REDUCE_MAX", "REDUCE_MIN")
def reduce_extremum(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels._pool_common import ReduceExtremumParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, ReduceExtremumParams)
    step.data.append(c_struct("intq_extremum_params", sym, [
        ("box", [v for _, v in _reduce_box(node, graph, p.axes)]), ("maximum", int(node.op_type == "REDUCE_MAX"))]))
    step.blocks = ("intq_reduce_extremum",)
    step.call = f"intq_reduce_extremum(&{sym}, {{in0}}, {{out0}});"


@lowering("ARG_MAX", "ARG_MIN")
def arg_extremum(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """The first index of the largest (smallest) value along one axis, as int32 or int64."""
    from intq.kernels._pool_common import ArgExtremumParams

    require_int8(node, graph, node.inputs[:1])
    kernel, p = prepare(node, graph, target)
    expect(node, p, ArgExtremumParams)
    step.data.append(c_struct("intq_extremum_params", sym, [
        ("box", [v for _, v in _reduce_box(node, graph, (p.axis,))]), ("maximum", int(node.op_type == "ARG_MAX"))]))
    fn = "intq_arg_extremum64" if np.dtype(p.out_dtype) == np.int64 else "intq_arg_extremum32"
    step.blocks = (fn,)
    step.call = f"{fn}(&{sym}, {{in0}}, {{out0}});"


@lowering("SOFTMAX")
def softmax(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels.softmax import SoftmaxParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, SoftmaxParams)
    rows = numel(graph, node.inputs[0]) // p.depth
    step.data += [c_array("int32_t", f"{sym}_exp_q0", int32(node, p.exp_q0, "exp table")),
                  c_array("int32_t", f"{sym}_exp_q12", int32(node, p.exp_q12, "exp table")),
                  c_struct("intq_softmax_params", sym, [("rows", rows), ("depth", p.depth), ("radius", p.radius),
                           ("exp_q0", f"{sym}_exp_q0"), ("exp_q12", f"{sym}_exp_q12")])]
    step.blocks = ("intq_softmax",)
    step.call = f"intq_softmax(&{sym}, {{in0}}, {{out0}})"
    step.status = True


@lowering("LOG_SOFTMAX")
def log_softmax(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """LOG_SOFTMAX: the prepared tables of the scaled difference (Q5.26) and of its exp (Q12.19) by
    ``d = max - x``, the reverse scaling and ``diff_min``; per row the fixed-point log of the sum."""
    from intq.kernels.log_softmax import LogSoftmaxParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, LogSoftmaxParams)
    rows = numel(graph, node.inputs[0]) // p.depth
    step.data += [c_array("int32_t", f"{sym}_scaled", int32(node, p.scaled_q5, "scaled differences")),
                  c_array("int32_t", f"{sym}_exp", int32(node, p.exp_q12, "exp table")),
                  c_struct("intq_log_softmax_params", sym, [
                      ("rows", rows), ("depth", p.depth), ("diff_min", p.diff_min),
                      ("reverse_mult", p.reverse_multiplier), ("reverse_shift", p.reverse_shift),
                      ("scaled_q5", f"{sym}_scaled"), ("exp_q12", f"{sym}_exp")])]
    step.blocks = ("intq_log_softmax",)
    step.call = f"intq_log_softmax(&{sym}, {{in0}}, {{out0}});"


@lowering("L2_NORMALIZATION")
def l2_normalization(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    from intq.kernels.l2_normalization import L2NormalizationParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, L2NormalizationParams)
    rows = numel(graph, node.inputs[0]) // p.depth
    step.call = f"intq_l2_normalization({rows}, {p.depth}, {p.input_zero_point}, {{in0}}, {{out0}});"
    step.blocks = ("intq_l2_normalization",)
    step.inplace = (0,)


@lowering("RESIZE_BILINEAR")
def resize_bilinear(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """RESIZE_BILINEAR: per output row and column the two source indices and 10-bit weights of the
    kernel's prepare; ``(acc +- 2^19) / 2^20`` per pixel."""
    from intq.kernels.resize_bilinear import ResizeBilinearParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, ResizeBilinearParams)
    n, h, w, c = shape_of(graph, node.inputs[0])
    _, oh, ow, _ = p.out_shape
    r, k = p.rows, p.cols
    step.data += [c_array("int32_t", f"{sym}_{name}", int32(node, v, "resize taps"))
                  for name, v in (("rlo", r.lo), ("rhi", r.hi), ("rwlo", r.w_lo), ("rwhi", r.w_hi),
                                  ("clo", k.lo), ("chi", k.hi), ("cwlo", k.w_lo), ("cwhi", k.w_hi))]
    step.data.append(c_struct("intq_resize_params", sym, [
        ("batch", n), ("in_h", h), ("in_w", w), ("channels", c), ("out_h", oh), ("out_w", ow),
        ("row_lo", f"{sym}_rlo"), ("row_hi", f"{sym}_rhi"), ("row_w_lo", f"{sym}_rwlo"), ("row_w_hi", f"{sym}_rwhi"),
        ("col_lo", f"{sym}_clo"), ("col_hi", f"{sym}_chi"), ("col_w_lo", f"{sym}_cwlo"),
        ("col_w_hi", f"{sym}_cwhi")]))
    step.blocks = ("intq_resize_bilinear",)
    step.call = f"intq_resize_bilinear(&{sym}, {{in0}}, {{out0}});"


@lowering("RESIZE_NEAREST_NEIGHBOR")
def resize_nearest(step: Step, node: Node, graph: Graph, target: Target, sym: str) -> None:
    """RESIZE_NEAREST_NEIGHBOR: the source row and column of every output row and column (prepare)."""
    from intq.kernels.resize_nearest_neighbor import ResizeNearestNeighborParams

    require_int8(node, graph, (node.inputs[0], node.outputs[0]))
    kernel, p = prepare(node, graph, target)
    expect(node, p, ResizeNearestNeighborParams)
    n, h, w, c = shape_of(graph, node.inputs[0])
    oh, ow = len(p.src_rows), len(p.src_cols)
    step.data += [c_array("int32_t", f"{sym}_rows", int32(node, p.src_rows, "rows")),
                  c_array("int32_t", f"{sym}_cols", int32(node, p.src_cols, "columns")),
                  c_struct("intq_nearest_params", sym, [
                      ("batch", n), ("in_h", h), ("in_w", w), ("channels", c), ("out_h", oh), ("out_w", ow),
                      ("rows", f"{sym}_rows"), ("cols", f"{sym}_cols")])]
    step.blocks = ("intq_resize_nearest",)
    step.call = f"intq_resize_nearest(&{sym}, {{in0}}, {{out0}});"
