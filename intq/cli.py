"""The ``intq`` command.

    intq demo [-o OUT.tflite] [--force] [--json]
    intq quantize MODEL.onnx --calib DATA -o OUT.tflite|OUT.onnx [--format qdq|qoperator] [--opset N]
                  [--activations int8|uint8] [--input-shape name=1x3x224x224]
                  [--method minmax|ema|percentile|mse|entropy|auto] [--per-tensor] [--calib-table ranges.json]
                  [--size H W] [--mean ...] [--std ...] [--layout NCHW|NHWC] [--force] [--json]
    intq inspect MODEL (.onnx | .tflite) [--input-shape ...] [--target T] [--json]
    intq eval MODEL.onnx [QMODEL.tflite] --data DATA [--labels LABELS] [--calib DATA] [--limit N] [--json]
    intq compare MODEL.onnx [QMODEL.tflite] --data DATA [--html report.html] [--top N] [--limit N] [--json]
    (quantize, eval and compare also take --cluster ADDRESS [--workers N]: Ray, docs/scale.md)
    intq diff QMODEL.tflite --targets tflite,litert-ref --data DATA [--limit N] [--json]
    intq run MODEL (.tflite | .onnx) --input x.npy|x.npz [-o y.npy|y.npz] [--target T] [--json]
    intq export QMODEL.tflite --c DIR [--prefix model] [--arena-limit 64k] [--force] [--json]
    intq verify QMODEL (.tflite | .onnx) [--target T] [--html report.html] [--json]

DATA (for --calib and --data) is a folder of images (resized and normalised by --size, --mean,
--std, --layout), a folder of .npy/.npz files, or one .npz with an array per input; it runs
--batch-size samples at a time (default 32) in quantize, eval, compare and diff.

Threads: every command runs its BLAS and OpenMP work (the float model, calibration, the integer
engine's float-BLAS GEMMs) on ``--threads N`` threads, default 1 or ``$INTQ_THREADS``
(:mod:`intq.threads`; ``0`` leaves the libraries' own setting).

``intq quantize`` is a thin caller of :func:`intq.pipeline.run` (load, simplify, check, calibrate,
convert, export, check the export): it parses the arguments, prints and chooses the exit code. It
reports success only after the written file ran in its runtime (LiteRT and TFLite Micro for a
.tflite, onnxruntime for an .onnx, the compiled C for model.c) on the first calibration samples
with outputs equal to intq's target (:mod:`intq.export.check`); a file they refuse or compute
differently is not written and the command fails, unless ``--keep-unverified``.

Exit codes: 0 ok, 1 failure (the error is one readable paragraph; ``--debug`` shows the
traceback), 2 usage (bad arguments, an output path refused), 70 internal error (an unexpected
exception: a bug in intq, reported as such), 130 interrupted (Ctrl-C; 143 for SIGTERM).

Files: every output is checked before any work (never an input, never another output, never an
existing file without ``--force``), written to a uniquely named temporary file in its own folder,
and moved into place only when the whole command succeeded (:class:`intq.files.StagedOutputs`):
a failure or an interruption leaves nothing written and every existing file as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from importlib import resources
from pathlib import Path

from intq.errors import IntqError

# numpy and the rest of intq are imported inside the commands: the command starts, and answers
# Ctrl-C with its own handler (`main`), without waiting for them.

#: Exit codes (the module docstring).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70

EXAMPLES = """examples:
  intq demo
  intq quantize model.onnx --calib images/ --size 224 224 --input-shape input=1x3x224x224 -o model_int8.tflite
  intq quantize model.onnx --calib calib.npz --method percentile --calib-table ranges.json -o model_int8.tflite
  intq quantize model.onnx --calib calib.npz --format qoperator -o model_int8.onnx
  intq inspect model_int8.tflite
  intq eval model.onnx model_int8.tflite --data val.npz --labels val_labels.npy
  intq eval model.onnx model_int8.tflite --data val/ --size 224 224 --cluster 10.0.0.5:6379
  intq compare model.onnx model_int8.tflite --data val/ --size 224 224 --html report.html
  intq diff model_int8.tflite --targets tflite,litert-ref --data val.npz
  intq run model_int8.tflite --input x.npy -o y.npy
  intq export model_int8.tflite --c out/ --arena-limit 64k
  intq quantize model.onnx --calib calib.npz -o model.c
  intq verify model_int8.onnx --target ort-u8s8-avx2
"""


class UsageError(Exception):
    """Bad command-line arguments (exit code 2)."""


class Interrupted(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that the same handler cleans up (exit 143)."""


def _out(args, text: str) -> None:
    """Print a line of the command's report (not with --json or --quiet), after ending a progress line."""
    from intq.console import end_lines

    end_lines()
    if not args.json and not getattr(args, "quiet", False):
        print(text)


def _progress(args, label: str):
    """A progress line on stderr (done/total, rate, ETA: :class:`intq.console.ProgressLine`) when it is a
    terminal and neither --json nor --quiet; None otherwise."""
    from intq.console import ProgressLine

    line = ProgressLine(label, enabled=not args.json and not getattr(args, "quiet", False))
    return line if line.enabled else None


def _plan_outputs(args, outputs: dict, inputs: dict) -> dict[str, Path]:
    """Check the command's output paths before any work (:func:`intq.files.check_outputs`): not
    an input, not another output, not an existing file without --force."""
    from intq.files import check_outputs

    return check_outputs(outputs, inputs, overwrite=getattr(args, "force", False))


def _input_shapes(specs) -> dict:
    """``--input-shape name=1x3x224x224`` (repeatable) -> ``{name: (1, 3, 224, 224)}``; every dim a
    positive integer, each input named once, the float32 tensor within the size limit."""
    from intq.limits import TensorTooLargeError, check_tensor_size

    shapes = {}
    for spec in specs or []:
        name, _, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            raise UsageError(f"--input-shape {spec!r}: expected name=1x3x224x224") from None
        if not name or not shape:
            raise UsageError(f"--input-shape {spec!r}: expected name=1x3x224x224")
        if any(d < 1 for d in shape):
            raise UsageError(f"--input-shape {spec!r}: every dimension must be a positive integer")
        if name in shapes:
            raise UsageError(f"--input-shape names {name!r} twice")
        try:
            check_tensor_size(shape, "float32", f"--input-shape {spec}")
        except TensorTooLargeError as e:
            raise UsageError(str(e)) from None
        shapes[name] = shape
    return shapes


def _input_values(specs) -> dict:
    """``--input-value sr=16000`` (or ``name=1,2,3`` for a vector): inputs fixed to a value."""
    values = {}
    for spec in specs or []:
        name, _, text = spec.partition("=")
        try:
            numbers = [float(v) if any(c in v for c in ".eE") else int(v) for v in text.split(",")]
        except ValueError:
            raise UsageError(f"--input-value {spec!r}: expected name=16000 or name=1,2,3") from None
        if not name or not text:
            raise UsageError(f"--input-value {spec!r}: expected name=16000 or name=1,2,3")
        values[name] = numbers[0] if len(numbers) == 1 else numbers
    return values


def _load(args):
    """The model of ``args`` with its input shapes and fixed inputs (``--input-shape``, ``--input-value``)."""
    import intq

    return intq.load(args.model, input_shapes=_input_shapes(args.input_shape),
                     constant_inputs=_input_values(getattr(args, "input_value", None)) or None)


# ------------------------------------------------------------------- argument types (argparse)

#: The CLI's calibration method. mse (per tensor, the range of least expected int8 error) is closer
#: to float than TensorFlow's converter and onnxruntime's quantize_static (MinMax and Percentile),
#: or within 0.01 dB of them, on every model of docs/accuracy.md; minmax (intq.quantize's default,
#: the converter's ranges) is 0.1-2 dB further than ORT on four of them. mse costs 1.3-2.5x
#: minmax's calibration time there.
DEFAULT_METHOD = "mse"

#: the calibration methods (intq.calibration.OBSERVER_METHODS; here so that parsing imports no numpy)
METHODS = ("minmax", "ema", "percentile", "mse", "entropy", "auto")
#: --sensitivity without N: every sample the comparison used
_ALL_SAMPLES = -1

#: --batch-size's default: intq.calibration.data.DEFAULT_BATCH_SIZE, written here so that the command
#: starts without importing numpy (tests/test_cli.py checks the two agree).
_DEFAULT_BATCH_SIZE = 32


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be a positive integer")
    return value


def _nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 or more")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def _positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


def _byte_size(text: str) -> int:
    from intq.limits import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# ------------------------------------------------------------------------------------- demo

