"""The ``xnnpack`` family: LiteRT 2.3 with its default delegate (``OpResolverType.BUILTIN``,
target ``xnnpack``), measured on x86_64 and explained from XNNPACK's sources.

XNNPACK takes the int8 nodes whose parameters it accepts (each variant's ``applies`` states its
acceptance rule) and computes them its own way: float32 requantization rounding half to even
(:data:`intq.kernels.targets.Requant.FLOAT32_RNE`), its own 8-bit fixed-point multipliers, or
float-built tables. The nodes it declines (and every int16 tensor: XNNPACK takes none) run LiteRT's
optimized kernels: the target's next families, ``litert_opt`` then ``litert``.
"""

FAMILY = "xnnpack"
