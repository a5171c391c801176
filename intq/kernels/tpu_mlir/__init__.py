"""The ``tpu_mlir`` family: TPU-MLIR 1.30.2's int8 ``tpu`` dialect for BM1684X
(``lib/Dialect/Tpu/Interfaces/Common/*.cpp``, ``inference()``), bit for bit (target ``tpu-mlir``).

Each module holds the prepared-parameter classes, ``prepare`` and runs of one group of operators
and registers them as the family's variants (:func:`intq.kernels.base.variant`), which replace the
reference kernels on every target that lists the family. They read the ``tpu_*`` attributes
:func:`intq.frontends.tpu_mlir.load_tpu_mlir` writes: TPU-MLIR states its integers (multipliers,
shifts, rounding modes, tables) in the model, and intq applies them as they are. An operator TPU-MLIR
never emits (its importer writes the ops registered here and data movement) runs the reference
kernel, with the target's rules (:data:`intq.kernels.targets.TPU_MLIR_RULES`: float data moves too).
"""

FAMILY = "tpu_mlir"