def cmd_demo(args) -> dict:
    """Quantize the bundled digits CNN, measure it, export it, check LiteRT agrees."""
    import intq
    from intq.analysis import compare
    from intq.analysis.evaluate import evaluate
    from intq.runtime.oracles.litert import run_litert
    try:
        from intq.runtime.oracles.tflm import run_tflm
        import tflite_micro  # noqa: F401  (an optional package: the check is skipped without it)
    except ImportError:
        run_tflm = None
    from intq.passes import simplify
    from intq.testing.digits import load_split

    import numpy as np

    from intq.export.tflite_writer import to_tflite_bytes

    if args.write_data:
        return _write_demo_data(args)
    out = _plan_outputs(args, {"-o": args.output}, {})["-o"] if args.output else None
    t0 = time.perf_counter()
    model = resources.files("intq") / "data" / "digits_cnn.onnx"
    (x_train, _), (x_test, y_test) = load_split()
    fg = simplify(intq.load(str(model)))
    calib = [x[None] for x in x_train[:200]]
    table = intq.calibrate(fg, calib, "minmax", progress=_progress(args, "calibrating"))
    if not args.json and sys.stderr.isatty():
        print(file=sys.stderr)
    qg = intq.quantize(fg, table=table)
    t_quant = time.perf_counter() - t0

    ev = evaluate(fg, qg, [{"image": x[None]} for x in x_test], y_test)
    report = compare(fg, qg, [{"image": x[None]} for x in x_test[:100]])
    data = to_tflite_bytes(qg)
    out, kept = _demo_output(out, data)

    lite, micro = intq.Interpreter(qg, target="litert-ref"), intq.Interpreter(qg, target="tflite")
    equal = equal_tflm = 0
    for x in x_test:
        theirs = run_litert(data, [x[None]], preserve_all_tensors=False)["outputs"][0]
        equal += int(np.array_equal(lite.run({"image": x[None]})["logits"], theirs))
        if run_tflm is not None:
            theirs = run_tflm(data, [x[None]], preserve_all_tensors=False)["outputs"][0]
            equal_tflm += int(np.array_equal(micro.run({"image": x[None]})["logits"], theirs))
    result = {
        "model": "digits CNN (bundled), 1x1x8x8, trained on scikit-learn digits",
        "calibration_samples": len(calib),
        "held_out_samples": int(len(y_test)),
        "float_accuracy": ev.float_accuracy,
        "int8_accuracy": ev.int_accuracy,
        "top1_agreement": ev.outputs[0].top1_agreement,
        "output_sqnr_db": round(ev.outputs[0].sqnr_db, 2),
        "worst_layers": [{"tensor": r.name, "op": r.op, "sqnr_db": round(r.sqnr_db, 2), "hint": r.hint}
                         for r in report.worst(3)],
        "tflite": str(out),
        "tflite_bytes": len(data),
        "litert_reference_identical": f"{equal}/{len(x_test)}",
        "tflite_micro_identical": f"{equal_tflm}/{len(x_test)}" if run_tflm else "tflite-micro not installed",
        "seconds": round(time.perf_counter() - t0, 2),
    }
    _out(args, f"""intq demo: the bundled digits CNN, quantized to int8 and checked
  calibrated on {len(calib)} training digits, converted in {t_quant:.2f} s
  float accuracy  {result['float_accuracy']:.2%} on {len(y_test)} held-out digits
  int8 accuracy   {result['int8_accuracy']:.2%}  (top-1 agreement with float {result['top1_agreement']:.2%}, output SQNR {result['output_sqnr_db']:.1f} dB)
  worst layers (SQNR vs float):""")
    for r in report.worst(3):
        _out(args, f"    {r.sqnr_db:6.1f} dB  {r.op:16s} {r.name}" + (f"  -- {r.hint}" if r.hint else ""))
    _out(args, f"""  {'kept' if kept else 'wrote'} {out} ({len(data)} bytes{', identical to the file there' if kept else ''})
  LiteRT reference kernels on that file give outputs identical to intq's (target litert-ref): {equal}/{len(x_test)} digits
  TensorFlow Lite Micro on that file gives outputs identical to intq's (target tflite): {result['tflite_micro_identical']}
  total {result['seconds']:.1f} s""")
    if equal != len(x_test) or (run_tflm is not None and equal_tflm != len(x_test)):
        raise RuntimeError(f"the runtimes' outputs differ from intq's: LiteRT on {len(x_test) - equal} digits, "
                           f"TFLite Micro on {len(x_test) - equal_tflm if run_tflm else 0}")
    if not kept:
        args.outputs.stage(out, data)
    _out(args, "  next: intq demo --write-data demo/   (the model, calibration and test files the README's examples use)")
    return result


#: where ``intq demo`` writes its .tflite when -o is not given
DEMO_OUTPUT = "digits_int8.tflite"


def _demo_output(out: Path | None, data: bytes) -> tuple[Path, bool]:
    """Where the demo writes ``data``, and whether the file there already holds exactly it: ``-o`` when
    given (checked before any work); else :data:`DEMO_OUTPUT`, kept when it holds these bytes (a second
    ``intq demo``: the demo is deterministic), else the first free ``digits_int8-N.tflite`` (a file the
    user never named is never replaced, and the demo never fails for it)."""
    if out is not None:
        return out, False
    candidate = Path(DEMO_OUTPUT)
    n = 1
    while candidate.exists() or candidate.is_symlink():
        try:
            if candidate.is_file() and candidate.read_bytes() == data:
                return candidate, True
        except OSError:
            pass
        n += 1
        candidate = Path(f"{Path(DEMO_OUTPUT).stem}-{n}.tflite")
    return candidate, False


#: what ``intq demo --write-data DIR`` writes: the README's examples use exactly these files
DEMO_FILES = ("digits_cnn.onnx", "calib.npz", "test.npz", "test_labels.npy", "x.npy")


def _write_demo_data(args) -> dict:
    """``intq demo --write-data DIR``: the bundled model and the digits as the files the README's
    examples name (``calib.npz``: 200 training digits, ``test.npz`` + ``test_labels.npy``: the 450
    held-out ones, ``x.npy``: one of them), written through the command's staged outputs."""
    import numpy as np

    from intq.testing.digits import load_split

    folder = Path(args.write_data)
    paths = _plan_outputs(args, {f"--write-data ({name})": folder / name for name in DEMO_FILES}, {})
    (x_train, _), (x_test, y_test) = load_split()
    model = (resources.files("intq") / "data" / "digits_cnn.onnx").read_bytes()
    arrays = {"calib.npz": {"image": x_train[:200]}, "test.npz": {"image": x_test}}
    for label, path in paths.items():
        name = path.name
        if name == "digits_cnn.onnx":
            payload = model
        else:
            buf = io.BytesIO()
            if name.endswith(".npz"):
                np.savez(buf, **arrays[name])
            else:
                np.save(buf, y_test if name == "test_labels.npy" else x_test[:1], allow_pickle=False)
            payload = buf.getvalue()
        args.outputs.stage(path, payload)
    _out(args, f"""wrote the demo's files to {folder}/:
  digits_cnn.onnx   the bundled float model (input image: [batch, 1, 8, 8], output logits: [batch, 10])
  calib.npz         200 training digits (image: float32 [200, 1, 8, 8] in [0, 1]) to calibrate on
  test.npz          the 450 held-out digits, test_labels.npy their classes (int64 [450])
  x.npy             one held-out digit (float32 [1, 1, 8, 8])
then, in {folder}/:
  intq quantize digits_cnn.onnx --calib calib.npz -o digits_int8.tflite
  intq eval digits_cnn.onnx digits_int8.tflite --data test.npz --labels test_labels.npy
  intq compare digits_cnn.onnx digits_int8.tflite --data test.npz --labels test_labels.npy --html report.html
  intq run digits_int8.tflite --input x.npy""")
    return {"written": {p.name: str(p) for p in paths.values()}}


# --------------------------------------------------------------------------------- quantize

def _preprocess(args, graph):
    """The image preprocessing the --size/--mean/--std/--layout flags describe (None: defaults)."""
    from intq.calibration import ImagePreprocess

    if not (args.size or args.mean or args.std or args.layout):
        return None
    layout = args.layout or "NCHW"
    shape = graph.tensors[graph.inputs[0]].shape
    if args.size:
        h, w = args.size
    elif shape is not None and len(shape) == 4:
        h, w = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    else:
        raise UsageError("--size H W is needed: the model's input is not an image tensor of known size")
    kw = {"height": h, "width": w, "layout": layout}
    if args.mean:
        kw["mean"] = tuple(args.mean)
    if args.std:
        kw["std"] = tuple(args.std)
    return ImagePreprocess(**kw)


def _existing(path: str, flag: str) -> str:
    if not Path(path).exists():
        raise UsageError(f"{flag} {path}: no such file or folder")
    return path


def _cluster(args):
    """The Ray cluster of --cluster / --workers (connected on first use, closed when the command
    ends: :func:`_execute`), or None for a local run."""
    if getattr(args, "cluster", None) is None and getattr(args, "workers", None) is None:
        return None
    if getattr(args, "cluster_connection", None) is None:
        from intq.distributed import connect

        args.cluster_connection = connect(args.cluster, args.workers)
    return args.cluster_connection


def _end_progress(args) -> None:
    from intq.console import end_lines

    end_lines()


def _row_dict(r) -> dict:
    import numpy as np

    return {"tensor": r.name, "op": r.op, "sqnr_db": round(r.sqnr_db, 2) if np.isfinite(r.sqnr_db) else "inf",
            "cosine": round(r.cosine, 5), "max_err_lsb": round(r.max_err_lsb, 2),
            "mean_err_lsb": round(r.mean_err_lsb, 3), "saturated": round(r.saturated, 5),
            "range_used": round(r.range_used, 4), "hint": r.hint}


def _pipeline_options(args) -> dict:
    """The pipeline's options (:func:`intq.pipeline.run`) of the model, calibration and precision flags."""
    from intq.convert.precision import load_precision

    precision: dict[str, str] = {}
    for item in args.precision or ():
        if "=" in item:
            name, prec = item.split("=", 1)
            precision[name.strip()] = prec.strip()
        else:
            precision.update(load_precision(_existing(item, "--precision")))
    return {"input_shapes": _input_shapes(args.input_shape),
            "constant_inputs": _input_values(getattr(args, "input_value", None)) or None,
            "method": args.method, "preprocess_for": lambda fg: _preprocess(args, fg), "batch_size": args.batch_size,
            "progress": _progress(args, "calibrating"), "search_progress": _progress(args, "searching precisions"),
            "per_channel": not args.per_tensor, "precision": precision,
            "target_sqnr": args.target_sqnr, "bias_correction": args.bias_correction, "adaround": args.adaround,
            "equalization": args.equalize, "smooth": args.smooth, "cluster": _cluster(args),
            "micro": getattr(args, "micro", False)}


def _quantized(args, integer_hint: str, output=None, **export_options):
    """:func:`intq.pipeline.run` on MODEL and --calib with the command's flags; an integer MODEL is a
    usage error (``integer_hint`` says what to do instead)."""
    from intq import pipeline

    data = _existing(args.calib, "--calib")
    try:
        return pipeline.run(args.model, data, output, **_pipeline_options(args), **export_options)
    except pipeline.AlreadyQuantizedError:
        raise UsageError(f"{args.model} is already an integer model; {integer_hint}") from None
    finally:
        _end_progress(args)


