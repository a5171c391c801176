"""Read the textual MLIR that TPU-MLIR writes (``*_tpu.mlir``): the module, its ops, types and locations.

TPU-MLIR prints its dialects in MLIR's *generic* operation form, one operation per line::

    %5 = "tpu.Conv2D"(%2, %3, %4) {group = 1 : i64, multiplier = [630217, ...], pads = [1, 1, 1, 1],
         round_mode = #tpu<round_mode HalfUp>, ...} : (tensor<1x1x8x8x!quant.uniform<u8:f32, 0.0039>>, ...)
         -> tensor<1x16x8x8x!quant.uniform<u8:f32, 1.367690e-02>> loc(#loc5)
    #loc5 = loc("/features/features.2/Relu_output_0_Relu")

This module parses that text into plain data (:class:`MlirModule`, :class:`MlirOp`,
:class:`MlirType`) and nothing more; :mod:`intq.frontends.tpu_mlir` decides what the ops mean.
Supported: one ``func.func @main`` whose body is a flat list of single-result or multi-result
(``%7:2``, read back as ``%7#0``) operations ending in ``return``; attribute values that are
integers and floats (``1 : i64``, ``-1.0e+00 : f64``), booleans, strings, arrays, dictionaries,
``unit`` and dialect enums (``#tpu<round_mode HalfUp>`` -> ``"HalfUp"``); tensor types with a
float, integer (``si8``, ``ui8``, ``i32``...) or quantized element (``!quant.uniform<u8:f32, S>``,
``<i8:f32, S:Z>``, ``<i8:f16, S:Z>``, ``!quant.calibrated<f32<lo:hi>>``, ``<f16<lo:hi>>``) and
``none``. Anything else (an op with a region, an unparsable line) raises :class:`MlirParseError`
naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from intq.errors import IntqError


class MlirParseError(IntqError, ValueError):
    """The text is not TPU-MLIR's generic MLIR as this reader knows it (names file and line)."""


@dataclass(frozen=True)
class UniformQuant:
    """``!quant.uniform<storage:f32, scale[:zero_point]>``: ``real = (q - zero_point) * scale``."""

    storage: str  # "u8", "i8", "i16", ...
    scale: float
    zero_point: int = 0


@dataclass(frozen=True)
class Calibrated:
    """``!quant.calibrated<f32<min:max>>``: a float tensor with its calibrated range."""

    min: float
    max: float


@dataclass(frozen=True)
class MlirType:
    """A tensor type (``shape``, ``element`` such as ``f32``/``f16``/``si8``/``i32``, optional ``quant``) or
    ``none``. For a quantized or calibrated tensor ``element`` is the *expressed* float type (``f32``,
    or ``f16`` where TPU-MLIR computes the quantization step in half precision)."""

    shape: tuple[int, ...] | None  # None for ``none``
    element: str = ""
    quant: UniformQuant | Calibrated | None = None

    @property
    def is_none(self) -> bool:
        return self.shape is None

    @property
    def storage(self) -> str:
        """The element type values are stored as: the quantized storage, else ``element``."""
        return self.quant.storage if isinstance(self.quant, UniformQuant) else self.element


@dataclass(frozen=True)
class MlirOp:
    """One operation: ``results = "name"(operands) {attrs} : (operand_types) -> result_types loc(...)``."""

    name: str  # e.g. "tpu.Conv2D"
    results: tuple[str, ...]  # SSA names, "%5" or "%7#0", "%7#1"
    operands: tuple[str, ...]
    attrs: dict[str, Any]
    operand_types: tuple[MlirType, ...]
    result_types: tuple[MlirType, ...]
    loc: str  # the location's name (the tensor name TPU-MLIR dumps), "" if unknown
    line: int  # 1-based line in the file


