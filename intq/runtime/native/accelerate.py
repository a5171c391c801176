"""Which prepared integer nodes the native library runs: :func:`native_run`, by the kernel's key.

The execution plan asks :func:`native_run` for every integer node once, after the kernel's
``prepare``, with the key of the kernel :func:`intq.kernels.select_kernel` chose: the native form
:data:`~intq.runtime.native.registry.NATIVE` holds under that key builds a callable computing
exactly the kernel's ``run`` on the node's inputs, or declines (None: the plan binds the kernel's
own ``run``). The forms, one module per family of operators:

* :mod:`~intq.runtime.native.forms_conv` — CONV_2D and FULLY_CONNECTED (on the matrix path measured
  faster than the kernels' exact GEMM, or forced by ``INTQ_NATIVE_PATH``), DEPTHWISE_CONV_2D;
* :mod:`~intq.runtime.native.forms_elementwise` — ADD, SUB, SQUARED_DIFFERENCE, MUL (operands of the output's shape,
  rows, columns or one value), the table ops, GELU, RSQRT, int8 QUANTIZE, PRELU with a constant
  slope, SOFTMAX over pairs;
* :mod:`~intq.runtime.native.forms_movement` — MAX_POOL_2D, MEAN, TRANSPOSE, PAD / PADV2, SPLIT,
  SPLIT_V, CONCATENATION, GATHER at constant indices (block copies);
* :mod:`~intq.runtime.native.forms_int16` — 16x8 FULLY_CONNECTED's int64 sums (the kernel's own
  requantization on them), the reference 16x8 ADD, SUB and MUL.

The plan's hot path then fuses and groups the native steps (:mod:`~intq.runtime.native.programs`).
"""

from __future__ import annotations

from collections.abc import Callable

from intq.ir import Graph, Node
from intq.runtime import native
from intq.runtime.native import forms_conv, forms_elementwise, forms_int16, forms_movement  # noqa: F401 (they register)
from intq.runtime.native.registry import NATIVE


def native_run(key: tuple[str, str, str], node: Node, graph: Graph, params,
               lib: native.Native | None = None) -> Callable | None:
    """The native ``run`` of ``node`` prepared by the kernel registered under ``key`` (op,
    activation dtype, family) into ``params``, or None; ``lib`` defaults to the process's library
    (:func:`intq.runtime.native.library`)."""
    build = NATIVE.get(key)
    if build is None:
        return None
    lib = lib or native.library()
    if lib is None and build.needs_library:
        return None
    bound = build(lib, node, graph, params)
    if bound is not None and lib is not None and lib.objects and hasattr(bound, "fn"):
        bound.fn_obj = getattr(lib.lib, bound.fn.__name__ + "_obj")
    return bound