def cmd_quantize(args) -> dict:
    """``intq quantize``: :func:`intq.pipeline.run` (load, simplify, check, calibrate, convert, export,
    check the export), then the report."""
    from collections import Counter

    from intq.analysis.compare import POOR_SQNR_DB
    from intq.onnx_format.schema import DEFAULT_OPSET

    header = Path(args.output).with_suffix(".h") if Path(args.output).suffix == ".c" else None  # -o model.c
    out = _plan_outputs(args, {"-o": args.output, "-o (its header)": header, "--calib-table": args.calib_table},
                        {"MODEL": args.model, "--calib": args.calib})["-o"]
    fmt = "onnx" if out.suffix.lower() == ".onnx" else "c" if out.suffix == ".c" else "tflite"  # else: a .tflite
    if fmt != "onnx" and (args.format or args.opset or args.activations != "int8" or args.portable is not None):
        raise UsageError("--format, --activations, --opset and --portable apply to an .onnx output; -o names "
                         f"{out.suffix or 'no suffix'}")
    limit = _parse_bytes(args.arena_limit) if args.arena_limit else None
    r = _quantized(args, "quantize its float model, or use `intq eval` / `intq compare` / `intq run` / `intq diff` on it",
                   out, format=fmt, onnx_format=args.format or "qdq", activations=args.activations,
                   opset=args.opset or DEFAULT_OPSET, arena_limit=limit,
                   check="warn" if args.keep_unverified else True, layer_samples=args.check_samples,
                   outputs=args.outputs, overwrite=args.force, portable=args.portable)
    qg, table, exported, check = r.graph, r.table, r.export, r.layers
    if args.calib_table:
        args.outputs.stage(args.calib_table, table.dumps())
    poor = [x for x in check.rows if x.sqnr_db < POOR_SQNR_DB] if check else []
    result = {"model": args.model, **r.as_dict(), "poor_layers": [_row_dict(x) for x in poor]}
    runtimes, methods, params = result["runtimes"], result["method_per_tensor"], result["parameters"]
    if fmt == "c":
        result["c"] = c = _c_report(exported.c, qg, out.stem)
        _out(args, f"quantized {args.model} -> {out} + {out.with_suffix('.h').name} ({params:,} parameters)")
        _out(args, _c_summary(c))
    else:
        _out(args, f"quantized {args.model} -> {out} ({exported.bytes:,} bytes, {params:,} parameters)")
    _out(args, "  ops: " + ", ".join(f"{k}x{v}" for k, v in qg.op_types().items()))
    _out(args, "  runs in: " + "; ".join(f"{k} ({v})" for k, v in runtimes.items()))
    _portable_lines(args, result.get("portable"))
    for target, c in (result.get("certificate") or {}).items():
        if c["ok"]:
            worst = min(c["min_margin_bits"].items(), key=lambda kv: kv[1] if kv[1] != "inf" else float("inf"),
                        default=None)
            _out(args, f"  overflow certificate ({target}): no intermediate can overflow"
                       + (f" (least headroom: {worst[0]}, {worst[1]} bits)" if worst else ""))
        else:  # --keep-unverified: written, but say so loudly
            _out(args, f"  WARNING: overflow certificate ({target}): can overflow in {', '.join(c['overflows'][:6])} "
                       "(`intq verify` names the rule; --portable, the default for uint8 activations and int8 QDQ, repairs x86 pair "
                       "saturation)")
    if exported.check is not None and not exported.check.equal:  # --keep-unverified: written, but say so loudly
        _out(args, "  WARNING: written unverified (--keep-unverified): the runtime computes other outputs than intq "
                   "says; please report it with the model")
    _out(args, f"  calibration: {args.method} on {table.num_samples} samples ({r.seconds['calibrate']:.1f} s); "
               f"weights {'per channel' if not args.per_tensor else 'per tensor'}; converted in "
               f"{r.seconds['convert']:.1f} s")
    if qg.metadata.get("int16_tensors"):
        int16 = qg.metadata["int16_tensors"]
        _out(args, f"  int16 region ({len(int16)} tensors; all in --json): " + ", ".join(int16[:8])
             + (" ..." if len(int16) > 8 else ""))
    if qg.metadata.get("float_nodes"):
        _out(args, "  float island: " + ", ".join(qg.metadata["float_nodes"]))
    if len(set(methods.values())) > 1:
        _out(args, "  ranges chosen by: " + ", ".join(f"{m} {n}" for m, n in Counter(methods.values()).most_common())
             + " (per tensor: --json, or the --calib-table)")
    if check:
        if poor:
            _out(args, f"  layers below {POOR_SQNR_DB:.0f} dB SQNR on {check.samples} calibration samples:")
            for x in poor[:10]:
                _out(args, f"    {x.sqnr_db:6.1f} dB  {x.op:16s} {x.name}" + (f"  -- {x.hint}" if x.hint else ""))
        else:
            worst = check.rows[0] if check.rows else None
            _out(args, f"  no layer below {POOR_SQNR_DB:.0f} dB SQNR on {check.samples} calibration samples"
                       + (f" (worst {worst.sqnr_db:.1f} dB: {worst.name})" if worst else ""))
    # the conversion notes (and a missed --target-sqnr) are the library's warnings, on stderr: intq.pipeline
    if args.calib_table:
        _out(args, f"  calibration table: {args.calib_table}")
    return result


# ---------------------------------------------------------------------------------- inspect

def cmd_inspect(args) -> dict:
    import intq
    from intq.analysis.requant_table import format_requantization_table, requantization_table

    g = _load(args)
    _resolve_target(args, g)
    _out(args, g.summary(max_nodes=None))
    integer = any(t.qparams is not None for t in g.tensors.values())
    rows = requantization_table(g, target=args.target) if integer else []
    if integer:
        _out(args, f"\nfixed-point requantization (target {args.target}): y = clamp(zp + round(acc * m * 2^(shift-31)))")
        _out(args, format_requantization_table(rows))
    from intq.runtime import native

    return {"model": args.model, "nodes": len(g.nodes), "ops": g.op_types(), "integer": integer,
            "native": native.report(),  # this host: CPU class, native library, measured matrix products
            "inputs": {n: _shape(g, n) for n in g.inputs},
            "outputs": {n: _shape(g, n) for n in g.outputs},
            "quantization": {name: {"dtype": t.dtype.name, "scale": [float(v) for v in t.qparams.scale],
                                    "zero_point": [int(v) for v in t.qparams.zero_point],
                                    "axis": t.qparams.axis}
                             for name, t in g.tensors.items() if t.qparams is not None},
            "requantization": [r.as_dict() for r in rows]}


def cmd_verify(args) -> dict:
    """``intq verify``: :func:`intq.analysis.certificate.certify` on an integer model; exit 1 when an
    intermediate can overflow on the target."""
    from intq.analysis.certificate import certificate_html, certify

    out = _plan_outputs(args, {"--html": args.html}, {"MODEL": args.model}).get("--html")
    g = _load(args)
    if not any(t.qparams is not None for t in g.tensors.values()):
        raise UsageError(f"{args.model} is a float model; quantize it first (`intq quantize`), then verify the result")
    _resolve_target(args, g)
    cert = certify(g, args.target)
    if out is not None:
        args.outputs.stage(out, certificate_html(cert).encode())
    _out(args, f"{args.model} on target {cert.target}: " + ("no intermediate can overflow" if cert.ok else
               f"{len({c.node for c in cert.failures})} node(s) can overflow"))
    for rule, r in cert.rules().items():
        m = r["min_margin_bits"]
        margin = "" if m is None else f"; min margin {m:.2f} bits ({r['worst_node']})"
        bad = f"; CAN OVERFLOW: {', '.join(r['overflows'][:6])}" + (" ..." if len(r["overflows"]) > 6 else "") \
            if r["overflows"] else ""
        _out(args, f"  {rule:16s} {r['checked']:4d} checks{margin}{bad}")
    for c in cert.failures[:10]:
        _out(args, f"  node {c.node!r} ({c.op}): {c.rule}: {c.detail}: up to {c.bound} > {c.limit}")
    if out is not None:
        _out(args, f"  wrote {out}")
    if not cert.ok:
        args.exit_code = EXIT_FAILURE
    return {"model": args.model, **cert.as_dict(), **({"html": str(out)} if out is not None else {})}


def _shape(g, name):
    shape = g.tensors[name].shape
    return None if shape is None else [d for d in shape]


# ------------------------------------------------------------------------ eval and compare

def _float_and_int(args):
    """The float graph (MODEL) and the integer graph (QMODEL, or MODEL quantized with --calib through
    :func:`intq.pipeline.run`, equalized / smoothed first with --equalize / --smooth: the same function
    in float, which stays the reference)."""
    import intq
    from intq import pipeline

    hint = "give the float model first, then QMODEL"
    t0 = time.perf_counter()
    if args.qmodel:
        fg = _load_float(args)
        if any(t.qparams is not None for t in fg.tensors.values()):
            raise UsageError(f"{args.model} is already an integer model: {hint}")
        qg = intq.load(_existing(args.qmodel, "QMODEL"), input_shapes=_input_shapes(args.input_shape))
        source = args.qmodel
    else:
        if not args.calib:
            raise UsageError("give QMODEL (the integer .tflite) or --calib DATA to quantize MODEL first")
        r = _quantized(args, hint)
        fg, qg = r.float_graph, r.graph
        source = f"{args.model} quantized ({args.method}, {r.table.num_samples} samples)"
    _resolve_target(args, qg)
    return fg, qg, source, time.perf_counter() - t0


def _load_float(args):
    """MODEL as the pipeline loads it (:func:`intq.pipeline.load_float`): dynamic dimensions the
    --input-shape flags leave open are bound from --data / --calib."""
    from intq import pipeline

    data = getattr(args, "data", None) or getattr(args, "calib", None)
    return pipeline.load_float(args.model, input_shapes=_input_shapes(args.input_shape),
                               constant_inputs=_input_values(getattr(args, "input_value", None)) or None,
                               data=data if data and Path(data).exists() else None)


def _resolve_target(args, graph) -> None:
    """``--target`` when given; else the target a quantized ONNX file names (``ort`` / ``ort-u8``:
    onnxruntime's arithmetic on it), else ``tflite``."""
    if args.target is None:
        args.target = graph.metadata.get("onnx_target") or "tflite"


def _data_options(args, fg) -> dict:
    """--data (checked to exist), its image preprocessing, --batch-size and --limit: the data options of
    :func:`intq.analysis.evaluate.evaluate` and :func:`intq.compare`."""
    return {"data": _existing(args.data, "--data"), "preprocess": _preprocess(args, fg), "batch_size": args.batch_size,
            "limit": args.limit}


def _labels(args):
    """--labels (at most --limit of them), or None."""
    from intq.analysis.evaluate import load_labels

    labels = load_labels(_existing(args.labels, "--labels")) if getattr(args, "labels", None) else None
    if labels is not None and args.limit is not None:
        labels = labels[: args.limit]
    return labels


