"""intq.runtime — execute intq graphs: :class:`Interpreter` (float graphs now; integer kernels plug
into the same entry point), :func:`infer_shapes` (static shapes by one execution)."""

from intq.runtime.interpreter import Interpreter, InterpreterError, infer_shapes

__all__ = ["Interpreter", "InterpreterError", "infer_shapes"]
