"""intq.kernels — one module per integer operator (TFLite builtin semantics), ``prepare`` + ``run``.

See :mod:`intq.kernels.base` for the contract. Each operator's module holds its reference kernels
(TensorFlow Lite Micro's arithmetic; int8 and, where it has one, 16x8), registered with ``@kernel``;
the runtime families' folders (``ort/``, ``tpu_mlir/``, ``litert/``, ``litert_opt/``, ``xnnpack/``)
hold the variants that replace them, registered with ``@variant``: one registry, :data:`KERNELS`,
keyed by (op, activation dtype, family); :func:`select_kernel` picks a node's. Importing this
package imports every module so that their decorators run. Helper modules (``base``,
``targets``, ``requantize``, ``gemm``, ``_*_common``...) register nothing.
"""

import importlib
import pkgutil

from intq.kernels.base import (INT8, INT16, KERNELS, REFERENCE, Kernel, KernelContext, KernelError, ShapeKernelError,
                               activation_of,
                               kernel, kernel_activation, node_activation, operators, prepare_node, reference,
                               select_kernel, variant)
from intq.kernels.targets import TARGETS, Requant, Runtime, Target, get_target


def _import_all(package: str, path) -> None:
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        if info.ispkg:
            _import_all(module.__name__, module.__path__)


_import_all(__name__, __path__)

__all__ = ["INT8", "INT16", "KERNELS", "REFERENCE", "Kernel", "KernelContext", "KernelError", "ShapeKernelError", "activation_of", "kernel",
           "kernel_activation", "node_activation", "operators", "prepare_node", "reference", "select_kernel", "variant",
           "TARGETS", "Target", "Requant", "Runtime", "get_target"]