def cmd_eval(args) -> dict:
    from intq.analysis.evaluate import evaluate

    labels = _labels(args)
    fg, qg, source, t_models = _float_and_int(args)
    ev = evaluate(fg, qg, labels=labels, target=args.target, progress=_progress(args, "evaluating"),
                  cluster=_cluster(args), **_data_options(args, fg))
    _end_progress(args)
    result = {"model": args.model, "qmodel": source, "target": args.target, **ev.as_dict(),
              "seconds_models": round(t_models, 2)}
    _out(args, f"{args.model} (float) vs {source} (int8, target {args.target}) on {ev.samples} samples")
    if ev.float_accuracy is not None:
        _out(args, f"  accuracy   float {ev.float_accuracy:.2%}   int8 {ev.int_accuracy:.2%}   "
                   f"({100 * (ev.int_accuracy - ev.float_accuracy):+.2f} points, {ev.rows} labelled rows)")
    for o in ev.outputs:
        agree = f"   top-1 agreement {o.top1_agreement:.2%}" if o.top1_agreement is not None else ""
        _out(args, f"  output {o.float_name}{list(o.shape)}: SQNR {o.sqnr_db:.1f} dB, max |err| {o.max_abs_err:.4g}{agree}")
    _out(args, f"  time: float {ev.seconds['float']:.2f} s, int8 {ev.seconds['int']:.2f} s")
    return result


def _sensitivity(args, fg, qg, mapped: bool, compared: int):
    """``intq compare --sensitivity [N]``: the per-layer ranking on the samples the comparison used
    (all of them, or the first N)."""
    from intq.analysis.sensitivity import sensitivity
    from intq.calibration import iter_samples

    if not mapped:
        raise UsageError("--sensitivity needs an integer graph intq made (quantize MODEL with --calib instead of "
                         "giving QMODEL): it maps every integer tensor to its float tensor")
    n = compared if args.sensitivity == _ALL_SAMPLES else min(args.sensitivity, compared)
    samples = iter_samples(_existing(args.data, "--data"), fg, _preprocess(args, fg))
    r = sensitivity(fg, qg, itertools.islice(samples, n), progress=_progress(args, f"sensitivity on {n} samples"),
                    cluster=_cluster(args))
    _end_progress(args)
    return r


def _sweep_options(spec: str) -> dict:
    """One ``--sweep`` run: ``+``-joined settings (a calibration method, ``per-tensor`` / ``per-channel``,
    ``bias-correction``, ``adaround``, ``equalize``, ``smooth[=ALPHA]``, ``target-sqnr=DB``, ``int16=LAYER`` /
    ``float=LAYER``) as :func:`intq.pipeline.run` options."""
    options: dict = {}
    for token in (t.strip() for t in spec.split("+")):
        if token in METHODS:
            options["method"] = token
        elif token in ("per-tensor", "per-channel"):
            options["per_channel"] = token == "per-channel"
        elif token in ("bias-correction", "adaround", "equalize"):
            options[{"equalize": "equalization"}.get(token, token.replace("-", "_"))] = True
        elif token == "smooth" or token.startswith("smooth="):
            try:
                options["smooth"] = float(token.split("=", 1)[1]) if "=" in token else 0.5
            except ValueError:
                raise UsageError(f"--sweep {spec!r}: smooth=ALPHA takes a number in [0, 1]") from None
        elif token.startswith("target-sqnr="):
            try:
                options["target_sqnr"] = float(token.split("=", 1)[1])
            except ValueError:
                raise UsageError(f"--sweep {spec!r}: target-sqnr=DB takes a number") from None
        elif token.startswith(("int16=", "float=")):
            prec, layer = token.split("=", 1)
            options.setdefault("precision", {})[layer] = prec
        else:
            raise UsageError(f"--sweep {spec!r}: {token!r} is not a setting; use {'/'.join(METHODS)}, per-tensor, "
                             "per-channel, bias-correction, adaround, equalize, smooth[=ALPHA], target-sqnr=DB, int16=LAYER, "
                             "float=LAYER, joined with +")
    return options


def _runs(args, fg, qg, source: str) -> list[dict]:
    """The runs ``intq compare`` compares: the main one (QMODEL, or MODEL quantized with --calib), each
    ``--against QMODEL`` and each ``--sweep`` of settings (MODEL quantized again with --calib)."""
    import intq
    from intq import pipeline
    from intq.analysis.evaluate import with_output_mapping

    runs = [{"name": Path(args.qmodel).name if args.qmodel else f"{args.method}", "source": source, "float": fg,
             "int": qg}]
    for path in args.against or ():
        other = intq.load(_existing(path, "--against"), input_shapes=_input_shapes(args.input_shape))
        runs.append({"name": Path(path).name, "source": path, "float": fg, "int": other})
    if args.sweep and not args.calib:
        raise UsageError("--sweep quantizes MODEL again with other settings: give --calib DATA")
    base = _pipeline_options(args)
    for spec in args.sweep or ():
        r = pipeline.run(args.model, _existing(args.calib, "--calib"), None,
                         **{**base, **_sweep_options(spec), "progress": _progress(args, f"calibrating ({spec})")})
        _end_progress(args)
        runs.append({"name": spec, "source": f"{args.model} quantized ({spec})", "float": r.float_graph,
                     "int": r.graph})
    names = [r["name"] for r in runs]
    for run in runs:  # two files of one name (a.tflite, ../a.tflite): each by the path given
        if names.count(run["name"]) > 1:
            run["name"] = run["source"]
        run["mapped"] = bool(run["int"].metadata.get("float_tensor_of"))
        run["int"] = with_output_mapping(run["float"], run["int"])
    return runs


def cmd_compare(args) -> dict:
    from intq.analysis import compare

    _plan_outputs(args, {"--html": args.html}, {"MODEL": args.model, "QMODEL": args.qmodel, "--data": args.data,
                                                "--calib": args.calib, "--labels": args.labels})
    if args.html and not _extra_available("html"):  # refused before any model runs
        raise UsageError(f"--html {args.html}: the report's plots need matplotlib: pip install 'intq[html]'")
    labels = _labels(args)
    fg, qg, source, _ = _float_and_int(args)
    runs = _runs(args, fg, qg, source)
    for run in runs:
        run["report"] = compare(run["float"], run["int"], target=args.target, labels=labels, cluster=_cluster(args),
                                progress=_progress(args, f"comparing {run['name']}"), **_data_options(args, run["float"]))
        _end_progress(args)
    report, mapped = runs[0]["report"], runs[0]["mapped"]
    result = {"model": args.model, "qmodel": source, "target": args.target, "samples": report.samples,
              "tensors": len(report.rows), "per_tensor": mapped, **_accuracy_dict(report),
              "layers": [_row_dict(r) for r in report.rows]}
    _out(args, f"{args.model} (float) vs {source} (int8, target {args.target}): {len(report.rows)} tensors "
               f"on {report.samples} samples, worst first")
    if report.accuracy is not None:
        f, q = report.accuracy
        _out(args, f"  accuracy   float {f:.2%}   int8 {q:.2%}   ({100 * (q - f):+.2f} points, "
                   f"{report.labelled_rows} labelled rows)")
    if not mapped:
        _out(args, "  (QMODEL carries no float-tensor mapping, e.g. made by another converter: outputs only)")
    top = args.top or None
    _out(args, report.table(top))
    if top is not None and len(report.rows) > top:
        _out(args, f"... {len(report.rows) - top} more (--top 0 shows all, --json gives every row)")
    if len(runs) > 1:
        from intq.analysis.html_report import run_summary

        summaries = [run_summary(r["name"], r["report"], r["float"], r["int"]) for r in runs]
        result["runs"] = [x.as_dict() for x in summaries]
        _out(args, f"\n{len(runs)} runs on the same {report.samples} samples:")
        _out(args, _runs_table(summaries))
    sens = _sensitivity(args, fg, qg, mapped, report.samples) if args.sensitivity else None
    if sens is not None:
        result["sensitivity"] = {"all_int8_db": round(sens.all_int8_db, 2), "samples": sens.samples,
                                 "layers": [{"layer": r.layer, "op": r.op, "gain_db": round(r.gain_db, 2),
                                             "alone_float_db": round(r.alone_float_db, 2),
                                             "alone_int8_db": round(r.alone_int8_db, 2)} for r in sens.rows],
                                 "weight_only_bound_db": {k: round(v, 2) for k, v in (sens.weight_only_db or {}).items()},
                                 "hints": list(sens.hints)}
        _out(args, f"sensitivity, simulated on {sens.samples} of the {report.samples} samples:")
        _out(args, sens.table(top))
    if args.html:
        from intq.analysis.html_report import render_html

        args.outputs.stage(args.html, render_html(
            report, float_graph=fg, int_graph=qg, sensitivity=sens,
            title=f"{Path(args.model).name} vs {Path(source).name if args.qmodel else 'int8'}",
            runs=[(r["name"], r["report"], r["float"], r["int"]) for r in runs] if len(runs) > 1 else None,
            command=_command_line(), version=_version()))
        result["html"] = args.html
        _out(args, f"wrote {args.html}")
    return result


def _extra_available(extra: str) -> bool:
    from intq.extras import available

    return available(extra)


def _accuracy_dict(report) -> dict:
    if report.accuracy is None:
        return {}
    return {"float_accuracy": report.accuracy[0], "int_accuracy": report.accuracy[1],
            "labelled_rows": report.labelled_rows}


def _runs_table(summaries) -> str:
    """The runs side by side: output SQNR, top-1 agreement, accuracy, worst layer."""
    head = f"{'run':28s} {'output SQNR dB':>14s} {'top-1 agree':>11s} {'int8 acc':>9s}  worst layer"
    lines = [head, "-" * len(head)]
    for x in summaries:
        acc = f"{x.int_accuracy:.2%}" if x.int_accuracy is not None else "-"
        agree = f"{x.agreement:.2%}" if x.agreement is not None else "-"
        worst = f"{x.worst_db:.1f} dB {x.worst}" if x.worst else "-"
        lines.append(f"{x.name[:28]:28s} {x.output_db:14.2f} {agree:>11s} {acc:>9s}  {worst}")
    return "\n".join(lines)


