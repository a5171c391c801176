"""The ``tpu-mlir`` target's variants of intq's kernels: TPU-MLIR 1.30.2's int8 ``tpu`` dialect for
BM1684X (``lib/Dialect/Tpu/Interfaces/Common/*.cpp``, ``inference()``), bit for bit.

Each module holds the prepared-parameter classes and the ``prepare``/``run`` of one family; the
operator's own kernel module (``intq/kernels/conv_2d.py``...) selects them when
``ctx.target.runtime is Runtime.TPU_MLIR`` (its ``prepare`` returns these classes, its ``run``
dispatches on them), so one registry entry serves every target. They read the ``tpu_*``
attributes :func:`intq.frontends.tpu_mlir.load_tpu_mlir` writes: TPU-MLIR states its integers
(multipliers, shifts, rounding modes, tables) in the model, and intq applies them as they are.
Nothing here registers a kernel.
"""
