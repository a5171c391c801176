"""The ``litert_opt`` family: LiteRT 2.3's optimized kernels (``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``
on x86_64, target ``litert-opt``; under ``xnnpack``, the nodes the delegate declines), measured and
explained from ``optimized_ops`` / ``optimized_integer_ops``.

Their vector paths are written with NEON intrinsics and compiled for x86 through NEON_2_SSE: the
convolutions round both requantization steps half up (:data:`intq.kernels.targets.Requant.DOUBLE_HALF_UP`,
the target row's contract, which the reference kernels read); QUANTIZE, DEQUANTIZE, ADD, MUL and the
4-D MEAN compute an element one way on their vector lanes and another on their scalar tail, which
these variants reproduce by position (docs/arithmetic.md 4.3c); SUM, SOFTMAX and LOG_SOFTMAX compute
in float32 (emulated in float32). What LiteRT's optimized resolver leaves to its reference kernels
runs the next family, ``litert``.
"""

FAMILY = "litert_opt"