def _command_line() -> str:
    """The command as the user typed it (for the report's header)."""
    import shlex

    return " ".join(shlex.quote(a) for a in ["intq", *sys.argv[1:]]) if sys.argv and sys.argv[0] else "intq"


# ------------------------------------------------------------------------------------ diff

def cmd_diff(args) -> dict:
    import intq
    from intq.analysis.diff import diff_targets

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if len(targets) != 2:
        raise UsageError(f"--targets {args.targets!r}: give two targets, e.g. --targets tflite,litert-ref")
    from intq.calibration import iter_batches

    g = _load(args)
    samples = iter_batches(_existing(args.data, "--data"), g, args.batch_size, _preprocess(args, g), limit=args.limit)
    if getattr(args, "against", None):
        return _diff_schemes(args, g, samples, targets[0])
    report = diff_targets(g, samples, targets)
    _out(args, f"{args.model}: target {report.targets[0]} vs {report.targets[1]} on {report.samples} samples")
    _out(args, report.table())
    causes = report.causes()
    if causes:
        _out(args, "differing elements of the origin tensors, by cause: "
                   + ", ".join(f"{k} {v}" for k, v in causes.most_common()))
        for t in report.differing:
            for ex in t.examples:
                acc = f", accumulator {ex['accumulator']}" if "accumulator" in ex else ""
                _out(args, f"  e.g. {t.name}{ex['index']}: {ex['values'][0]} vs {ex['values'][1]}{acc} -> {ex['cause']}")
    return {"model": args.model, **report.as_dict()}


def _diff_schemes(args, g, samples, target: str) -> dict:
    """``intq diff MODEL --against M_tpu.mlir``: intq's scheme (MODEL under ``target``) vs TPU-MLIR's."""
    import intq
    from intq.analysis.scheme_diff import diff_schemes

    tpu = intq.load(_existing(args.against, "--against"))
    report = diff_schemes(g, tpu, samples, intq_target=target)
    _out(args, f"{args.model} (target {target}) vs {args.against} (target tpu-mlir) on {report.samples} samples")
    _out(args, report.table())
    return {"model": args.model, "against": args.against, **report.as_dict()}


# ------------------------------------------------------------------------------------- run

def _read_inputs(path: str, graph) -> dict:
    from intq.calibration.data import read_arrays

    p = Path(_existing(path, "--input"))
    if p.suffix.lower() not in (".npy", ".npz") or not p.is_file():
        raise UsageError(f"--input {path}: expected a .npy or .npz file")
    if p.suffix.lower() == ".npy" and len(graph.inputs) != 1:
        raise UsageError(f"--input {path}: the model has inputs {list(graph.inputs)}; give an .npz with an "
                         "array per input name")
    arrays = read_arrays(p)  # headers checked first: a damaged or huge file is a clear error
    if p.suffix.lower() == ".npy":
        return {graph.inputs[0]: arrays}
    if len(arrays) == 1 and len(graph.inputs) == 1:
        arrays = {graph.inputs[0]: next(iter(arrays.values()))}
    return arrays


def cmd_run(args) -> dict:
    import numpy as np

    import intq
    from intq.analysis.evaluate import is_class_scores
    from intq.runtime.interpreter import InterpreterError

    out = _plan_outputs(args, {"-o": args.output}, {"MODEL": args.model, "--input": args.input}).get("-o")
    if out is not None and out.suffix.lower() not in (".npy", ".npz"):
        raise UsageError(f"-o {out}: give a .npy (one output) or .npz name; intq writes exactly the name given")
    g = _load(args)
    inputs = _read_inputs(args.input, g)
    _resolve_target(args, g)
    missing = [n for n in g.inputs if n not in inputs]
    if missing:
        raise UsageError(f"--input {args.input}: no array for model input(s) {missing} (it has {sorted(inputs)})")
    it = intq.Interpreter(g, target=args.target)
    t0 = time.perf_counter()
    try:
        outputs = it.run(inputs, keep=False)
    except InterpreterError as e:
        raise InterpreterError(f"{args.model} on {args.input}: {e}") from None
    seconds = time.perf_counter() - t0
    if out is not None:
        buf = io.BytesIO()  # np.save to a path would append a suffix to other names
        if out.suffix.lower() == ".npy":
            if len(outputs) != 1:
                raise UsageError(f"-o {out}: the model has {len(outputs)} outputs; write an .npz")
            np.save(buf, next(iter(outputs.values())), allow_pickle=False)
        else:
            np.savez(buf, **outputs)
        args.outputs.stage(out, buf.getvalue())
    result = {"model": args.model, "target": args.target, "seconds": round(seconds, 4),
              "outputs": {k: {"shape": list(v.shape), "dtype": v.dtype.name,
                              **({"values": v.tolist()} if v.size <= 64 else {}),
                              **({"argmax": v.reshape(-1, v.shape[-1]).argmax(-1).tolist()}
                                 if is_class_scores(v.shape) and v.size <= 1_000_000 else {})}
                          for k, v in outputs.items()}}
    _out(args, f"ran {args.model} (target {args.target}) in {seconds * 1000:.1f} ms")
    for k, v in outputs.items():
        line = f"  {k}: {v.dtype.name}{list(v.shape)}"
        if "argmax" in result["outputs"][k] and len(result["outputs"][k]["argmax"]) <= 16:
            line += f"  argmax {result['outputs'][k]['argmax']}"
        if v.size <= 16:
            line += f"  {np.array2string(v.ravel(), precision=4, separator=', ')}"
        _out(args, line)
    if out is not None:
        result["written"] = str(out)
        _out(args, f"  wrote {out}")
    return result


# ------------------------------------------------------------------------------------- main

# ----------------------------------------------------------------------------------- export C

def _parse_bytes(text: str) -> int:
    """``65536``, ``64k`` / ``64K`` (KiB), ``1m`` (MiB)."""
    t = text.strip().lower()
    scale = {"k": 1024, "m": 1024 * 1024}.get(t[-1:], 1)
    try:
        value = int(t[:-1] if scale > 1 else t) * scale
    except ValueError:
        raise UsageError(f"--arena-limit {text!r}: expected bytes, e.g. 65536 or 64k") from None
    if value <= 0:
        raise UsageError(f"--arena-limit {text!r}: must be positive")
    return value


def _c_report(r, qg, prefix: str, tflite_bytes: bytes | None = None) -> dict:
    """The report of a C export (:class:`intq.export.c.CExportResult`) the CLI prints and --json returns,
    with TFLite Micro's arena for the same graph when the tflite-micro package is installed."""
    report = {"source": str(r.source), "header": str(r.header), "arena_bytes": r.arena_bytes,
              "arena_lower_bound": r.arena_lower_bound, "constant_bytes": r.constant_bytes,
              "compiled_with": r.compiled_with, "steps": len(r.model.steps), "prefix": prefix,
              "check": r.check.as_dict() if r.check is not None else None}
    try:
        from intq.export.c.tflm_arena import tflm_arena
        from intq.export.tflite_writer import to_tflite_bytes

        t = tflm_arena(tflite_bytes or to_tflite_bytes(qg))
        report["tflm_arena"] = {"total": t.total, "head": t.head, "tail": t.tail}
    except (ImportError, IntqError):
        pass
    return report


def _c_summary(c: dict) -> str:
    lines = [f"  wrote {c['source']} and {c['header']}: {c['steps']} steps, "
             f"arena {c['arena_bytes']:,} bytes ({c['prefix'].upper()}_ARENA_BYTES), constants {c['constant_bytes']:,} bytes (flash)"]
    t = c.get("tflm_arena")
    if t:
        lines.append(f"  TFLite Micro on the same model: arena {t['total']:,} bytes ({t['head']:,} planned tensors "
                     f"+ {t['tail']:,} persistent); intq's C: {c['arena_bytes']:,} bytes, 0 persistent")
    lines.append(f"  compiled with {c['compiled_with']} (-std=c99 -Wall -Wextra -Werror -pedantic -Wvla)"
                 if c["compiled_with"] else "  no C compiler installed: the files were not compiled")
    return "\n".join(lines)


