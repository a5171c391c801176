"""Check an export by its outputs (DESIGN decision 9): the written file runs in the runtime it was
written for, on a few samples, and its outputs must equal those of the intq target that claims it.

| file | runtime (what runs the file) | intq target it must equal |
|---|---|---|
| ``.tflite`` | LiteRT, ``BUILTIN_REF`` resolver | ``litert-ref`` |
| ``.tflite`` | TensorFlow Lite Micro (when the ``tflite-micro`` package is installed) | ``tflite`` |
| ONNX (QDQ, QOperator) | onnxruntime on this machine, CPU provider, all graph optimizations | ``ort`` (int8 activations) / ``ort-u8`` (uint8; resolved per host) |
| C (``.c`` + ``.h``) | the written files compiled with the system compiler (strict flags) | the target the C was generated for (``tflite`` / ``litert-ref``) |

The samples (:func:`check_inputs`): the first :data:`DEFAULT_SAMPLES` calibration samples when
the caller has them (the pipeline passes them), else deterministic random inputs within the input
ranges (seed 0: a float input uniform over the range its QUANTIZE represents, an int8 input over
its codes, an integer index input zeros). Each exporter runs its check before anything is written
and returns an :class:`ExportCheck`: per runtime, "equal on N samples", or the first difference
(the output, the element, both values, and for ``.tflite`` the first differing tensor in graph
order, found by rerunning that sample with every tensor kept). A difference or a refusal raises
:class:`ExportCheckError` naming the runtime and the difference, and nothing is written, unless the
caller keeps unverified files (``check="warn"``: the report says what differs and the file is
written). ``check=False`` skips the check (tests that compare outputs themselves).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from importlib.util import find_spec
from dataclasses import dataclass

import numpy as np

from intq.errors import IntqError
from intq.ir import Graph
from intq.runtime import Interpreter
from intq.runtime.oracles.litert import run_litert
from intq.runtime.oracles.ort import OrtOracleError, host_target, ort_session, to_runtime_codes
from intq.runtime.oracles.tflm import TFLM_HAS_NO_KERNEL, run_tflm

#: Samples an export is checked on (a few: the check must not make exporting slow).
DEFAULT_SAMPLES = 4
#: What the ``check`` argument of the exporters takes: raise on a difference, keep the file and
#: report it, or skip the check.
CHECK_MODES = (True, "warn", False)
_SEED = 0


class ExportCheckError(IntqError):
    """The runtime an export was written for refuses the file or computes other outputs than the
    intq target that claims it; nothing is written (``.check`` holds the :class:`ExportCheck`)."""

    def __init__(self, message: str, check: "ExportCheck | None" = None):
        super().__init__(message)
        self.check = check


@dataclass(frozen=True)
class RuntimeCheck:
    """One runtime's verdict on an export: ``samples`` run, equal unless ``difference`` says
    where not; ``skipped`` says why it did not run (the runtime is not installed)."""

    runtime: str
    target: str
    samples: int = 0
    difference: str | None = None
    skipped: str | None = None
    detail: str = ""  # the runtime's version or the compiler, shown after the verdict

    @property
    def equal(self) -> bool:
        return self.skipped is None and self.difference is None

    def message(self, source: str = "samples") -> str:
        if self.skipped is not None:
            return f"not checked: {self.skipped}"
        detail = f"; {self.detail}" if self.detail else ""
        if self.difference is not None:
            return f"differs from target {self.target}: {self.difference}{detail}"
        return f"equal to target {self.target} on {self.samples} {source}{detail}"


@dataclass(frozen=True)
class ExportCheck:
    """What the check of one export ran (:class:`RuntimeCheck` per runtime), on how many samples of
    which kind (``source``), and how long it took."""

    format: str
    source: str
    runtimes: tuple[RuntimeCheck, ...] = ()
    seconds: float = 0.0

    @property
    def equal(self) -> bool:
        """No runtime that ran differs (a runtime that is not installed is not a difference)."""
        return all(r.skipped is not None or r.difference is None for r in self.runtimes)

    @property
    def differences(self) -> list[RuntimeCheck]:
        return [r for r in self.runtimes if r.skipped is None and r.difference is not None]

    def messages(self) -> dict[str, str]:
        """``{runtime: "equal to target T on N samples" | "differs ..." | "not checked: ..."}``."""
        return {r.runtime: r.message(self.source) for r in self.runtimes}

    def summary(self) -> str:
        return "; ".join(f"{k} ({v})" for k, v in self.messages().items())

    def as_dict(self) -> dict:
        return {"format": self.format, "samples_from": self.source, "equal": self.equal,
                "seconds": round(self.seconds, 3),
                "runtimes": [{"runtime": r.runtime, "target": r.target, "samples": r.samples, "equal": r.equal,
                              "difference": r.difference, "skipped": r.skipped, "detail": r.detail}
                             for r in self.runtimes]}


class CheckedBytes(bytes):
    """The bytes an exporter returns, with the :class:`ExportCheck` of the file attached
    (``.check``; None when the check was skipped). Everything else is plain ``bytes``."""

    check: ExportCheck | None

    def __new__(cls, data: bytes, check: ExportCheck | None):
        obj = super().__new__(cls, data)
        obj.check = check
        return obj


def check_mode(check) -> bool | str:
    """The exporters' ``check`` argument, validated (:data:`CHECK_MODES`)."""
    if check is True or check is False or check == "warn":
        return check
    raise IntqError(f"check={check!r}: give True (raise on a difference; the default), 'warn' (write the file and "
                    "report the difference) or False (skip the check)")


