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


#: example sizes :func:`suggest_shape` gives dynamic dimensions: an image side, a sequence length
IMAGE_SIDE, SEQUENCE = 224, 128


def suggest_shape(declared) -> tuple[int, ...]:
    """A concrete shape for ``declared`` (None / < 1 per dynamic dimension): the batch (dimension 0
    of a rank >= 2 input) 1; in an image (rank 4 with 1 or 3 channels first or last) a dynamic side
    the other side's size when that one is static, else :data:`IMAGE_SIDE`; any other dynamic
    dimension :data:`SEQUENCE` (a token sequence's length)."""
    dims = [None if is_dynamic(d) else int(d) for d in declared]
    out = list(dims)
    if len(dims) >= 2 and dims[0] is None:
        out[0] = 1
    sides = (2, 3) if len(dims) == 4 and dims[1] in (1, 3) else (1, 2) if len(dims) == 4 and dims[3] in (1, 3) else ()
    for i in sides:
        if dims[i] is None:
            other = dims[sides[1] if i == sides[0] else sides[0]]
            out[i] = other if other is not None else IMAGE_SIDE
    return tuple(SEQUENCE if d is None else d for d in out)


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
        """A shape to show in the fix, every dimension a number (:func:`suggest_shape`)."""
        if self.declared is None:
            return None
        return tuple(str(d) for d in suggest_shape(self.declared))

    def guessed(self) -> list[str]:
        """The dynamic dimensions other than the batch that :meth:`example` chose a size for, by
        their names in the file (``?`` unnamed)."""
        if self.declared is None:
            return []
        return [(self.symbols[i] if self.symbols and self.symbols[i] else "?")
                for i, d in enumerate(self.declared) if is_dynamic(d) and (i > 0 or len(self.declared) == 1)]

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
        guessed = self.guessed()
        if guessed:
            sizes = [d for i, d in enumerate(self.example() or ())
                     if is_dynamic(self.declared[i]) and (i > 0 or len(self.declared) == 1)]
            text += (f" ({', '.join(sizes)}: example sizes for the dynamic {', '.join(guessed)}; give your data's "
                     "sizes — intq quantize / eval / compare take them from the data when it is given)")
        return text

    def cli_message(self) -> str:
        """The same error with the fix written as a command-line option."""
        return self._render(cli=True)