def cmd_export(args) -> dict:
    """``intq export MODEL --tflite OUT / --onnx OUT / --c DIR``: an integer model intq can load
    (``.tflite``, a quantized ``.onnx``, TPU-MLIR) written in each format asked for, each checked by
    output in its runtime before anything is written (:func:`intq.pipeline.export`)."""
    import intq
    from intq import pipeline
    from intq.onnx_format.schema import DEFAULT_OPSET

    model = Path(_existing(args.model, "MODEL"))
    if not (args.c or args.tflite or args.onnx):
        raise UsageError("say what to export to: --tflite FILE, --onnx FILE and/or --c DIR")
    if not args.onnx and (args.format or args.opset or args.activations != "int8" or args.portable is not None):
        raise UsageError("--format, --activations, --opset and --portable apply to --onnx")
    for flag, path, suffix in (("--tflite", args.tflite, ".tflite"), ("--onnx", args.onnx, ".onnx")):
        if path and Path(path).suffix.lower() != suffix:
            raise UsageError(f"{flag} {path}: give a {suffix} file name")
    planned = {"--tflite": args.tflite, "--onnx": args.onnx}
    if args.c:
        planned.update({"--c (source)": Path(args.c) / f"{args.prefix}.c", "--c (header)": Path(args.c) / f"{args.prefix}.h"})
    _plan_outputs(args, planned, {"MODEL": model})
    shapes = _input_shapes(args.input_shape)
    g = intq.load(str(model), input_shapes=shapes)
    bound = {n: tuple(1 if d is None else d for d in g.tensors[n].shape) for n in g.inputs
             if n not in shapes and not g.tensors[n].is_static and g.tensors[n].shape is not None}
    if bound:  # the writers need static shapes: a dynamic dimension becomes 1 unless --input-shape says otherwise
        g = intq.load(str(model), input_shapes={**shapes, **bound})
    if not any(t.qparams is not None for t in g.tensors.values()):
        raise UsageError(f"{model} is a float model; quantize it first (`intq quantize {model.name} --calib DATA "
                         "-o model.tflite`, .onnx or .c)")
    source_target = g.metadata.get("onnx_target")
    if source_target and (args.tflite or args.c):
        raise UsageError(f"{model} is a quantized ONNX model: its integer arithmetic is onnxruntime's (target "
                         f"{source_target}), which a .tflite or C file cannot carry; write it --onnx, or quantize the "
                         "float model with `intq quantize` for a .tflite / C file")
    check = "warn" if args.keep_unverified else True
    result: dict = {"model": str(model), "bound_input_shapes": {n: list(v) for n, v in bound.items()}, "exports": {}}
    for n, shape in bound.items():
        _out(args, f"input {n!r}: dynamic dimensions bound to 1: {list(shape)} (--input-shape to choose)")
    for fmt, path in (("tflite", args.tflite), ("onnx", args.onnx)):
        if not path:
            continue
        e = pipeline.export(g, path, format=fmt, onnx_format=args.format or "qdq", activations=args.activations,
                            opset=args.opset or DEFAULT_OPSET, check=check, outputs=args.outputs,
                            portable=args.portable if fmt == "onnx" else None)
        runs = e.check.messages() if e.check is not None else {}
        result["exports"][fmt] = {"path": str(path), "bytes": e.bytes, "runtimes": runs,
                                  "equal": e.check.equal if e.check is not None else None}
        _out(args, f"exported {model} -> {path} ({e.bytes:,} bytes)")
        _out(args, "  runs in: " + ("; ".join(f"{k} ({v})" for k, v in runs.items()) or "not checked"))
        if fmt == "onnx":
            result["exports"][fmt]["portable"] = pipeline._portable_dict(e.portable, e.portable_choice)
            _portable_lines(args, result["exports"][fmt]["portable"])
        _unverified(args, e.check)
    if args.c:
        out_dir = Path(args.c)
        limit = _parse_bytes(args.arena_limit) if args.arena_limit else None
        r = intq.export_c(g, out_dir, prefix=args.prefix, target=args.target, arena_limit=limit, overwrite=args.force,
                          check=check, outputs=args.outputs)
        c = _c_report(r, g, args.prefix, model.read_bytes() if model.suffix == ".tflite" else None)
        result.update(c)  # the C report's keys at the top level, as before
        result["exports"]["c"] = {"path": str(out_dir / f"{args.prefix}.c"), "equal": r.check.equal if r.check else None}
        _out(args, f"exported {model} -> C99 ({args.prefix}.c, {args.prefix}.h in {out_dir})")
        _out(args, _c_summary(c))
        if r.check is not None:
            _out(args, "  runs in: " + r.check.summary())
        _unverified(args, r.check)
    return result


def _portable_lines(args, pc: dict | None) -> None:
    """What a uint8 / --portable ONNX export did to the weights (pipeline's ``portable`` dict)."""
    if pc and not pc["enabled"]:
        _out(args, "  not portable (--no-portable): onnxruntime on an AVX2 CPU without VNNI can compute other "
                   "outputs than on VNNI / ARM64 CPUs (target ort-u8s8-avx2; `intq verify --target ort-u8s8-avx2`)")
    elif pc:
        why = ("by default for uint8 activations and int8 QDQ; --no-portable keeps them" if pc["chosen"] == "default"
               else "--portable")
        _out(args, f"  portable weights ({why}): {pc['channels_changed']} of {pc['channels']} output channels "
                   f"changed ({pc['channels_rescaled']} rescaled, {pc['channels_clipped']} with "
                   f"{pc['weights_clipped']} codes clipped) in {pc['nodes_changed']} of {pc['nodes']} nodes so that "
                   "no int16 pair sum can saturate on x86"
                   + (f"; weight SQNR worst {pc['worst_weight_sqnr_db']} dB ({pc['worst_node']}), mean "
                      f"{pc['mean_weight_sqnr_db']} dB" if pc["worst_node"] else ""))


def _unverified(args, check) -> None:
    if check is not None and not check.equal:  # --keep-unverified: written, but say so loudly
        _out(args, "  WARNING: written unverified (--keep-unverified): the runtime computes other outputs than intq "
                   "says; please report it with the model")


