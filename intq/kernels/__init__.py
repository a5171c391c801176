"""intq.kernels — one module per integer operator (TFLite builtin semantics), ``prepare`` + ``run``.

See :mod:`intq.kernels.base` for the contract. Each kernel module registers itself with the
decorator ``@kernel(OP)`` (``@kernel(OP, INT16)`` for the 16x8 kernels of
:mod:`intq.kernels.int16x8`) into one registry, :data:`KERNELS`, keyed by (op, activation dtype);
importing this package imports every module so that their decorators run. Helper modules
(``base``, ``targets``, ``requantize``, ``gemm``, ``_*_common``...) register nothing.
"""

import importlib
import pkgutil

from intq.kernels.base import INT8, INT16, KERNELS, KernelContext, KernelError, activation_of, kernel, lookup, node_activation
from intq.kernels.targets import TARGETS, Requant, Runtime, Target, get_target


def _import_all(package: str, path) -> None:
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        if info.ispkg:
            _import_all(module.__name__, module.__path__)


_import_all(__name__, __path__)

__all__ = ["INT8", "INT16", "KERNELS", "KernelContext", "KernelError", "activation_of", "kernel", "lookup", "node_activation",
           "TARGETS", "Target", "Requant", "Runtime", "get_target"]
