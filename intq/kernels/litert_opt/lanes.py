"""Which code computes each output element of LiteRT's optimized int8 ADD and MUL: their vector
code or their scalar tail (:func:`optimized_vector_lanes`). Not a kernel."""

from __future__ import annotations

import numpy as np

from intq.ir import Tensor

#: what :func:`optimized_vector_lanes` says of an output element
LANE_REFERENCE, LANE_ELEMENTWISE, LANE_SCALAR_BROADCAST = 0, 1, 2


def optimized_vector_lanes(a: Tensor, b: Tensor, elementwise_block: int, scalar_block: int) -> np.ndarray:
    """Which code computes each output element of LiteRT's optimized int8 ADD / MUL.

    tflite/kernels (ProcessBroadcastShapes, optimized_ops::BinaryBroadcastFiveFold): equal
    (rank-extended) shapes run the elementwise kernel once over the flat tensor; otherwise the
    shapes are folded into ``y0..y4`` and the output is written in consecutive runs of ``y4``
    elements (the elementwise kernel; ``y4 > 1``) or of ``y3`` elements (the scalar-broadcast
    kernel; ``y4 == 1``); shapes that do not fold run the reference kernel. Each kernel call does
    ``block`` elements at a time with vector code and finishes with a scalar loop (the reference
    arithmetic), so the element ``k`` of a run of length ``L`` is vector-computed iff
    ``k mod L < block floor(L / block)``. Returns an int8 array over the flat output:
    :data:`LANE_ELEMENTWISE` / :data:`LANE_SCALAR_BROADCAST` for the two kernels' vector code,
    :data:`LANE_REFERENCE` elsewhere. Static shapes only.
    """
    sa, sb = tuple(a.shape), tuple(b.shape)
    rank = max(len(sa), len(sb))
    ea, eb = (1,) * (rank - len(sa)) + sa, (1,) * (rank - len(sb)) + sb
    out = tuple(max(x, y) for x, y in zip(ea, eb))
    size = int(np.prod(out, dtype=np.int64))
    lanes = np.zeros(size, np.int8)
    if ea == eb:
        run, kind, block = size, LANE_ELEMENTWISE, elementwise_block
    else:
        category = "generic"
        for i in range(rank - 1, -1, -1):
            if ea[i] == eb[i]:
                continue
            category = "first" if ea[i] == 1 else ("second" if eb[i] == 1 else "generic")
            break
        if category == "generic":
            return lanes
        sha, shb = (ea, eb) if category == "first" else (eb, ea)
        y = [1] * 5
        i = rank - 1
        for slot, cond in ((4, lambda j: sha[j] == shb[j]), (3, lambda j: sha[j] == 1), (2, lambda j: sha[j] == shb[j]),
                           (1, lambda j: shb[j] == 1), (0, lambda j: sha[j] == shb[j])):
            while i >= 0 and cond(i):
                y[slot] *= shb[i] if slot in (4, 3, 0) else sha[i]
                i -= 1
        if i >= 0:
            return lanes
        if y[4] > 1:
            run, kind, block = y[4], LANE_ELEMENTWISE, elementwise_block
        else:
            run, kind, block = y[3], LANE_SCALAR_BROADCAST, scalar_block
    k = np.arange(size) % max(run, 1)
    lanes[k < block * (run // block)] = kind
    return lanes
