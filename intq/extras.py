"""The optional packages intq uses, and the error that says which extra brings one.

``pip install intq`` is the core (numpy, numba, onnx, ai-edge-litert, pillow, threadpoolctl).
Each extra adds what one feature needs, imported only where that feature runs:

| extra | packages | for |
|---|---|---|
| ``html`` | matplotlib | the plots of the HTML report (``intq compare --html``) |
| ``torch`` | torch | PyTorch models (``intq.load(module)``) and quantization-aware training (``intq.qat``) |
| ``tflm`` | tflite-micro | TensorFlow Lite Micro, the oracle of the default target, run on every ``.tflite`` export |
| ``ort`` | onnxruntime | the check of every ONNX export, onnxruntime's quantized models (targets ``ort``, ``ort-u8``) |
| ``all`` | all of the above | |

:func:`require` imports a module of an extra or raises :class:`MissingExtraError` naming the
``pip install 'intq[EXTRA]'`` that fixes it.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec
from types import ModuleType

from intq.errors import IntqError

#: extra -> the packages it installs (pyproject.toml's [project.optional-dependencies])
EXTRAS = {"html": ("matplotlib",), "torch": ("torch",), "tflm": ("tflite_micro",), "ort": ("onnxruntime",)}


class MissingExtraError(IntqError, ImportError):
    """A feature needs a package of one of intq's extras, and it is not installed."""


def available(extra: str) -> bool:
    """Whether every package of ``extra`` is installed (nothing is imported)."""
    return all(find_spec(m) is not None for m in EXTRAS[extra])


def require(module: str, extra: str, feature: str) -> ModuleType:
    """``import module``; when it is missing, :class:`MissingExtraError` saying that ``feature``
    needs it and that ``pip install 'intq[extra]'`` installs it."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; intq's extras are {', '.join(EXTRAS)}")
    try:
        return import_module(module)
    except ImportError as e:
        if find_spec(module.split(".")[0]) is not None:  # installed but broken: its own error is the news
            raise
        raise MissingExtraError(f"{feature}: needs {module.split('.')[0]}, which is not installed: "
                                f"pip install 'intq[{extra}]'") from e