def _version() -> str:
    from intq.version import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="intq", description="Integer-only int8 inference: quantize, run "
                                     "bit-exactly, explain, export.", epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"intq {_version()}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print machine-readable JSON (with intq_version)")
    common.add_argument("-q", "--quiet", action="store_true",
                        help="print nothing but errors (no progress, no report, no warnings; --json still prints)")
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="say more: -v the library's info records (stages, times, checks skipped), -vv debug")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    common.add_argument("--max-tensor-size", type=_byte_size, metavar="SIZE",
                        help="the largest tensor intq may create, e.g. 8G (default 2G: a larger one is refused before "
                             "it is allocated)")
    common.add_argument("--threads", type=_nonnegative_int, metavar="N",
                        help="BLAS/OpenMP threads for intq's work (default 1, or $INTQ_THREADS; 0 leaves the "
                             "libraries' own setting)")

    d = sub.add_parser("demo", parents=[common], help="quantize the bundled digits CNN and check it",
                       description="Quantize the bundled digits CNN, measure float and int8 accuracy, name the "
                       "worst layers, write the .tflite and check LiteRT's reference kernels agree.",
                       epilog="examples:\n  intq demo\n  intq demo -o out/digits_int8.tflite --force\n"
                       "  intq demo --write-data demo/",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("-o", "--output", help=f"where to write the .tflite (default {DEMO_OUTPUT}; an existing one is "
                   "kept when identical, else the next free digits_int8-N.tflite is written)")
    d.add_argument("--force", action="store_true", help="overwrite an existing output file (-o, --write-data)")
    d.add_argument("--write-data", metavar="DIR", help="write the demo's model and data files (digits_cnn.onnx, "
                   "calib.npz, test.npz, test_labels.npy, x.npy: the README's examples) into DIR, and nothing else")
    d.set_defaults(func=cmd_demo)

    images = argparse.ArgumentParser(add_help=False)
    g = images.add_argument_group("image preprocessing (DATA given as a folder of images)")
    g.add_argument("--size", type=_positive_int, nargs=2, metavar=("H", "W"),
                   help="resize images to H W (default: the input's)")
    g.add_argument("--mean", type=_finite_float, nargs="+", help="per-channel mean of pixels in [0, 1] (default ImageNet's)")
    g.add_argument("--std", type=_positive_float, nargs="+", help="per-channel std, positive (default ImageNet's)")
    g.add_argument("--layout", choices=["NCHW", "NHWC"], help="image tensor layout (default NCHW)")
    shapes = argparse.ArgumentParser(add_help=False)
    shapes.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224",
                        help="bind a dynamic input shape (repeat per input)")
    shapes.add_argument("--input-value", action="append", metavar="NAME=VALUE",
                        help="fix an ONNX input to a value, e.g. a sample rate (repeat per input): it becomes a "
                             "constant and the If nodes it decides fold")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--target", default=None,
                        help="the runtime the integer graph must equal: tflite (TensorFlow Lite Micro, default), "
                             "litert-ref (LiteRT reference kernels), litert-opt (LiteRT optimized kernels), "
                             "xnnpack (LiteRT with XNNPACK), ort / ort-u8 (onnxruntime on this machine, on intq's int8 / "
                             "uint8 ONNX export; the default for a quantized .onnx), ort-u8-vnni / ort-u8s8-avx2 "
                             "(ort-u8 on a CPU with VNNI or ARM64 / on x86 AVX2 without VNNI: int16-saturating u8s8 "
                             "GEMM; ort-u8 resolves to one of them here); docs/engine.md lists what each emulates")
    calib = argparse.ArgumentParser(add_help=False)
    calib.add_argument("--method", default=DEFAULT_METHOD, choices=METHODS,
                       help=f"calibration method (default {DEFAULT_METHOD}: on every model of docs/accuracy.md as close "
                       "to float as TensorFlow's converter and onnxruntime's quantize_static, or closer)")
    calib.add_argument("--per-tensor", action="store_true", help="per-tensor weights (default per-channel)")
    calib.add_argument("--precision", action="append", metavar="LAYER=int16|float|FILE",
                       help="LAYER=int16: that node in int16 (16x8: Conv, Gemm, SiLU, Sigmoid, Concat, Split, data "
                       "movement; int8<->int16 QUANTIZE where types change); a Concat whose output reaches the "
                       "outputs through data movement brings that movement along (a detector's output concat); "
                       "LAYER may be a glob pattern of node names ('/model.22/cv3.*' = a class branch); "
                       "LAYER=float: a float island from that node to the "
                       "outputs (Sigmoid, Concat, Add/Sub/Mul/Div and data movement only: float builtins LiteRT's "
                       "reference kernels and TFLite Micro compute exactly as intq), e.g. a detector's class-score "
                       "sigmoid; or a table file (JSON, or NAME=int16 lines); repeatable")
    calib.add_argument("--bias-correction", action="store_true",
                       help="correct each layer's bias for its int8 weights' mean error (measured on the "
                       "calibration data; Nagel et al. 2019)")
    calib.add_argument("--adaround", action="store_true",
                       help="AdaRound: round each weight up or down to minimise its layer's output error on the "
                       "calibration data (Nagel et al. 2020)")
    calib.add_argument("--micro", action="store_true",
                       help="write the builtins TensorFlow Lite Micro has no kernel for in forms it runs, bit-identical "
                       "(int8 GELU as QUANTIZE + CAST + GATHER of its table): the .tflite then runs in TFLite Micro "
                       "as well as LiteRT")
    calib.add_argument("--equalize", action="store_true",
                       help="cross-layer equalization of consecutive layers' weight ranges before calibration "
                       "(Nagel et al. 2019)")
    calib.add_argument("--smooth", type=float, nargs="?", const=0.5, metavar="ALPHA",
                       help="SmoothQuant: before calibration, divide the outlier channels of activations read by "
                       "linear layers (LayerNorm outputs feeding Q/K/V and FFN) by s_j = max|X_j|^ALPHA / "
                       "max|W_j|^(1-ALPHA), folded into the producer's gamma/beta, and multiply the weights by it "
                       "(the same function in float; ALPHA in [0, 1], default 0.5; Xiao et al. 2022)")
    calib.add_argument("--target-sqnr", type=float, metavar="DB",
                       help="put range-mismatched joins in int16, then if needed small float islands at the "
                       "outputs, then an int16 region grown backwards from the outputs layer by layer, until the "
                       "output SQNR on 8 calibration samples reaches DB (the fewest that do; the best reached if "
                       "none does; then a note per output below DB gives the best found and the SQNR int8 weights "
                       "alone allow with every activation in float, which no activation precision exceeds)")

    scale = argparse.ArgumentParser(add_help=False)
    scale.add_argument("--cluster", metavar="ADDRESS",
                       help="run on a Ray cluster (pip install 'intq[ray]'): its head's HOST:PORT (`ray start --head` "
                       "prints it), ray://HOST:PORT or auto; the data is read here and streamed in shards to workers "
                       "holding the models; the results equal a local run's, bit for bit (docs/scale.md)")
    scale.add_argument("--workers", type=_positive_int, metavar="N",
                       help="workers to use (default: the cluster's CPUs); without --cluster, a private Ray instance "
                       "with N workers on this machine")

    batching = argparse.ArgumentParser(add_help=False)
    batching.add_argument("--batch-size", type=_positive_int, default=_DEFAULT_BATCH_SIZE, metavar="N",
                          help=f"samples run together (default {_DEFAULT_BATCH_SIZE}; results do not depend on it)")

    q = sub.add_parser("quantize", parents=[common, shapes, calib, images, batching, scale],
                       help="calibrate and convert a model to an int8 .tflite",
                       description="Load MODEL, calibrate it on DATA (progress with samples/s and ETA), convert it "
                       "to an integer-only int8 graph, write the .tflite (and the calibration table), and check the "
                       "layers' SQNR on the first calibration samples.",
                       epilog="examples:\n  intq quantize model.onnx --calib images/ --size 224 224 -o model_int8.tflite\n"
                       "  intq quantize model.onnx --calib calib.npz --method percentile --calib-table ranges.json "
                       "-o model_int8.tflite",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("model", help="the float model (.onnx)")
    q.add_argument("--calib", required=True, metavar="DATA",
                   help="calibration data: a folder of images / .npy / .npz, or one .npz")
    q.add_argument("-o", "--output", required=True,
                   help="the model to write: .tflite, .onnx (QDQ by default; see --format), or model.c "
                        "(C99 source + header)")
    q.add_argument("--format", choices=["qdq", "qoperator"],
                   help="ONNX encoding for an .onnx output: qdq (DequantizeLinear -> op -> QuantizeLinear, default) "
                        "or qoperator (QLinearConv, QGemm, QLinearAdd, ...)")
    q.add_argument("--activations", choices=["int8", "uint8"], default="int8",
                   help="ONNX activation dtype (default int8: target ort; uint8: target ort-u8)")
    q.add_argument("--opset", type=int, help="ONNX opset to write (default 21; 13 or more)")
    q.add_argument("--portable", action=argparse.BooleanOptionalAction, default=None,
                   help="ONNX: bound the weights so that no int16 pair sum of onnxruntime's x86 kernels can saturate: "
                        "the file computes the same on AVX2 CPUs without VNNI as on VNNI and ARM64 ones (only MLAS's "
                        "pairs over the bound change, each channel clipped or rescaled, whichever costs less; the "
                        "cost is reported). Default: on with --activations uint8 and for int8 QDQ (onnxruntime rewrites it to "
                        "uint8 on x86 CPUs without VNNI), off for int8 QOperator (exact S8S8 kernels); --no-portable "
                        "keeps the weights as quantized")
    q.add_argument("--calib-table", help="also write the calibration table (JSON)")
    q.add_argument("--check-samples", type=_nonnegative_int, default=8, metavar="N",
                   help="compare float and int8 layer by layer on the first N calibration samples (0: skip)")
    q.add_argument("--force", action="store_true", help="overwrite existing output files")
    q.add_argument("--keep-unverified", action="store_true",
                   help="write the model even when its runtime computes other outputs than intq's target on the "
                   "check samples, or when its overflow certificate (`intq verify`) names an intermediate that can "
                   "overflow on the target (reported as a warning; default: an error, nothing written)")
    q.add_argument("--arena-limit", metavar="BYTES", help="with -o model.c: refuse a plan whose arena exceeds BYTES "
                   "(e.g. 64k)")
    q.set_defaults(func=cmd_quantize)

    i = sub.add_parser("inspect", parents=[common, shapes, target],
                       help="show a model's operators, tensors, quantization, multipliers and shifts",
                       epilog="examples:\n  intq inspect model.onnx --input-shape input=1x3x224x224\n"
                       "  intq inspect model_int8.tflite --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("model", help="an .onnx or .tflite model")
    i.set_defaults(func=cmd_inspect)

    pair = argparse.ArgumentParser(add_help=False)
    pair.add_argument("model", help="the float model (.onnx)")
    pair.add_argument("qmodel", nargs="?", help="its integer model (.tflite); omitted: quantize MODEL with --calib")
    pair.add_argument("--data", required=True, help="a folder of images / .npy / .npz, or one .npz")
    pair.add_argument("--calib", metavar="DATA", help="calibration data, when QMODEL is not given")
    pair.add_argument("--limit", type=_positive_int, metavar="N", help="use only the first N samples of --data")

    e = sub.add_parser("eval", parents=[common, pair, shapes, target, calib, images, batching, scale],
                       help="float vs int8: accuracy, top-1 agreement, output SQNR",
                       description="Run the float and the integer model on DATA: accuracy of each when labels are "
                       "given, top-1 agreement, SQNR and max error of every output.",
                       epilog="examples:\n  intq eval model.onnx model_int8.tflite --data val.npz --labels labels.npy\n"
                       "  intq eval model.onnx --calib calib.npz --data val.npz --labels labels.txt",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("--labels", help="integer class per sample: .npy, or text with one integer per line")
    e.set_defaults(func=cmd_eval)

    c = sub.add_parser("compare", parents=[common, pair, shapes, target, calib, images, batching, scale],
                       help="per-tensor float vs int8 analysis, worst layers first (and an HTML report)",
                       description="For every tensor of the integer model against its float counterpart: SQNR, "
                       "cosine, error in LSB, saturation, codes used; ranked worst first with a hint per symptom.",
                       epilog="examples:\n  intq compare model.onnx model_int8.tflite --data val.npz --labels val_labels.npy "
                       "--html report.html\n"
                       "  intq compare model.onnx --calib calib.npz --data val.npz --top 0 --json\n"
                       "  intq compare model.onnx model_int8.tflite --against tf_int8.tflite --data val.npz --html runs.html\n"
                       "  intq compare model.onnx --calib calib.npz --data val.npz --sweep minmax --sweep percentile "
                       "--html sweep.html",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--html", help="write a self-contained HTML report (plots embedded; the plots need "
                   "pip install 'intq[html]')")
    c.add_argument("--labels", help="integer class per sample (.npy, or text with one integer per line): each "
                   "model's top-1 accuracy")
    c.add_argument("--against", action="append", metavar="QMODEL2",
                   help="another integer model of MODEL to compare side by side (repeatable: a .tflite from "
                   "TensorFlow's converter, another intq run...): one table, one SQNR chart")
    c.add_argument("--sweep", action="append", metavar="SETTINGS",
                   help="quantize MODEL again (with --calib) with other settings and compare side by side "
                   "(repeatable): a method (minmax, mse, percentile, entropy, auto, ema), per-tensor, "
                   "bias-correction, adaround, equalize, target-sqnr=DB, int16=LAYER, float=LAYER, joined with +, "
                   "e.g. --sweep minmax --sweep percentile+per-tensor")
    c.add_argument("--sensitivity", type=_positive_int, nargs="?", const=_ALL_SAMPLES, metavar="N",
                   help="rank the layers by how much keeping each out of int8 gains (simulated on the samples "
                   "compared, or the first N: 2 x (layers + 1) + 2 float runs per sample; needs an integer graph "
                   "intq made)")
    c.add_argument("--top", type=_nonnegative_int, default=15, help="show the N worst tensors (0: all; default 15)")
    c.add_argument("--force", action="store_true", help="overwrite an existing report")
    c.set_defaults(func=cmd_compare)

    df = sub.add_parser("diff", parents=[common, shapes, images, batching], help="where and why two runtimes differ on a model",
                        description="Run an integer model under two targets (each bit-exact to a real runtime) on "
                        "DATA, report every tensor that differs, the first divergence, and the cause of each "
                        "differing element (tie, double vs single rounding, float32 precision, saturation, "
                        "multiplier).",
                        epilog="examples:\n  intq diff model_int8.tflite --targets tflite,litert-ref --data inputs.npz\n"
                        "  intq diff model_int8.tflite --targets tflite,litert-ref --data images/ --size 96 96 --json",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    df.add_argument("model", help="an integer model (.tflite)")
    df.add_argument("--targets", default="tflite,litert-ref", help="two targets, comma-separated: tflite, "
                    "litert-ref, litert-opt, xnnpack (default tflite,litert-ref: TensorFlow Lite Micro vs LiteRT's "
                    "reference kernels)")
    df.add_argument("--data", required=True, help="a folder of images / .npy / .npz, or one .npz")
    df.add_argument("--limit", type=_positive_int, metavar="N", help="use only the first N samples")
    df.add_argument("--against", metavar="TPU_MLIR", help="compare MODEL (intq's int8, target tflite) with TPU-MLIR's "
                    "int8 model of the same network (a *_tpu.mlir, target tpu-mlir): each tensor's parameters, "
                    "differing elements and why (uint8 after ReLU, threshold vs min/max, rounding, multiplier width)")
    df.set_defaults(func=cmd_diff)

    r = sub.add_parser("run", parents=[common, shapes, target], help="run a model on an input file",
                       description="Run an integer (.tflite) or float (.onnx) model bit-exactly as the target "
                       "runtime on the arrays of an .npy (one input) or .npz (an array per input name).",
                       epilog="examples:\n  intq run model_int8.tflite --input x.npy -o y.npy\n"
                       "  intq run model_int8.tflite --input inputs.npz --target litert-ref --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("model", help="a .tflite or .onnx model")
    r.add_argument("--input", required=True, help="an .npy (single-input models) or .npz (array per input)")
    r.add_argument("-o", "--output", help="write the outputs: .npy (one output) or .npz")
    r.add_argument("--force", action="store_true", help="overwrite an existing output file")
    r.set_defaults(func=cmd_run)

    x = sub.add_parser("export", parents=[common, shapes],
                       help="write an integer model as .tflite, ONNX or C99",
                       description="Write an integer model intq can load (.tflite, a quantized .onnx, TPU-MLIR) as "
                       ".tflite (--tflite), ONNX (--onnx: QDQ or QOperator, int8 or uint8 activations) and/or C99 "
                       "(--c: PREFIX.c and PREFIX.h with int PREFIX_invoke(in..., out..., arena), weights and "
                       "multipliers const, one caller-provided arena of PREFIX_ARENA_BYTES, no dynamic allocation, no "
                       "floating point in the inference path; bit-exact with TensorFlow Lite Micro). Each file is run "
                       "in its runtime (LiteRT / TFLite Micro, onnxruntime, the C compiler) and compared with intq by "
                       "output before anything is written. A float model is quantized with `intq quantize`.",
                       epilog="examples:\n  intq export model_int8.tflite --onnx model_int8.onnx\n"
                       "  intq export model_int8.onnx --tflite model_int8.tflite\n"
                       "  intq export model_int8.tflite --c out/\n"
                       "  intq export model_int8.tflite --c out/ --prefix kws --arena-limit 64k",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    x.add_argument("model", help="an integer model (.tflite, quantized .onnx, TPU-MLIR .mlir)")
    x.add_argument("--tflite", metavar="FILE", help="write a .tflite")
    x.add_argument("--onnx", metavar="FILE", help="write an ONNX model (see --format, --activations, --opset)")
    x.add_argument("--format", choices=["qdq", "qoperator"], help="the ONNX encoding (default qdq)")
    x.add_argument("--activations", choices=["int8", "uint8"], default="int8",
                   help="ONNX activation dtype (default int8: target ort; uint8: target ort-u8)")
    x.add_argument("--opset", type=int, help="ONNX opset to write (default 21; 13 or more)")
    x.add_argument("--portable", action=argparse.BooleanOptionalAction, default=None,
                   help="--onnx: weights bounded so that no int16 pair sum of onnxruntime's x86 kernels can saturate "
                        "(as intq quantize --portable). Default: on with --activations uint8 and for int8 QDQ, off for int8 "
                        "QOperator")
    x.add_argument("--c", metavar="DIR", help="write PREFIX.c and PREFIX.h (C99) into DIR")
    x.add_argument("--prefix", default="model", help="the C names' prefix and the files' stem (default model)")
    x.add_argument("--arena-limit", metavar="BYTES", help="refuse a plan whose arena exceeds BYTES (e.g. 64k)")
    x.add_argument("--force", action="store_true", help="overwrite existing files")
    x.add_argument("--keep-unverified", action="store_true",
                   help="write the files even when the compiled code computes other outputs than intq's target on "
                   "the check inputs (reported as a warning; default: an error, nothing written)")
    x.add_argument("--target", default="tflite", choices=("tflite", "litert-ref"),
                   help="the runtime the C equals bit for bit: tflite (TensorFlow Lite Micro, default) or "
                   "litert-ref (LiteRT's reference kernels)")
    x.set_defaults(func=cmd_export)

    v = sub.add_parser("verify", parents=[common, shapes, target],
                       help="certify that no integer intermediate can overflow on the target",
                       description="A static overflow and saturation certificate of an integer model: every "
                       "accumulator, requantization shift and product, ADD's left shift, pooling / reduction / "
                       "softmax sum and the target's ISA intermediates (x86 vpmaddubsw int16 pairs on "
                       "ort-u8s8-avx2, Cortex-M SMLAD on tflite, TPU-MLIR's int16 Add) bounded from the integer "
                       "ranges (no data), each with its margin in bits; exit 1 when one can overflow.",
                       epilog="examples:\n  intq verify model_int8.tflite\n"
                       "  intq verify model_u8.onnx --target ort-u8s8-avx2 --html cert.html --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("model", help="an integer model (.tflite, or a quantized .onnx)")
    v.add_argument("--html", help="also write the certificate as a self-contained HTML page")
    v.add_argument("--force", action="store_true", help="overwrite an existing HTML file")
    v.set_defaults(func=cmd_verify)
    return parser


def main(argv=None) -> int:
    """Parse the arguments and run the command; return the exit code (the module docstring)."""
    args = None
    try:
        with _signals_as_interrupts():  # first: a Ctrl-C or SIGTERM from here on is cleaned up
            try:
                parser = build_parser()
                try:
                    args = parser.parse_args(argv)
                except SystemExit as e:  # argparse: --help (0) or a usage error (2)
                    return int(e.code or 0)
                if not getattr(args, "command", None):
                    parser.print_help()
                    return EXIT_USAGE
                return _execute(args)
            except (KeyboardInterrupt, Interrupted) as e:  # outside the command's own handler (parsing, reporting)
                return _interrupted("intq", e, getattr(args, "outputs", None))
    except KeyboardInterrupt as e:  # a Ctrl-C another thread received, run by Python once the handlers were
        # restored (fuzz campaign seed 2026 case 7280: it escaped main as a raw traceback)
        return _interrupted("intq", e, getattr(args, "outputs", None))


def _interrupted(name: str, e: BaseException, outputs) -> int:
    """Ctrl-C / SIGTERM: discard what is staged, say what (if anything) was already written. ``e`` may
    be what the interruption became inside a library (below)."""
    committed = []
    if outputs is not None:
        outputs.discard()
        committed = outputs.committed
    if committed:
        print(f"{name}: interrupted after writing {', '.join(map(str, committed))}", file=sys.stderr)
    else:
        print(f"{name}: interrupted, nothing written", file=sys.stderr)
    received = _RECEIVED[-1] if _RECEIVED else None
    return 128 + (signal.SIGTERM if isinstance(e, Interrupted) or received == signal.SIGTERM else signal.SIGINT)


def _execute(args) -> int:
    """The one top-level handler: run the command, commit its staged outputs when it succeeded,
    and turn every way it can end into one readable paragraph and an exit code. Ctrl-C (and
    SIGTERM) discard the staged outputs: "interrupted, nothing written"."""
    import numpy  # noqa: F401 (loaded before the thread pools are sized: its BLAS is one of them)

    from intq.files import StagedOutputs
    from intq.limits import max_tensor_bytes_set
    from intq.threads import limited, set_threads

    from intq.console import level_of, logging_to_stderr

    name = f"intq {args.command}"
    args.outputs = StagedOutputs(overwrite=getattr(args, "force", False))
    try:
        try:
            if getattr(args, "threads", None) is not None:
                set_threads(args.threads)
            with max_tensor_bytes_set(getattr(args, "max_tensor_size", None)), limited(), \
                    logging_to_stderr(name, level_of(getattr(args, "quiet", False), getattr(args, "verbose", 0))):
                result = args.func(args)
                if _RECEIVED:  # the handler's exception was swallowed (raised inside a weakref callback or a
                    # __del__, where Python prints and ignores it; fuzz CI sample seed 17 case 369): honour it
                    raise Interrupted() if _RECEIVED[-1] == signal.SIGTERM else KeyboardInterrupt()
                args.outputs.commit()
        except (KeyboardInterrupt, Interrupted) as e:
            return _interrupted(name, e, args.outputs)
        except BaseException as e:
            if _RECEIVED:  # a Ctrl-C that landed inside a library became its error ("ImportError: initialization
                return _interrupted(name, e, args.outputs)  # failed" for an import): the user's, not intq's bug
            code = _failure(name, args, e)
            if code is None:
                raise
            return code
        finally:
            args.outputs.discard()
            if getattr(args, "cluster_connection", None) is not None:
                args.cluster_connection.close()
        try:
            if getattr(args, "json", False):
                print(json.dumps({"intq_version": _version(), "command": args.command, **result}, indent=1,
                                 default=str))
            sys.stdout.flush()
        except BrokenPipeError:  # `intq ... | head`: the reader left; not an error of ours
            sys.stdout = open(os.devnull, "w")
        return getattr(args, "exit_code", EXIT_OK)  # a command may end in EXIT_FAILURE after reporting (verify)
    except (KeyboardInterrupt, Interrupted) as e:  # while reporting (after the commit)
        return _interrupted(name, e, args.outputs)


def _failure(name: str, args, e: BaseException) -> int | None:
    """Print how the command failed, in one paragraph; its exit code (None: not ours to handle)."""
    from intq.files import OutputPathError

    if isinstance(e, (UsageError, OutputPathError)):
        print(f"{name}: {e}", file=sys.stderr)
        return EXIT_USAGE
    if not isinstance(e, Exception):
        return None
    if args.debug:
        traceback.print_exc()
    if isinstance(e, IntqError):  # a problem with the model, the data or the request
        text = e.cli_message() if hasattr(e, "cli_message") else str(e)  # the fix as an option
        print(f"{name}: {type(e).__name__}: {text}", file=sys.stderr)
        return EXIT_FAILURE
    if isinstance(e, OSError):  # the file system said no: a full disk, a permission, a vanished file
        where = f"{e.filename}: " if e.filename else ""
        print(f"{name}: {where}{e.strerror or e}; nothing was written", file=sys.stderr)
        return EXIT_FAILURE
    print(f"{name}: internal error: {type(e).__name__}: {e}\nThis is a bug in intq; nothing was written. Run again "
          "with --debug for the traceback and please report it.", file=sys.stderr)  # never a raw traceback
    return EXIT_INTERNAL


#: The interrupting signals received since main started (the handlers below record them).
_RECEIVED: list[int] = []


@contextlib.contextmanager
def _signals_as_interrupts():
    """Inside the block, Ctrl-C raises KeyboardInterrupt and SIGTERM :class:`Interrupted` (both cleaned
    up by the handler), each recorded in :data:`_RECEIVED` so that an interruption a library turned
    into another exception is still recognised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from intq.files import defer_interrupt

    def interrupt(signum, frame):
        _RECEIVED.append(signum)
        exc = Interrupted() if signum == signal.SIGTERM else KeyboardInterrupt()
        if not defer_interrupt(exc):  # inside a file section: raised when it ends (intq.files)
            raise exc

    previous_hook = sys.unraisablehook

    def unraisable(u):
        # the handler ran inside a weakref callback or a __del__: Python ignores the exception there and
        # would print its traceback; the signal is in _RECEIVED and _execute honours it
        if u.exc_type is not None and issubclass(u.exc_type, (KeyboardInterrupt, Interrupted)):
            return
        previous_hook(u)

    _RECEIVED.clear()
    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        for sig, handler in old.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
