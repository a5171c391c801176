"""intq.kernels — one module per integer operator (TFLite builtin semantics), ``prepare`` + ``run``.

See :mod:`intq.kernels.base` for the contract. Every module of this package that defines ``OP``
is a kernel and registers itself when the package is imported; the helper modules (``base``,
``targets``, ``requantize``, ``gemm``...) define no ``OP``.
"""

import importlib
import pkgutil

from intq.kernels.base import KERNELS, KernelContext, KernelError, lookup, register
from intq.kernels.targets import TARGETS, Requant, Runtime, Target, get_target

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    if hasattr(_module, "OP"):
        register(_module)

__all__ = ["KERNELS", "KernelContext", "KernelError", "lookup", "register", "TARGETS", "Target", "Requant", "Runtime", "get_target"]
