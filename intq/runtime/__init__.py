"""intq.runtime — execute intq graphs: :class:`Interpreter` (float graphs now; integer kernels plug
into the same entry point), :func:`infer_shapes` (shapes by one execution: for shapes that depend on data; the others come from
:func:`intq.ir.shapes.infer_shapes`, which runs nothing)."""

from intq.runtime.interpreter import Interpreter, InterpreterError, infer_shapes

__all__ = ["Interpreter", "InterpreterError", "infer_shapes"]