@dataclass
class MlirModule:
    """A parsed ``*_tpu.mlir`` file."""

    attrs: dict[str, Any]
    name: str
    inputs: list[tuple[str, MlirType]]  # (%argN, type)
    ops: list[MlirOp]
    returns: list[str]
    where: str = "<text>"
    locs: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------------- tokenizer

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>[-+]?(?:0x[0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)(?![\w.]))
  | (?P<ssa>%[\w.$-]+(?:\#\d+)?)
  | (?P<hash>\#[\w.$-]+)
  | (?P<bang>![\w.$-]+)
  | (?P<arrow>->)
  | (?P<ident>[A-Za-z_][\w.$-]*)
  | (?P<punct>[\[\]{}()<>,:=@?*x])
""", re.VERBOSE)


class _Cursor:
    """Tokens of one line with a position; errors name the line."""

    def __init__(self, text: str, where: str, line: int):
        self.where, self.line, self.text = where, line, text
        self.toks: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text.startswith("tensor<", pos):  # a tensor type: its body raw, up to the matching '>'
                depth, end = 0, pos + len("tensor")
                while end < len(text):
                    depth += {"<": 1, ">": -1}.get(text[end], 0)
                    end += 1
                    if depth == 0:
                        break
                if depth:
                    raise self.error("unbalanced tensor<...> type")
                self.toks.append(("tensor", text[pos + len("tensor<"):end - 1]))
                pos = end
                continue
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(f"unexpected character {text[pos]!r} at column {pos + 1}")
            if m.lastgroup != "ws":
                self.toks.append((m.lastgroup, m.group()))
            pos = m.end()
        self.i = 0

    def error(self, message: str) -> MlirParseError:
        return MlirParseError(f"{self.where}:{self.line}: {message}: {self.text.strip()[:160]}")

    def peek(self, k: int = 0) -> tuple[str, str]:
        return self.toks[self.i + k] if self.i + k < len(self.toks) else ("eof", "")

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        if tok[0] == "eof":
            raise self.error("unexpected end of line")
        self.i += 1
        return tok

    def accept(self, value: str) -> bool:
        if self.peek()[1] == value:
            self.i += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.accept(value):
            raise self.error(f"expected {value!r}, found {self.peek()[1]!r}")

    def balanced(self, open_: str = "<", close: str = ">") -> str:
        """The raw text of a balanced ``< ... >`` group (the opening token already consumed)."""
        depth, parts = 1, []
        while True:
            kind, v = self.next()
            if v == open_:
                depth += 1
            elif v == close:
                depth -= 1
                if depth == 0:
                    return " ".join(parts)
            elif v == "->":
                pass
            parts.append(v)


# ------------------------------------------------------------------------------------- values

#: MLIR prints a float attribute whose decimal form would not read back exactly as the hex of its IEEE
#: bits (``0x41D8000000000000 : f64`` is 1610612736.0): (the bits' integer dtype, the float dtype).
_FLOAT_BITS = {"f64": (np.uint64, np.float64), "f32": (np.uint32, np.float32), "f16": (np.uint16, np.float16)}


def _number(v: str):
    low = v.lower()
    if low.startswith(("0x", "-0x", "+0x")):
        return int(v, 16)
    if re.fullmatch(r"[-+]?\d+", v):
        return int(v)
    return float(v)


def _value(c: _Cursor):
    kind, v = c.next()
    if v == "[":
        items = []
        if not c.accept("]"):
            while True:
                items.append(_value(c))
                if c.accept("]"):
                    break
                c.expect(",")
        return items
    if v == "{":
        return _dict_body(c)
    if kind == "string":
        return bytes(v[1:-1], "utf-8").decode("unicode_escape")
    if kind == "number":
        out = _number(v)
        if c.peek()[1] == ":" and c.peek(1)[0] == "ident":  # a typed scalar: 1 : i64, 0.5 : f64
            c.next()
            typ = c.next()[1]
            if typ in _FLOAT_BITS and isinstance(out, int) and v.lower().startswith("0x"):
                out = float(np.array(out, _FLOAT_BITS[typ][0]).view(_FLOAT_BITS[typ][1]))
        return out
    if v in ("true", "false"):
        return v == "true"
    if v == "unit":
        return True
    if kind == "hash":  # #tpu<round_mode HalfUp> -> "HalfUp"; other dialect attributes as raw text
        if c.accept("<"):
            body = c.balanced()
            parts = body.split()
            return parts[-1] if len(parts) == 2 and "<" not in body else f"{v}<{body}>"
        return v
    if kind == "ident" and v in ("dense", "array"):
        c.expect("<")
        return f"{v}<{c.balanced()}>"
    if kind == "ident":  # a type used as an attribute (e.g. f32)
        return v
    raise c.error(f"cannot read the attribute value starting at {v!r}")


def _dict_body(c: _Cursor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.accept("}"):
        return out
    while True:
        kind, key = c.next()
        if kind == "string":
            key = key[1:-1]
        elif kind not in ("ident", "bang", "hash"):
            raise c.error(f"expected an attribute name, found {key!r}")
        out[key] = _value(c) if c.accept("=") else True
        if c.accept("}"):
            return out
        c.expect(",")


# ---------------------------------------------------------------------------------------- types

_DIMS = re.compile(r"^((?:\d+|\?)x)*")


def _type(c: _Cursor) -> MlirType:
    kind, v = c.next()
    if v == "none":
        return MlirType(None)
    if kind == "tensor":
        return parse_tensor_body(v.replace(" ", ""), c)
    if kind == "ident":  # a scalar float/int type: a rank-0 tensor
        return MlirType((), v)
    raise c.error(f"expected a tensor type, found {v!r}")


_UNIFORM = re.compile(r"^!quant\.uniform<(?P<st>[a-z]+\d+):(?P<ex>f32|f16),(?P<scale>[^:>]+)(?::(?P<zp>[-+]?\d+))?>$")
_CALIB = re.compile(r"^!quant\.calibrated<(?P<ex>f32|f16)<(?P<lo>[^:]+):(?P<hi>[^>]+)>>$")


def parse_tensor_body(body: str, c: _Cursor | None = None) -> MlirType:
    """``1x16x8x8x!quant.uniform<u8:f32,0.0136>`` (spaces removed) -> :class:`MlirType`."""
    dims, rest = [], body
    while True:
        m = re.match(r"^(\d+|\?)x", rest)
        if m is None:
            break
        if m.group(1) == "?":
            raise (c.error("dynamic dimensions are not supported") if c else MlirParseError(f"dynamic dims in {body}"))
        dims.append(int(m.group(1)))
        rest = rest[m.end():]
    if rest.startswith("!quant.uniform"):
        m = _UNIFORM.match(rest)
        if m is None:
            raise (c.error(f"unsupported quantized type {rest!r} (per-axis types are not read)") if c
                   else MlirParseError(rest))
        q = UniformQuant(m.group("st"), float(m.group("scale")), int(m.group("zp") or 0))
        return MlirType(tuple(dims), m.group("ex"), q)
    if rest.startswith("!quant.calibrated"):
        m = _CALIB.match(rest)
        if m is None:
            raise (c.error(f"unsupported calibrated type {rest!r}") if c else MlirParseError(rest))
        return MlirType(tuple(dims), m.group("ex"), Calibrated(float(m.group("lo")), float(m.group("hi"))))
    if not re.fullmatch(r"[a-z]+\d+", rest):
        raise (c.error(f"unsupported element type {rest!r}") if c else MlirParseError(rest))
    return MlirType(tuple(dims), rest)


def _type_list(c: _Cursor) -> list[MlirType]:
    if c.accept("("):
        out = []
        if not c.accept(")"):
            while True:
                out.append(_type(c))
                if c.accept(")"):
                    break
                c.expect(",")
        return out
    return [_type(c)]


# ---------------------------------------------------------------------------------------- lines

_LOC_DEF = re.compile(r'^#(?P<id>loc\d*)\s*=\s*loc\((?P<body>.*)\)\s*$')
_MODULE = re.compile(r"^\s*module\s+@(?P<name>[\w.$-]+)\s+attributes\s+(?P<attrs>\{.*\})\s*\{\s*$")
_FUNC = re.compile(r"^\s*func\.func\s+@main\((?P<args>.*)\)\s*->\s*(?P<results>.*?)\s*\{\s*$")


def _loc_name(body: str, locs: dict[str, str]) -> str:
    body = body.strip()
    if body.startswith("#"):
        return locs.get(body, "")
    m = re.match(r'^"([^"]*)"', body)
    if m:
        return m.group(1)
    m = re.match(r'^fused\[\s*"([^"]*)"', body)
    return m.group(1) if m else ""


def _split_loc(line: str) -> tuple[str, str]:
    """The line without its trailing ``loc(...)`` and the loc body."""
    m = re.search(r"\s+loc\((?P<body>(?:[^()]|\([^()]*\))*)\)\s*$", line)
    if m is None:
        return line, ""
    return line[:m.start()], m.group("body")


def parse_module(text: str, where: str = "<text>") -> MlirModule:
    """Parse a whole ``*_tpu.mlir`` text (see the module docstring)."""
    lines = text.splitlines()
    locs: dict[str, str] = {}
    for line in lines:  # location aliases are printed after the module
        m = _LOC_DEF.match(line.strip())
        if m:
            locs["#" + m.group("id")] = _loc_name(m.group("body"), {})
    module_attrs: dict[str, Any] = {}
    name = ""
    inputs: list[tuple[str, MlirType]] = []
    ops: list[MlirOp] = []
    returns: list[str] = []
    in_func = False
    for no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("//") or _LOC_DEF.match(line):
            continue
        body, loc_body = _split_loc(line)
        m = _MODULE.match(body)
        if m:
            name = m.group("name")
            c = _Cursor(m.group("attrs"), where, no)
            c.expect("{")
            module_attrs = _dict_body(c)
            continue
        m = _FUNC.match(body)
        if m:
            if in_func:
                raise _Cursor(line, where, no).error("a second function")
            in_func = True
            c = _Cursor(m.group("args"), where, no)
            while c.peek()[0] != "eof":
                kind, arg = c.next()
                if kind != "ssa":
                    raise c.error(f"expected an argument name, found {arg!r}")
                c.expect(":")
                t = _type(c)
                if c.peek()[1] == "loc":  # per-argument locations
                    c.next()
                    c.expect("(")
                    c.balanced("(", ")")
                inputs.append((arg, t))
                if not c.accept(","):
                    break
            continue
        if body.startswith("func.func"):
            raise _Cursor(line, where, no).error("only a function named @main with one block is read")
        if body in ("}", "} {") or body.startswith("} "):
            continue
        if body.startswith("return"):
            c = _Cursor(body[len("return"):], where, no)
            while c.peek()[0] == "ssa":
                returns.append(c.next()[1])
                if not c.accept(","):
                    break
            continue
        if body.startswith("#loc"):
            continue
        ops.append(_op(body, loc_body, locs, where, no))
    if not in_func:
        raise MlirParseError(f"{where}: no func.func @main in the file")
    return MlirModule(module_attrs, name, inputs, ops, returns, where, locs)


def _op(body: str, loc_body: str, locs: dict[str, str], where: str, no: int) -> MlirOp:
    c = _Cursor(body, where, no)
    results: list[str] = []
    if c.peek()[0] == "ssa":
        kind, first = c.next()
        count = 1
        if c.accept(":"):
            kind, n = c.next()
            if kind != "number":
                raise c.error("expected a result count")
            count = int(n)
        c.expect("=")
        results = [first] if count == 1 else [f"{first}#{k}" for k in range(count)]
    kind, name = c.next()
    if kind != "string":
        raise c.error("expected an operation name in the generic form (\"dialect.Op\")")
    name = name[1:-1]
    c.expect("(")
    operands: list[str] = []
    if not c.accept(")"):
        while True:
            kind, v = c.next()
            if kind != "ssa":
                raise c.error(f"expected an operand, found {v!r}")
            operands.append(v)
            if c.accept(")"):
                break
            c.expect(",")
    if c.peek()[1] == "(":  # a region: not a flat op
        raise c.error(f"{name} has a region; intq reads flat graphs only")
    attrs: dict[str, Any] = {}
    if c.accept("{"):
        attrs = _dict_body(c)
    if c.peek()[1] == "(":
        raise c.error(f"{name} has a region; intq reads flat graphs only")
    c.expect(":")
    in_types = _type_list(c)
    c.expect("->")
    out_types = _type_list(c)
    if c.peek()[0] != "eof":
        raise c.error(f"unexpected {c.peek()[1]!r} after the result types")
    if len(out_types) != max(len(results), 1 if out_types and not out_types[0].is_none else 0) and results:
        raise c.error(f"{len(results)} results but {len(out_types)} result types")
    return MlirOp(name, tuple(results), tuple(operands), attrs, tuple(in_types), tuple(out_types),
                  _loc_name(loc_body, locs), no)