# --------------------------------------------------------------------------------------- inputs

def check_inputs(graph: Graph, samples=None, count: int = DEFAULT_SAMPLES) -> tuple[list[dict[str, np.ndarray]], str]:
    """``(inputs, what they are)``: the first ``count`` of ``samples`` (dicts ``{input name: array}``
    of the graph's input shapes and dtypes, e.g. calibration samples), else ``count`` deterministic
    random inputs within the input ranges (module docstring)."""
    if samples is not None:
        taken = []
        for s in samples:
            if len(taken) == count:
                break
            taken.append(_fit(graph, s))
        if taken:
            return taken, "calibration samples" if len(taken) != 1 else "calibration sample"
    return random_inputs(graph, count), "random inputs" if count != 1 else "random input"


def _fit(graph: Graph, sample: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        if name not in sample:
            raise IntqError(f"check sample has no array for input {name!r} (it has {sorted(sample)})")
        a = np.asarray(sample[name])
        shape = tuple(t.shape) if t.shape is not None else a.shape
        if a.shape != shape and a.ndim == len(shape) and a.ndim and a.shape[1:] == shape[1:] and a.shape[0] > shape[0]:
            a = a[: shape[0]]  # a run of several samples (calibration batches): its first one
        if a.shape != shape:
            raise IntqError(f"check sample input {name!r} has shape {list(a.shape)}; the graph takes {list(shape)}")
        out[name] = np.ascontiguousarray(a.astype(t.dtype, copy=False))
    return out


def _input_range(graph: Graph, name: str) -> tuple[float, float] | None:
    """The real range the QUANTIZE reading a float input represents (None when none reads it)."""
    for node in graph.consumers(name):
        if node.op_type == "QUANTIZE" and node.outputs and node.outputs[0]:
            qp = graph.tensors[node.outputs[0]].qparams
            if qp is not None and not qp.per_axis:
                info = np.iinfo(qp.dtype)
                scale, zp = float(np.asarray(qp.scale).reshape(-1)[0]), int(np.asarray(qp.zero_point).reshape(-1)[0])
                return (info.min - zp) * scale, (info.max - zp) * scale
    return None


def random_inputs(graph: Graph, count: int = DEFAULT_SAMPLES, seed: int = _SEED) -> list[dict[str, np.ndarray]]:
    """``count`` inputs from ``numpy.random.default_rng(seed)``: a float input uniform over the
    range its QUANTIZE represents (``[-1, 1]`` when none reads it), quantized inputs uniform over
    their codes, other integer and bool inputs zeros (indices whose valid range the graph does not
    state)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        sample = {}
        for name in graph.inputs:
            t = graph.tensors[name]
            shape = tuple(t.shape)
            if np.issubdtype(t.dtype, np.floating):
                lo, hi = _input_range(graph, name) or (-1.0, 1.0)
                sample[name] = rng.uniform(lo, hi, shape).astype(t.dtype)
            elif t.qparams is not None:
                info = np.iinfo(t.dtype)
                sample[name] = rng.integers(info.min, info.max, shape, endpoint=True).astype(t.dtype)
            else:
                sample[name] = np.zeros(shape, t.dtype)
        out.append(sample)
    return out


# --------------------------------------------------------------------------------------- compare

def first_difference(names: Sequence[str], want: Sequence[np.ndarray], got: Sequence[np.ndarray]) -> str | None:
    """``"output 'y' [0, 3]: 12 vs 13 (5 of 10 elements)"`` for the first output of ``names``
    whose arrays differ (the runtime's value first), None when every one is equal (NaN equals
    NaN; a shape or dtype difference is a difference)."""
    for name, w, g in zip(names, want, got):
        w, g = np.asarray(w), np.asarray(g)
        if w.shape != g.shape:
            return f"output {name!r} has shape {list(g.shape)}, intq's {list(w.shape)}"
        if w.dtype != g.dtype:
            return f"output {name!r} is {g.dtype}, intq's {w.dtype}"
        nan = np.issubdtype(w.dtype, np.floating)
        if np.array_equal(w, g, equal_nan=nan):
            continue
        differ = ~((w == g) | (np.isnan(w) & np.isnan(g))) if nan else w != g
        where = np.argwhere(differ)
        at = tuple(int(i) for i in where[0])
        return (f"output {name!r} {list(at)}: {g[at]} vs intq {w[at]} ({len(where)} of {w.size} elements differ)")
    return None


def _first_differing_tensor(graph: Graph, mine: Mapping[str, np.ndarray], theirs: Mapping[str, np.ndarray]) -> str | None:
    """The first node output (in graph order) present in both runs whose values differ."""
    for node in graph.nodes:
        for o in node.outputs:
            if o and o in mine and o in theirs:
                a, b = np.asarray(mine[o]), np.asarray(theirs[o])
                if a.shape == b.shape and not np.array_equal(a, b, equal_nan=np.issubdtype(a.dtype, np.floating)):
                    return f"{o!r} (written by {node.name!r}, {node.op_type})"
    return None


def _run_intq(graph: Graph, target: str, inputs: list[dict[str, np.ndarray]]) -> list[list[np.ndarray]]:
    it = Interpreter(graph, target=target)
    return [[out[o] for o in graph.outputs] for out in (it.run(x, keep=False) for x in inputs)]


def _verdict(runtime: str, target: str, inputs, names, mine, run_theirs: Callable, locate: Callable | None = None,
             detail: str = "") -> RuntimeCheck:
    """Run the file on each input (``run_theirs(input) -> outputs``) and compare with ``mine``."""
    for k, x in enumerate(inputs):
        diff = first_difference(names, mine[k], run_theirs(x))
        if diff is not None:
            where = locate(x) if locate is not None else None
            text = f"sample {k}: {diff}" + (f"; first differing tensor {where}" if where else "")
            return RuntimeCheck(runtime, target, k + 1, text, detail=detail)
    return RuntimeCheck(runtime, target, len(inputs), detail=detail)


def _outcome(check: ExportCheck, mode, what: str, hint: str = "") -> ExportCheck:
    """Raise :class:`ExportCheckError` for a difference unless ``mode == "warn"``."""
    if check.equal or mode == "warn":
        return check
    bad = check.differences[0]
    raise ExportCheckError(
        f"{bad.runtime} computes other outputs from {what} than intq's target {bad.target} "
        f"({bad.difference}); nothing was written.{hint} This is an intq bug: please report it with the model "
        "(check='warn' / --keep-unverified writes the file anyway)", check)


#: Why a QDQ model may differ: onnxruntime runs some DequantizeLinear -> op -> QuantizeLinear units in
#: float on this CPU (issue 26 item 4), while its QOperator integer operators compute what target ort does.
QDQ_HINT = (" onnxruntime may run some DequantizeLinear -> op -> QuantizeLinear units of a QDQ model in float "
            "here: the QOperator format (format='qoperator', --format qoperator) runs its integer operators.")


# --------------------------------------------------------------------------------------- .tflite

def check_tflite(graph: Graph, blob: bytes, *, samples=None, count: int = DEFAULT_SAMPLES, mode=True,
                 where: str = "the .tflite") -> ExportCheck:
    """Run ``blob`` (the .tflite of ``graph``) in LiteRT's reference kernels and TFLite Micro on the
    check inputs and compare with targets ``litert-ref`` and ``tflite`` (module docstring)."""
    t0 = time.perf_counter()
    inputs, source = check_inputs(graph, samples, count)
    names = list(graph.outputs)
    checks = []

    def litert(x, keep=False):
        try:
            return run_litert(blob, x, resolver="ref", preserve_all_tensors=keep)
        except IntqError as e:
            raise ExportCheckError(f"LiteRT refuses {where} intq made ({e}); nothing was written. This is an intq "
                                   "bug: please report it with the model") from None

    mine = _run_intq(graph, "litert-ref", inputs)
    checks.append(_verdict("LiteRT", "litert-ref", inputs, names, mine, lambda x: litert(x)["outputs"],
                           lambda x: _locate(graph, "litert-ref", x, litert(x, keep=True)["tensors"])))
    lacking = sorted({n.op_type for n in graph.nodes} & TFLM_HAS_NO_KERNEL)
    if lacking:  # the file is for LiteRT: TFLite Micro has no kernel for these builtins (measured)
        from intq.export.micro import LOWERED

        fix = [op for op in lacking if op in LOWERED]
        advice = (f"; quantize with micro=True (intq quantize --micro) for a form of int8 {', '.join(fix)} it runs"
                  if fix else "")
        checks.append(RuntimeCheck("TFLite Micro", "tflite",
                                   skipped=f"TFLite Micro has no {', '.join(lacking)} kernel (the file runs in LiteRT{advice})"))
    elif find_spec("tflite_micro") is None:
        checks.append(RuntimeCheck("TFLite Micro", "tflite", skipped="the tflite-micro package is not installed: pip install 'intq[tflm]'"))
    else:
        def micro(x, keep=False):
            try:
                return run_tflm(blob, x, preserve_all_tensors=keep)
            except IntqError as e:
                raise ExportCheckError(f"TFLite Micro refuses {where} intq made ({e}); nothing was written. This "
                                       "is an intq bug: please report it with the model") from None

        mine = _run_intq(graph, "tflite", inputs)
        checks.append(_verdict("TFLite Micro", "tflite", inputs, names, mine, lambda x: micro(x)["outputs"],
                               lambda x: _locate(graph, "tflite", x, micro(x, keep=True)["tensors"])))
    return _outcome(ExportCheck("tflite", source, tuple(checks), time.perf_counter() - t0), mode, where)


def _locate(graph: Graph, target: str, x, theirs: Mapping[str, np.ndarray]) -> str | None:
    it = Interpreter(graph, target=target)
    it.run(x)
    return _first_differing_tensor(graph, it.tensors(), theirs)


# --------------------------------------------------------------------------------------- ONNX

def check_onnx(graph: Graph, blob: bytes, *, activations: str = "int8", samples=None, count: int = DEFAULT_SAMPLES,
               mode=True, where: str = "the ONNX model", qdq: bool = False) -> ExportCheck:
    """Run ``blob`` (the ONNX model of ``graph``) in onnxruntime on this machine (CPU provider, all
    graph optimizations, one thread) on the check inputs and compare with the target that claims
    onnxruntime here for this file (:func:`intq.runtime.oracles.ort.host_target`: ``ort``,
    ``ort-u8-vnni`` or ``ort-u8s8-avx2`` — on an x86 CPU without VNNI an int8 QDQ file is rewritten
    to uint8 and saturates as uint8 ones do)."""
    t0 = time.perf_counter()
    inputs, source = check_inputs(graph, samples, count)
    name = "ort" if activations == "int8" else "ort-u8"
    resolved = host_target(bytes(blob), "enable_all")
    target = name if resolved == name else f"{name} ({resolved} here)"
    offset = 128 if activations == "uint8" else 0
    try:
        import onnxruntime  # an optional runtime: export_onnx says so before calling this when it is missing

        session = ort_session(bytes(blob), "enable_all")
    except OrtOracleError as e:
        raise ExportCheckError(f"onnxruntime refuses {where} of {graph.name!r} ({e}); nothing was written. This is "
                               "an intq bug: please report it with the model") from None
    detail = f"onnxruntime {onnxruntime.__version__}, all graph optimizations"
    onnx_inputs = [i.name for i in session.get_inputs()]
    out_names = [o.name for o in session.get_outputs()]
    order = [out_names.index(o) for o in graph.outputs]

    def theirs(x):
        feeds = {n: to_runtime_codes(np.asarray(x[n]), offset) for n in onnx_inputs}
        try:
            got = session.run(None, feeds)
        except Exception as e:  # onnxruntime raises its own exception types
            raise ExportCheckError(f"onnxruntime fails to run {where} of {graph.name!r} ({e}); nothing was "
                                   "written. This is an intq bug: please report it with the model") from None
        return [got[i] for i in order]

    mine = [[to_runtime_codes(np.asarray(v), offset) for v in run]
            for run in _run_intq(graph, resolved, inputs)]
    check = _verdict("onnxruntime", target, inputs, list(graph.outputs), mine, theirs, detail=detail)
    return _outcome(ExportCheck(f"onnx ({activations} activations)", source, (check,), time.perf_counter() - t0),
                    mode, where, QDQ_HINT if qdq else "")


# --------------------------------------------------------------------------------------- C

def check_c(graph: Graph, runner_for: Callable[[], object] | None, *, target: str = "tflite", compiler: str | None,
            samples=None, count: int = DEFAULT_SAMPLES, mode=True, where: str = "the C files") -> ExportCheck:
    """Run the compiled C (``runner_for()``: a :class:`~intq.export.c.compiled.CompiledInterpreter`
    of the written files; None when no compiler is installed) on the check inputs and compare with
    ``target``."""
    t0 = time.perf_counter()
    inputs, source = check_inputs(graph, samples, count)
    if runner_for is None:
        check = RuntimeCheck("C", target, skipped="no C compiler is installed ($CC, cc, gcc or clang)")
        return ExportCheck("c", source, (check,), time.perf_counter() - t0)
    runner = runner_for()
    mine = _run_intq(graph, target, inputs)
    names = list(graph.outputs)
    check = _verdict("C", target, inputs, names, mine, lambda x: [runner.run(x)[o] for o in names],
                     detail=f"compiled with {compiler}")
    return _outcome(ExportCheck("c", source, (check,), time.perf_counter() - t0), mode, where)


__all__ = ["ExportCheck", "RuntimeCheck", "ExportCheckError", "CheckedBytes", "check_tflite", "check_onnx", "check_c",
           "check_inputs", "random_inputs", "first_difference", "DEFAULT_SAMPLES", "check_mode"]
