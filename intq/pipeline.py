"""intq.pipeline — from a float model to a checked integer file, in one place.

::

    load -> simplify -> check -> calibrate -> convert -> export -> check the export

| stage | function | what it does |
|---|---|---|
| load, simplify | :func:`load_float` | :func:`intq.load` (ONNX, a torch module, a float .tflite), :func:`intq.passes.simplify` (static shapes, constant folding, BatchNorm folding, activation fusion...); a shape that still depends on data after that is measured once by running the graph (:func:`intq.runtime.infer_shapes`) |
| check | :func:`check_graph` | **before any calibration**: an integer model, every operator with no integer rule, every node a rule refuses from shapes, types and constants alone (:func:`intq.convert.check_convertible`) |
| calibrate | :func:`intq.calibrate` | the range of every float tensor over the data (after :func:`intq.ptq.equalize` when asked) |
| convert | :func:`convert` | the data-driven methods (mixed precision, bias correction, AdaRound), range reconciliation, :func:`intq.convert.convert`, and every kernel's ``prepare`` (a graph intq itself refuses is not exported) |
| export, check the export | :func:`export` | first the static overflow certificate of the graph on the targets the file claims (:func:`intq.analysis.certificate.certify`: a graph whose intermediates can overflow or saturate there is refused, naming the node; ``--portable`` suggested where it repairs it); then ``.tflite`` / ``.onnx`` / ``.c`` by the output's suffix; each exporter runs the file in its runtime on the first calibration samples and compares with the target that claims it (:mod:`intq.export.check`) |

:func:`quantize` (``intq.quantize``) runs load to convert and returns the integer graph;
:func:`run` (the ``intq quantize`` command) runs every stage and returns a :class:`Result`
(the graphs, the table, the export and its check, the layer report, the time of each stage).
The command line only parses arguments, prints and chooses exit codes.

``cluster=`` (a Ray address or an :class:`intq.distributed.Cluster`) or ``workers=`` (N local
workers) on :func:`quantize`, :func:`run` and :func:`convert` run calibration in shards on Ray and
the searches of stage convert (``target_sqnr``'s candidates, AdaRound's layers) as parallel tasks
(:mod:`intq.distributed`, docs/scale.md): the same graph, bit for bit.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from intq.analysis.certificate import Certificate, certify
from intq.analysis.compare import Report, compare
from intq.analysis.sensitivity import output_sqnr
from intq.calibration import CalibrationTable, calibrate, iter_batches, iter_samples, method_per_tensor, reconcile_ranges
from intq.calibration.adapters import input_shapes_from_data, source
from intq.calibration.data import DEFAULT_BATCH_SIZE
from intq.convert import ConversionError, check_convertible
from intq.convert import convert as convert_nodes
from intq.convert.precision import int16_tensors, island_tensors
from intq.distributed.cluster import with_cluster
from intq.export.c import CExportResult, export_c
from intq.export.check import DEFAULT_SAMPLES, ExportCheck
from intq.export.tflite_writer import export_tflite
from intq.files import StagedOutputs
from intq.frontends import InputShapeError, load
from intq.ir import Graph
from intq.ir.shapes import unknown_shapes
from intq.onnx_format.schema import DEFAULT_OPSET
from intq.export.onnx import export_onnx
from intq.passes import simplify
from intq.ptq import adaround as adaround_weights
from intq.ptq import correct_biases, equalize
from intq.ptq.smoothing import SMOOTH_SAMPLES, smooth as smooth_graph
from intq.ptq.precision import auto_precision, target_shortfall
from intq.runtime import Interpreter, infer_shapes

log = logging.getLogger(__name__)

#: Calibration samples a PTQ method's effect is checked on before it is kept.
CHECK_SAMPLES = 8
#: "every sample" for a one-pass source's replay (intq.calibration.adapters.Source keep=)
_ALL = 2**62
#: Output suffix -> export format.
FORMATS = {".tflite": "tflite", ".onnx": "onnx", ".c": "c"}


class AlreadyQuantizedError(ConversionError):
    """The model given to quantize is already an integer model."""


# ------------------------------------------------------------------------------- load, simplify

def load_float(model, *, input_shapes=None, example_inputs=None, constant_inputs=None, data=None) -> Graph:
    """Stages load and simplify: ``model`` (a path, an ONNX proto, a torch module, or a Graph,
    which is not loaded again) as a simplified float graph with static shapes.

    A dynamic input dimension ``input_shapes`` does not bind (other than a batch alone, which the
    importer binds to 1) takes its size from the first sample of ``data`` when data is given
    (:func:`intq.calibration.adapters.input_shapes_from_data`: the batch 1, every other dynamic
    dimension the data's), and a log record says so; without data it is an
    :class:`~intq.frontends.InputShapeError` suggesting sizes.

    Shapes are inferred statically (:mod:`intq.ir.shapes`, alternating with constant folding in
    :func:`intq.passes.simplify`); a shape that still depends on data (NonZero of an activation...)
    is measured once by running the graph on zeros (:func:`intq.runtime.infer_shapes`): the one
    place the pipeline runs a graph for its shapes."""
    if isinstance(model, Graph):
        graph = model
    else:
        try:
            graph = load(model, input_shapes=input_shapes, example_inputs=example_inputs,
                         constant_inputs=constant_inputs)
        except InputShapeError:
            bound = _shapes_from_data(model, data, input_shapes) if data is not None else None
            if not bound:
                raise
            log.info("dynamic input dimensions bound from the data: %s",
                     ", ".join(f"{k}={'x'.join(map(str, v))}" for k, v in bound.items()))
            graph = load(model, input_shapes={**(input_shapes or {}), **bound}, example_inputs=example_inputs,
                         constant_inputs=constant_inputs)
    graph = simplify(graph)
    if unknown_shapes(graph):
        graph = infer_shapes(graph)
    return graph


def _shapes_from_data(model, data, given) -> dict[str, tuple[int, ...]]:
    """The shapes of an ONNX model's inputs with dynamic dimensions, from the first sample of ``data``."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (str, Path)) and str(model).lower().endswith(".onnx"):
        try:
            proto = onnx.load(str(model), load_external_data=False)
        except Exception:  # noqa: BLE001 (the first load reported what is wrong with the file)
            return {}
    else:
        return {}
    weights = {t.name for t in proto.graph.initializer}
    declared = {}
    for i in proto.graph.input:
        if i.name in weights:
            continue
        t = i.type.tensor_type
        declared[i.name] = (tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                                  for d in t.shape.dim) if t.HasField("shape") else None)
    return input_shapes_from_data(data, declared, given)


