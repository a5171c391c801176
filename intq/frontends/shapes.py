"""Binding a model's dynamic input dimensions, and the error that says how, in the caller's words.

A dimension is dynamic when the file gives no positive size for it: ONNX ``dim_param`` names,
unnamed dims, and ``dim_value`` -1 or 0 (paddle2onnx and older exporters write -1). The Python
caller binds them with ``input_shapes={"x": (1, 3, 48, 192)}``, the command line with
``--input-shape x=1x3x48x192``; :class:`InputShapeError` carries the facts and renders the fix in
either form (:meth:`InputShapeError.cli_message`), so no layer rewrites another's text.
"""

from __future__ import annotations

from collections.abc import Sequence

from intq.errors import IntqError


def is_dynamic(dim: int | None) -> bool:
    """True for a dimension with no usable static size (None, -1, 0 or any value < 1)."""
    return dim is None or int(dim) < 1


class InputShapeError(IntqError, ValueError):
    """An input's shape is unknown or contradicts the shape the caller gave.

    ``where`` names the model, ``problem`` says what is wrong (naming the input), ``input`` is the
    input the fix binds,
    ``declared`` its dims in the file (None per dynamic dim; None for an unknown rank),
    ``symbols`` a display name per dim (``dim_param`` or ``?``), ``given`` what the caller passed.
    ``str(e)`` speaks Python (``input_shapes=...``); the CLI prints
    :meth:`cli_message` (``--input-shape NAME=1x3x48x192``).
    """

    def __init__(self, where: str, problem: str, input: str | None = None,
                 declared: Sequence[int | None] | None = None, given: Sequence[int] | None = None,
                 symbols: Sequence[str] | None = None):
        self.where, self.problem, self.input = where, problem, input
        self.declared = tuple(declared) if declared is not None else None
        self.given = tuple(given) if given is not None else None
        self.symbols = tuple(symbols) if symbols is not None else None
        super().__init__(self._render(cli=False))

    def example(self) -> tuple[str, ...] | None:
        """A shape to show in the fix: static dims as declared, the batch (dim 0) as 1, other
        dynamic dims by their symbol (the user must choose them)."""
        if self.declared is None:
            return None
        out = []
        for i, d in enumerate(self.declared):
            if not is_dynamic(d):
                out.append(str(d))
            elif i == 0:
                out.append("1")
            else:
                sym = self.symbols[i] if self.symbols and self.symbols[i] not in ("", "?") else f"D{i}"
                out.append(sym)
        return tuple(out)

    def _fix(self, cli: bool) -> str:
        name = self.input or "NAME"
        dims = self.example()
        if cli:
            shape = "x".join(dims) if dims else "1x3x224x224"
            return f"--input-shape {name}={shape}"
        shape = "(" + ", ".join(dims) + ("," if dims and len(dims) == 1 else "") + ")" if dims else "(1, 3, 224, 224)"
        return f"input_shapes={{{name!r}: {shape}}}"

    def _render(self, cli: bool) -> str:
        text = f"{self.where}: {self.problem}; pass {self._fix(cli)}"
        free = [d for d in self.example() or () if not d.isdigit()]
        if free:
            text += f", choosing a size for {', '.join(free)}"
        return text

    def cli_message(self) -> str:
        """The same error with the fix written as a command-line option."""
        return self._render(cli=True)
