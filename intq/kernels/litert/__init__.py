"""The ``litert`` family: where LiteRT 2.3's reference kernels (``OpResolverType.BUILTIN_REF``)
compute or accept otherwise than TensorFlow Lite Micro's, the reference (targets ``litert-ref``,
and under ``litert-opt`` and ``xnnpack`` the kernels LiteRT's optimized resolver and the XNNPACK
delegate leave to it).

What differs only by arithmetic the target's row states instead, read by the reference kernels:
the requantization of each operator (:meth:`intq.kernels.targets.Target.requant_for`: LiteRT's
FULLY_CONNECTED double product), Prepare's float32 arithmetic on scales
(:attr:`~intq.kernels.targets.Target.scales`) and the acceptance tables of the data-movement
operators (:attr:`~intq.kernels.targets.Target.rules`).
"""

FAMILY = "litert"