# ------------------------------------------------------------------------------- check

def check_graph(graph: Graph, precision=None) -> None:
    """Stage check, before any calibration: refuse an integer model (:class:`AlreadyQuantizedError`)
    and what :func:`intq.convert.convert` would refuse from shapes, types and constants alone
    (:func:`intq.convert.check_convertible`: every operator with no integer rule, listed with its
    nodes; the first node a rule refuses, named; ``precision``'s float islands need no rule). The
    one place these checks run."""
    if any(t.qparams is not None for t in graph.tensors.values()):
        raise AlreadyQuantizedError(f"graph {graph.name!r} is already an integer model; quantize its float model")
    check_convertible(graph, precision)


# ------------------------------------------------------------------------------- convert

def held_samples(data, graph: Graph, preprocess: Callable | None = None, limit: int | None = None) -> list[dict]:
    """The first ``limit`` (all when None) calibration samples, in memory: what the data-driven
    methods (mixed precision, bias correction, AdaRound) measure on."""
    return list(itertools.islice(iter_samples(data, graph, preprocess), limit))


@with_cluster
def convert(graph: Graph, table: CalibrationTable, *, samples: list[dict] | None = None, per_channel: bool = True,
            input_type: str = "float32", output_type: str = "float32", precision=None,
            target_sqnr: float | None = None, bias_correction: bool = False, adaround: bool = False,
            cluster=None, progress=None, micro: bool = False) -> Graph:
    """Stage convert: the float graph and its ranges become the integer graph.

    ``samples`` (calibration samples in memory, :func:`held_samples`) feed the data-driven methods:
    ``target_sqnr`` (dB) adds range-mismatched joins to int16 until the output SQNR on the first 8
    reaches it (:mod:`intq.ptq.precision`; if it cannot, ``metadata["target_shortfall"]`` says per
    output what was reached and what int8 weights alone allow); ``bias_correction``
    (:func:`intq.ptq.correct_biases`) and ``adaround`` (:func:`intq.ptq.adaround`) fit on the first
    half and are kept only if they bring the outputs closer to float on the second half (a
    conversion note says which; AdaRound is checked against the result of bias correction's check).
    ``precision`` (``{node or tensor: "int16" | "float"}``) keeps chosen joins in int16 or float.
    Then every kernel is prepared (:class:`intq.Interpreter`): a graph intq itself refuses
    (:class:`~intq.kernels.KernelError`) is refused here, before any export. ``cluster`` /
    ``workers``: the target SQNR's candidates and AdaRound's layers are Ray tasks (module docstring).
    ``progress(Progress)`` follows the ``target_sqnr`` search (:func:`intq.ptq.precision.auto_precision`). ``micro``:
    the builtins TensorFlow Lite Micro has no kernel for are written in forms it runs, bit-identical
    (:func:`intq.export.micro.lower_for_micro`: int8 GELU as QUANTIZE + CAST + GATHER of its table). Every conversion
    note is logged as a warning (logger ``intq.pipeline``)."""
    for method, wanted in (("target_sqnr", target_sqnr is not None), ("bias_correction", bias_correction),
                           ("adaround", adaround)):
        if wanted and not samples:
            raise ConversionError(f"{method} needs calibration data to measure on")
    options = {"per_channel": per_channel, "input_type": input_type, "output_type": output_type}
    precision = dict(precision or {})
    shortfall = None
    if target_sqnr is not None:
        first = samples[:8]
        auto, reached = auto_precision(graph, table, first, target_sqnr, convert_options={"per_channel": per_channel},
                                       base=precision, cluster=cluster, progress=progress)
        precision.update(auto)
        if reached < target_sqnr:
            shortfall = target_shortfall(graph, table, first, target_sqnr, precision, per_channel=per_channel)
    fit, held = (samples[: len(samples) // 2], samples[len(samples) // 2:]) if samples and len(samples) >= 2 \
        else (samples, samples)
    corrected = correct_biases(graph, fit, per_channel=per_channel) if bias_correction else None
    rounded = adaround_weights(graph, fit, per_channel=per_channel, cluster=cluster) if adaround else None
    table = reconcile_ranges(graph, table, keep=int16_tensors(graph, precision) | island_tensors(graph, precision))
    options["precision"] = precision
    q = convert_nodes(graph, table, **options)
    if corrected is not None:
        q = _closer_to_float(graph, q, convert_nodes(corrected, table, **options), held, "bias correction")
    if rounded is not None:
        q = _closer_to_float(graph, q, convert_nodes(rounded, table, **options), held, "AdaRound")
    if target_sqnr is not None:
        notes = tuple(r.message for r in shortfall.outputs) if shortfall is not None else ()
        q = q.replace(metadata={**q.metadata, "target_shortfall": shortfall,
                                "conversion_notes": (*q.metadata["conversion_notes"], *notes)})
    if micro:
        from intq.export.micro import lower_for_micro

        q = lower_for_micro(q)
    q = _runnable(q)
    for note in q.metadata.get("conversion_notes", ()):  # what the user should know: the library is not silent
        log.warning("%s", note)
    return q


def _runnable(q: Graph) -> Graph:
    """``q`` once every kernel prepares on the default target (``tflite``); a graph only LiteRT runs (an
    int16 GATHER chosen by the precision table: TensorFlow Lite Micro gathers int8) passes when it
    prepares on ``litert-ref``, with a conversion note naming what ``tflite`` refuses. A graph intq
    refuses on both (KernelError) goes no further."""
    from intq.kernels import KernelError

    try:
        Interpreter(q)
        return q
    except KernelError as tflm:
        try:
            Interpreter(q, target="litert-ref")
        except KernelError:
            raise tflm from None
        note = f"runs in LiteRT only (use target 'litert-ref'): {tflm}"
        return q.replace(metadata={**q.metadata, "conversion_notes": (*q.metadata.get("conversion_notes", ()), note)})


def _closer_to_float(float_graph: Graph, plain: Graph, treated: Graph, samples: list[dict], method: str) -> Graph:
    """``treated`` when its outputs are closer to ``float_graph``'s than ``plain``'s on the first
    :data:`CHECK_SAMPLES` of ``samples`` (samples the method did not fit on; output SQNR per
    channel, :func:`intq.analysis.sensitivity.output_sqnr`), else ``plain`` with a conversion note
    saying that ``method`` was not applied and why: an optional method never makes a model worse on
    the data it was calibrated on (on PP-OCR's classifier bias correction cost 1.25 points)."""
    first = samples[:CHECK_SAMPLES]
    runs = {}
    for key, g in (("float", float_graph), ("plain", plain), ("treated", treated)):
        it = Interpreter(g)
        runs[key] = {o: [] for o in float_graph.outputs}
        for s in first:
            for k, v in it.run(s).items():
                runs[key][k].append(v)
    before, after = output_sqnr(runs["float"], runs["plain"]), output_sqnr(runs["float"], runs["treated"])
    if after >= before:
        note = f"{method}: output SQNR on {len(first)} held-out calibration samples {before:.1f} -> {after:.1f} dB"
        return treated.replace(metadata={**treated.metadata,
                                         "conversion_notes": (*treated.metadata["conversion_notes"], note)})
    note = (f"{method} not applied: it moved the outputs further from float on {len(first)} held-out "
            f"calibration samples ({before:.1f} -> {after:.1f} dB output SQNR)")
    return plain.replace(metadata={**plain.metadata, "conversion_notes": (*plain.metadata["conversion_notes"], note)})


# ------------------------------------------------------------------------------- the library's quantize

@with_cluster
def quantize(model, data=None, *, method: str = "minmax", per_channel: bool = True, table: CalibrationTable | None = None,
             input_shapes=None, example_inputs=None, constant_inputs=None, progress=None, input_type: str = "float32",
             output_type: str = "float32", precision=None, target_sqnr: float | None = None,
             bias_correction: bool = False, equalization: bool = False, adaround: bool = False,
             smooth: float | None = None, cluster=None, micro: bool = False, **observer_options) -> Graph:
    """A model (path, ONNX proto, torch module or float Graph) and calibration ``data`` (or a ready
    ``table``) as an integer-only graph: the stages load to convert of this module.

    ``input_shapes``, ``example_inputs`` and ``constant_inputs`` go to :func:`intq.load`;
    ``method`` and ``observer_options`` to :func:`intq.calibrate`; ``equalization`` equalizes
    consecutive layers' weight ranges before calibration (:func:`intq.ptq.equalize`; refused with a
    ready ``table``, whose ranges would no longer apply); ``smooth`` (alpha in [0, 1], e.g. 0.5) migrates
    activation outlier channels into the weights of the linear layers reading them before calibration
    (:func:`intq.ptq.smooth`, SmoothQuant; measured on the first 256 samples of ``data``; refused with a
    ready ``table``; a conversion note says how many layers were smoothed); ``precision``, ``target_sqnr``,
    ``bias_correction``, ``adaround`` and ``micro`` as in :func:`convert` (measured on every sample of ``data``);
    ``cluster`` / ``workers``: on Ray (module docstring), the same graph bit for bit.
    """
    needs_samples = target_sqnr is not None or bias_correction or adaround
    keep = _ALL if needs_samples else SMOOTH_SAMPLES if smooth is not None else 0
    data = source(data, keep=keep) if data is not None else None  # arrays, DataLoaders...
    graph = load_float(model, input_shapes=input_shapes, example_inputs=example_inputs,
                       constant_inputs=constant_inputs, data=data)
    graph = _equalized(graph, equalization, table)
    graph, smoothed = _smoothed(graph, smooth, table, data)
    check_graph(graph, precision)
    if table is None:
        if data is None:
            raise ConversionError("quantize needs calibration data (or a calibration table=)")
        table = calibrate(graph, data, method, progress=progress, cluster=cluster, **observer_options)
    samples = held_samples(data, graph) if data is not None and needs_samples else None
    q = convert(graph, table, samples=samples, per_channel=per_channel, input_type=input_type,
                output_type=output_type, precision=precision, target_sqnr=target_sqnr,
                bias_correction=bias_correction, adaround=adaround, cluster=cluster, micro=micro)
    return _with_note(q, smoothed)


def _smoothed(graph: Graph, alpha: float | None, table, data, preprocess: Callable | None = None):
    """``graph`` smoothed with ``alpha`` (:func:`intq.ptq.smooth`) on the first :data:`SMOOTH_SAMPLES`
    of ``data``, and the report (None when not asked)."""
    if alpha is None:
        return graph, None
    if table is not None:
        raise ConversionError("smoothing changes the activations' ranges: calibrate after it (give data, not a table)")
    if data is None:
        raise ConversionError("smoothing needs calibration data to measure the activations' channel ranges on")
    return smooth_graph(graph, held_samples(data, graph, preprocess, SMOOTH_SAMPLES), alpha)


def _with_note(q: Graph, report) -> Graph:
    """``q`` with the smoothing report's note first among its conversion notes (logged as they are)."""
    if report is None:
        return q
    note = report.note()
    log.warning("%s", note)
    return q.replace(metadata={**q.metadata, "smoothed_layers": report.layers,
                               "conversion_notes": (note, *q.metadata.get("conversion_notes", ()))})


def _equalized(graph: Graph, equalization: bool, table) -> Graph:
    if not equalization:
        return graph
    if table is not None:
        raise ConversionError("equalization changes the activations' ranges: calibrate after it (give data, not a table)")
    return equalize(graph)


# ------------------------------------------------------------------------------- export

@dataclass(frozen=True)
class Export:
    """What :func:`export` produced: the ``paths`` staged or written (``.c`` and ``.h`` for C), the
    model's ``bytes`` (0 for C, whose constants are in ``c.constant_bytes``), the check of the export
    by output, the C export's report (``c``) for C, and for a portable ONNX export the weights it
    changed per node (``portable``: :class:`~intq.export.portable.PortableChange`)."""

    path: Path
    format: str
    paths: tuple[Path, ...]
    bytes: int
    check: ExportCheck | None
    c: CExportResult | None = None
    portable: list | None = None
    #: how portable was chosen for an ONNX export: "default" (uint8 activations), "requested"
    #: (portable=True), "off" (portable=False where it is the default: uint8 activations, int8 QDQ), "" otherwise
    portable_choice: str = ""
    certificates: tuple[Certificate, ...] = ()  # the overflow certificate per target the file claims


def export_targets(fmt: str, activations: str = "int8", c_target: str = "tflite") -> tuple[str, ...]:
    """The targets an export claims (those its check compares with): ``.tflite`` TFLite Micro and
    LiteRT's reference kernels, ONNX onnxruntime on this machine (``ort`` / ``ort-u8``, resolved per
    host), C its ``c_target``."""
    if fmt == "onnx":
        return ("ort-u8" if activations == "uint8" else "ort",)
    return (c_target,) if fmt == "c" else ("tflite", "litert-ref")


def certify_export(graph: Graph, fmt: str, activations: str = "int8", c_target: str = "tflite",
                   portable: bool | None = None, check=True, onnx_format: str = "qdq") -> tuple[Certificate, ...]:
    """The overflow certificates of ``graph`` (after :func:`~intq.export.portable.portable_weights`
    when ``portable``; None: :func:`~intq.export.portable.resolve_portable` of ``onnx_format``, True
    for uint8 ONNX activations and int8 QDQ) on :func:`export_targets`; with ``check`` True a certificate that is not ok
    raises its :class:`~intq.analysis.certificate.CertificateError` when an intermediate can overflow
    (naming the nodes, suggesting ``--portable`` for an ONNX export it repairs; nodes a target's kernel
    refuses are left to the export's check, which names the runtime); otherwise they are returned to
    be reported."""
    from intq.export.portable import portable_weights, resolve_portable

    portable = fmt == "onnx" and resolve_portable(portable, activations, onnx_format)
    if portable:
        graph = portable_weights(graph)[0]
    certs = tuple(certify(graph, t) for t in export_targets(fmt, activations, c_target))
    for c in certs:  # a node the target's kernel refuses is the export check's to report (it names the runtime)
        if check is True and c.overflows:
            raise c.error(portable_repairs=fmt == "onnx" and not portable)
    return certs


def export_format(path: str | Path) -> str:
    """``"tflite"``, ``"onnx"`` or ``"c"`` by the output's suffix; another suffix is a ConversionError."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConversionError(f"{path}: intq writes {', '.join(FORMATS)} files; give one of those suffixes")
    return FORMATS[suffix]


def export(graph: Graph, path: str | Path, *, format: str | None = None,  # noqa: A002 (the format's word)
           onnx_format: str = "qdq", activations: str = "int8",
           opset: int = DEFAULT_OPSET, c_target: str = "tflite", arena_limit: int | None = None, check=True,
           samples: Iterable[dict] | None = None, outputs: StagedOutputs | None = None,
           overwrite: bool = False, portable: bool | None = None) -> Export:
    """Stages export and check the export: ``graph`` written as ``format`` (default: ``path``'s
    suffix; ``"tflite"``, ``"onnx"`` with ``onnx_format`` / ``activations`` / ``opset``, ``"c"``: ``.c``
    + ``.h`` for ``c_target`` with ``arena_limit``), checked by output on ``samples`` (the first :data:`DEFAULT_SAMPLES`;
    default random inputs within the input ranges) before anything is written (``check``: True
    raises on a difference, ``"warn"`` keeps the file and reports it, False skips the check).
    ``outputs``: a command's :class:`~intq.files.StagedOutputs` to stage the files into (they land
    when it commits); by default they are written at once. ``portable`` (ONNX): weights bounded so
    that the file computes the same on every onnxruntime host (:func:`intq.export.export_onnx`;
    default None: on with uint8 activations, off with int8)."""
    path = Path(path)
    fmt = format or export_format(path)
    if fmt not in FORMATS.values():
        raise ConversionError(f"format {fmt!r}: intq writes {', '.join(FORMATS.values())}")
    samples = list(itertools.islice(samples, DEFAULT_SAMPLES)) if samples is not None else None
    if outputs is None:  # written at once: both C files or neither
        with StagedOutputs(overwrite=overwrite) as staged:
            result = _export(graph, path, fmt, staged, onnx_format, activations, opset, c_target, arena_limit, check,
                             samples, overwrite, portable)
        return result
    return _export(graph, path, fmt, outputs, onnx_format, activations, opset, c_target, arena_limit, check, samples,
                   overwrite, portable)


def _export(graph, path, fmt, staged, onnx_format, activations, opset, c_target, arena_limit, check, samples,
            overwrite, portable=None) -> Export:
    if portable and fmt != "onnx":
        raise ConversionError(f"portable applies to an ONNX export (onnxruntime's x86 kernels); {path} is {fmt}")
    from intq.export.portable import resolve_portable

    choice = ""
    if fmt == "onnx":
        by_default = resolve_portable(None, activations, onnx_format)
        choice = "requested" if portable else "off" if portable is False and by_default else \
            "default" if portable is None and by_default else ""
        portable = resolve_portable(portable, activations, onnx_format)
    certs = certify_export(graph, fmt, activations, c_target, portable, check, onnx_format)
    if fmt == "c":
        r = export_c(graph, path.parent, path.stem, target=c_target, arena_limit=arena_limit, overwrite=overwrite,
                     check=check, samples=samples, outputs=staged)
        return Export(path, fmt, (r.source, r.header), 0, r.check, r, certificates=certs)
    if fmt == "onnx":
        data = export_onnx(graph, format=onnx_format, activations=activations, opset=opset, check=check,
                           samples=samples, portable=portable)
        staged.stage(path, data)
        return Export(path, fmt, (path,), len(data), data.check, portable=data.portable, portable_choice=choice,
                      certificates=certs)
    data = export_tflite(graph, check=check, samples=samples)
    staged.stage(path, data)
    return Export(path, fmt, (path,), len(data), data.check, certificates=certs)


def _portable_dict(changes, choice: str = "") -> dict | None:
    """A portable export's cost: channels changed (rescaled, clipped), codes clipped, nodes touched,
    the worst and mean weight SQNR of the changed nodes (dB); ``chosen``: ``"default"`` (uint8
    activations) or ``"requested"``. ``{"enabled": False, "chosen": "off"}`` for a uint8 export
    made with portable=False; None where it does not apply (int8 activations, other formats)."""
    if choice == "off":
        return {"enabled": False, "chosen": "off"}
    if changes is None:
        return None
    touched = [c for c in changes if c.channels]
    worst = min(touched, key=lambda c: c.sqnr_db) if touched else None
    return {"enabled": True, "chosen": choice or "requested",
            "channels_changed": sum(c.channels for c in changes), "channels": sum(c.total for c in changes),
            "channels_rescaled": sum(c.rescaled for c in changes), "channels_clipped": sum(c.clipped for c in changes),
            "weights_clipped": sum(c.weights_clipped for c in changes),
            "nodes_changed": len(touched), "nodes": len(changes),
            "worst_weight_sqnr_db": None if worst is None else round(worst.sqnr_db, 2),
            "mean_weight_sqnr_db": round(sum(c.sqnr_db for c in touched) / len(touched), 2) if touched else None,
            "worst_node": None if worst is None else worst.node}


def _certificate_dict(certs) -> dict:
    """Per target: ok, the nodes that can overflow, and per rule the smallest margin (bits)."""
    out = {}
    for c in certs:
        d = c.as_dict()
        out[c.target] = {"ok": not c.overflows, "overflows": sorted({x.node for x in c.overflows}),
                         "min_margin_bits": {k: v["min_margin_bits"] for k, v in d["rules"].items()
                                             if v["min_margin_bits"] is not None}}
    return out


# ------------------------------------------------------------------------------- every stage

@dataclass(frozen=True)
class Result:
    """What :func:`run` did: the float and integer graphs, the calibration table, the export (and its
    check), the layer report on the first calibration samples, the seconds of each stage."""

    float_graph: Graph
    graph: Graph
    table: CalibrationTable
    export: Export | None
    layers: Report | None
    seconds: dict[str, float] = field(default_factory=dict)
    per_channel: bool = True

    def as_dict(self) -> dict:
        """The facts of the run as plain data (what ``intq quantize --json`` prints): the output and
        its size, operators, parameters, calibration, per-tensor methods, int16 and float regions,
        seconds per stage, the export check per runtime, conversion notes, and why a target SQNR was
        not reached (when it was not)."""
        q, table = self.graph, self.table
        check = self.export.check if self.export is not None else None
        out = {"output": str(self.export.path) if self.export is not None else None,
               "bytes": self.export.bytes if self.export is not None else 0, "ops": q.op_types(),
               "parameters": int(sum(t.data.size for t in q.tensors.values() if t.data is not None)),
               "calibration": {"method": table.method, "samples": table.num_samples},
               "method_per_tensor": method_per_tensor(table),
               "int16_tensors": list(q.metadata.get("int16_tensors", ())),
               "float_nodes": list(q.metadata.get("float_nodes", ())),
               "per_channel": self.per_channel,
               "seconds": {"check": 0.0, **{k: round(v, 2) for k, v in self.seconds.items()}},
               "runtimes": check.messages() if check is not None else {},
               "portable": _portable_dict(self.export.portable, self.export.portable_choice)
               if self.export is not None else None,
               "certificate": _certificate_dict(self.export.certificates) if self.export is not None else None,
               "export_check": check.as_dict() if check is not None else None,
               "notes": list(q.metadata.get("conversion_notes", ()))}
        shortfall = q.metadata.get("target_shortfall")
        if shortfall is not None:  # a target SQNR not reached: per output, reached vs the weight-only bound
            out["target_shortfall"] = {
                "target_db": shortfall.target_db, "reached_db": round(shortfall.reached_db, 2),
                "samples": shortfall.samples, "int8_ops": list(shortfall.int8_ops),
                "outputs": [{"output": x.output, "reached_db": round(x.reached_db, 2),
                             "weight_only_bound_db": round(x.bound_db, 2), "capped_channels": list(x.capped_channels),
                             "message": x.message} for x in shortfall.outputs]}
        return out


@with_cluster
def run(model, data, output: str | Path | None = None, *, input_shapes=None, constant_inputs=None,
        method: str = "minmax", preprocess: Callable | None = None,
        preprocess_for: Callable[[Graph], Callable | None] | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
        progress=None, per_channel: bool = True, precision=None, target_sqnr: float | None = None,
        bias_correction: bool = False, adaround: bool = False, equalization: bool = False,
        smooth: float | None = None, ptq_samples: int | None = 256, format: str | None = None, onnx_format: str = "qdq",  # noqa: A002
        activations: str = "int8",
        opset: int = DEFAULT_OPSET, c_target: str = "tflite", arena_limit: int | None = None, check=True,
        layer_samples: int = 0, outputs: StagedOutputs | None = None, overwrite: bool = False,
        portable: bool | None = None, cluster=None, search_progress=None, micro: bool = False,
        **observer_options) -> Result:
    """Every stage, in order (module docstring): ``model`` and calibration ``data`` to ``output``
    (``.tflite``, ``.onnx`` or ``.c``; None: no export), checked by output on the first calibration
    samples.

    ``preprocess`` reads the data (e.g. :class:`~intq.calibration.ImagePreprocess`), or
    ``preprocess_for(float graph)`` makes it once the model is loaded (the command line's image
    size comes from the input's shape); ``ptq_samples``: the calibration samples held in memory for
    ``target_sqnr``, ``bias_correction`` and ``adaround`` (the first 256; None: all);
    ``smooth`` (alpha) smooths before calibration as in :func:`quantize`;
    ``layer_samples`` > 0 compares float and integer layer by layer on that many first calibration
    samples (``Result.layers``); ``micro``: :func:`convert`'s. The export options and ``check`` are :func:`export`'s; ``cluster`` /
    ``workers``: calibration and the searches on Ray (module docstring). ``progress`` follows
    calibration, ``search_progress`` the ``target_sqnr`` search."""
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    if output is not None and format is None:
        export_format(output)  # an unknown suffix is refused before any work
    needs_samples = target_sqnr is not None or bias_correction or adaround
    # a one-pass source (a generator, a reader) keeps what the later passes read: the export check's
    # samples, the layer report's, and the data-driven methods' (intq.calibration.adapters.Source)
    keep = max(DEFAULT_SAMPLES, layer_samples, (ptq_samples or _ALL) if needs_samples else 0,
               SMOOTH_SAMPLES if smooth is not None else 0)
    data = source(data, keep=keep)
    graph = load_float(model, input_shapes=input_shapes, constant_inputs=constant_inputs, data=data)
    check_graph(graph, precision)
    seconds["load"] = time.perf_counter() - t0
    if preprocess_for is not None:
        preprocess = preprocess_for(graph)
    graph = _equalized(graph, equalization, None)
    t = time.perf_counter()
    graph, smoothed = _smoothed(graph, smooth, None, data, preprocess)
    if smoothed is not None:
        seconds["smooth"] = time.perf_counter() - t
    t = time.perf_counter()
    table = calibrate(graph, data, method, preprocess=preprocess, progress=progress, batch_size=batch_size,
                      cluster=cluster, **observer_options)
    seconds["calibrate"] = time.perf_counter() - t
    t = time.perf_counter()
    q = convert(graph, table, samples=held_samples(data, graph, preprocess, ptq_samples) if needs_samples else None,
                per_channel=per_channel, precision=precision, target_sqnr=target_sqnr,
                bias_correction=bias_correction, adaround=adaround, cluster=cluster, progress=search_progress,
                micro=micro)
    q = _with_note(q, smoothed)
    seconds["convert"] = time.perf_counter() - t
    exported = None
    if output is not None:
        t = time.perf_counter()
        samples = itertools.islice(iter_samples(data, graph, preprocess), DEFAULT_SAMPLES)
        exported = export(q, output, format=format, onnx_format=onnx_format, activations=activations, opset=opset,
                          c_target=c_target, arena_limit=arena_limit, check=check, samples=samples,
                          outputs=outputs, overwrite=overwrite, portable=portable)
        seconds["export"] = time.perf_counter() - t
    layers = None
    if layer_samples:
        t = time.perf_counter()
        layers = compare(graph, q, iter_batches(data, graph, batch_size, preprocess, limit=layer_samples))
        seconds["check"] = time.perf_counter() - t
    seconds["total"] = time.perf_counter() - t0
    return Result(graph, q, table, exported, layers, seconds, per_channel)


__all__ = ["load_float", "check_graph", "convert", "quantize", "export", "export_format", "export_targets",
           "certify_export", "run", "held_samples", "Result",
           "Export", "AlreadyQuantizedError", "CHECK_SAMPLES"]
