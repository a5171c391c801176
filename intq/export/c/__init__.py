"""C99 export: a standalone integer-only model for microcontrollers, bit-exact with the target.

``export_c(graph, out_dir, prefix="model")`` writes ``<prefix>.c`` and ``<prefix>.h``:
``int <prefix>_invoke(const int8_t *in0, ..., int8_t *out0, ..., uint8_t *arena)`` with
``<PREFIX>_ARENA_BYTES`` of caller-provided arena, weights and multipliers in ``static const``
data, no dynamic allocation and no floating point in the inference path. The package:

* :mod:`~intq.export.c.lower` — each node to one runtime call, constants from the kernel's prepare;
* :mod:`~intq.export.c.model` — constant folding, the float boundary, buffers;
* :mod:`~intq.export.c.plan` — the static arena plan (liveness, in place, greedy placement);
* :mod:`~intq.export.c.emit` — the C text (``csrc/*.c`` is the runtime it copies from);
* :mod:`~intq.export.c.runner` — compile and call it from Python (ctypes);
* :mod:`~intq.export.c.compiled` — ``compile_c(graph)``: the compiled model as an interpreter.
"""

from intq.export.c.api import CExportResult, export_c
from intq.export.c.compiled import CompiledInterpreter, NoCompilerError, compile_c
from intq.export.c.lower import CExportError

__all__ = ["export_c", "compile_c", "CompiledInterpreter", "CExportResult", "CExportError", "NoCompilerError"]
