"""The ``intq`` command.

    intq demo [-o OUT.tflite] [--force] [--json]
    intq quantize MODEL.onnx --calib DATA -o OUT.tflite [--input-shape name=1x3x224x224]
                  [--method minmax|ema|percentile|mse|entropy] [--per-tensor] [--calib-table ranges.json]
                  [--size H W] [--mean ...] [--std ...] [--layout NCHW|NHWC] [--force] [--json]
    intq inspect MODEL.onnx [--input-shape ...] [--json]

Exit codes: 0 ok, 1 failure (the error is one readable paragraph; ``--debug`` shows the
traceback), 2 usage. Existing output files are never overwritten without ``--force``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from importlib import resources
from pathlib import Path

import numpy as np

EXAMPLES = """examples:
  intq demo
  intq quantize model.onnx --calib images/ --size 224 224 --input-shape input=1x3x224x224 -o model_int8.tflite
  intq quantize model.onnx --calib calib.npz --method percentile --calib-table ranges.json -o model_int8.tflite
  intq inspect model.onnx --input-shape input=1x3x224x224
"""


class UsageError(Exception):
    """Bad command-line arguments (exit code 2)."""


def _out(args, text: str) -> None:
    if not args.json:
        print(text)


def _progress(args, label: str):
    if args.json or not sys.stderr.isatty():
        return None

    def show(p):
        eta = f", ETA {p.eta:.0f} s" if p.eta is not None else ""
        total = f"/{p.total}" if p.total else ""
        print(f"\r{label}: {p.samples}{total} samples, {p.rate:.1f}/s{eta}   ", end="", file=sys.stderr, flush=True)

    return show


def _check_output(path: Path, force: bool) -> None:
    if path.exists() and not force:
        raise UsageError(f"{path} exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)


def _input_shapes(specs) -> dict:
    shapes = {}
    for spec in specs or []:
        name, _, dims = spec.partition("=")
        try:
            shapes[name] = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            raise UsageError(f"--input-shape {spec!r}: expected name=1x3x224x224") from None
        if not name or not shapes[name]:
            raise UsageError(f"--input-shape {spec!r}: expected name=1x3x224x224")
    return shapes


# ------------------------------------------------------------------------------------- demo

def cmd_demo(args) -> dict:
    """Quantize the bundled digits CNN, measure it, export it, check LiteRT agrees."""
    import intq
    from intq.analysis import compare
    from intq.export.litert_oracle import run_litert
    from intq.passes import simplify
    from intq.testing.digits import load_split

    out = Path(args.output)
    _check_output(out, args.force)
    t0 = time.perf_counter()
    model = resources.files("intq") / "data" / "digits_cnn.onnx"
    (x_train, _), (x_test, y_test) = load_split()
    fg = simplify(intq.load(str(model), input_shapes={"image": (1, 1, 8, 8)}))
    calib = [x[None] for x in x_train[:200]]
    table = intq.calibrate(fg, calib, "minmax", progress=_progress(args, "calibrating"))
    if not args.json and sys.stderr.isatty():
        print(file=sys.stderr)
    qg = intq.quantize(fg, table=table)
    t_quant = time.perf_counter() - t0

    fi, qi = intq.Interpreter(fg), intq.Interpreter(qg)
    fpred = np.array([fi.run({"image": x[None]})["logits"].argmax() for x in x_test])
    qpred = np.array([qi.run({"image": x[None]})["logits"].argmax() for x in x_test])
    report = compare(fg, qg, [{"image": x[None]} for x in x_test[:100]])
    data = intq.export_tflite(qg, out, overwrite=args.force)

    lite = intq.Interpreter(qg, target="litert-ref")
    equal = 0
    for x in x_test:
        mine = lite.run({"image": x[None]})["logits"]
        theirs = run_litert(data, [x[None]], preserve_all_tensors=False)["outputs"][0]
        equal += int(np.array_equal(mine, theirs))
    result = {
        "model": "digits CNN (bundled), 1x1x8x8, trained on scikit-learn digits",
        "calibration_samples": len(calib),
        "held_out_samples": int(len(y_test)),
        "float_accuracy": float(np.mean(fpred == y_test)),
        "int8_accuracy": float(np.mean(qpred == y_test)),
        "top1_agreement": float(np.mean(fpred == qpred)),
        "worst_layers": [{"tensor": r.name, "op": r.op, "sqnr_db": round(r.sqnr_db, 2), "hint": r.hint}
                         for r in report.worst(3)],
        "tflite": str(out),
        "tflite_bytes": len(data),
        "litert_reference_identical": f"{equal}/{len(x_test)}",
        "seconds": round(time.perf_counter() - t0, 2),
    }
    _out(args, f"""intq demo: the bundled digits CNN, quantized to int8 and checked
  calibrated on {len(calib)} training digits, converted in {t_quant:.2f} s
  float accuracy  {result['float_accuracy']:.2%} on {len(y_test)} held-out digits
  int8 accuracy   {result['int8_accuracy']:.2%}  (top-1 agreement with float {result['top1_agreement']:.2%})
  worst layers (SQNR vs float):""")
    for r in report.worst(3):
        _out(args, f"    {r.sqnr_db:6.1f} dB  {r.op:16s} {r.name}" + (f"  -- {r.hint}" if r.hint else ""))
    _out(args, f"""  wrote {out} ({len(data)} bytes)
  LiteRT reference kernels on that file give outputs identical to intq's (target litert-ref): {equal}/{len(x_test)} digits
  total {result['seconds']:.1f} s""")
    if equal != len(x_test):
        raise RuntimeError(f"LiteRT's outputs differ from intq's on {len(x_test) - equal} digits")
    return result


# --------------------------------------------------------------------------------- quantize

def _calibration_data(args, graph):
    from intq.calibration import ImagePreprocess

    pre = None
    if args.size or args.mean or args.std or args.layout:
        shape = graph.tensors[graph.inputs[0]].shape
        h, w = args.size or ((shape[2], shape[3]) if (args.layout or "NCHW") == "NCHW" else (shape[1], shape[2]))
        kw = {"height": h, "width": w, "layout": args.layout or "NCHW"}
        if args.mean:
            kw["mean"] = tuple(args.mean)
        if args.std:
            kw["std"] = tuple(args.std)
        pre = ImagePreprocess(**kw)
    return args.calib, pre


def cmd_quantize(args) -> dict:
    import intq
    from intq.calibration import CalibrationTable
    from intq.passes import simplify

    out = Path(args.output)
    _check_output(out, args.force)
    if args.calib_table:
        _check_output(Path(args.calib_table), args.force)
    t0 = time.perf_counter()
    fg = simplify(intq.load(args.model, input_shapes=_input_shapes(args.input_shape)))
    t_load = time.perf_counter() - t0
    data, pre = _calibration_data(args, fg)
    if not Path(data).exists():
        raise UsageError(f"--calib {data}: no such file or folder")
    table = intq.calibrate(fg, data, args.method, preprocess=pre, progress=_progress(args, "calibrating"))
    if not args.json and sys.stderr.isatty():
        print(file=sys.stderr)
    t_cal = time.perf_counter() - t0 - t_load
    qg = intq.quantize(fg, table=table, per_channel=not args.per_tensor)
    blob = intq.export_tflite(qg, out, overwrite=args.force)
    if args.calib_table:
        CalibrationTable.save(table, args.calib_table, overwrite=args.force)
    params = int(sum(t.data.size for t in qg.tensors.values() if t.data is not None))
    result = {"model": args.model, "output": str(out), "bytes": len(blob), "ops": qg.op_types(), "parameters": params,
              "calibration": {"method": args.method, "samples": table.num_samples},
              "seconds": {"load": round(t_load, 2), "calibrate": round(t_cal, 2),
                          "total": round(time.perf_counter() - t0, 2)},
              "notes": list(qg.metadata.get("conversion_notes", ()))}
    _out(args, f"quantized {args.model} -> {out} ({len(blob)} bytes, {params} parameters)")
    _out(args, "  ops: " + ", ".join(f"{k}x{v}" for k, v in qg.op_types().items()))
    _out(args, f"  calibration: {args.method} on {table.num_samples} samples ({t_cal:.1f} s)")
    for note in result["notes"]:
        _out(args, f"  note: {note}")
    return result


# ---------------------------------------------------------------------------------- inspect

def cmd_inspect(args) -> dict:
    import intq

    g = intq.load(args.model, input_shapes=_input_shapes(args.input_shape))
    _out(args, g.summary(max_nodes=None))
    return {"model": args.model, "nodes": len(g.nodes), "ops": g.op_types(),
            "inputs": {n: list(g.tensors[n].shape) for n in g.inputs},
            "outputs": {n: None if g.tensors[n].shape is None else list(g.tensors[n].shape) for n in g.outputs}}


# ------------------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="intq", description="Integer-only int8 inference: quantize, run "
                                     "bit-exactly, explain, export.", epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print machine-readable JSON")

    d = sub.add_parser("demo", parents=[common], help="quantize the bundled digits CNN and check it",
                       description="Quantize the bundled digits CNN, measure float and int8 accuracy, name the "
                       "worst layers, write the .tflite and check LiteRT's reference kernels agree.",
                       epilog="example:\n  intq demo -o out/digits_int8.tflite --force",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("-o", "--output", default="digits_int8.tflite", help="where to write the .tflite")
    d.add_argument("--force", action="store_true", help="overwrite an existing output file")
    d.set_defaults(func=cmd_demo)

    q = sub.add_parser("quantize", parents=[common], help="calibrate and convert a model to an int8 .tflite",
                       epilog="example:\n  intq quantize model.onnx --calib images/ --size 224 224 -o model_int8.tflite",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("model", help="an .onnx model")
    q.add_argument("--calib", required=True, help="calibration data: a folder of images / .npy / .npz, or one .npz")
    q.add_argument("-o", "--output", required=True, help="the .tflite to write")
    q.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224", help="bind a dynamic input shape")
    q.add_argument("--method", default="minmax", choices=["minmax", "ema", "percentile", "mse", "entropy"])
    q.add_argument("--per-tensor", action="store_true", help="per-tensor weights (default per-channel)")
    q.add_argument("--calib-table", help="also write the calibration table (JSON)")
    q.add_argument("--size", type=int, nargs=2, metavar=("H", "W"), help="resize images to H W")
    q.add_argument("--mean", type=float, nargs="+", help="per-channel mean (of pixels in [0, 1]); default ImageNet's")
    q.add_argument("--std", type=float, nargs="+", help="per-channel std; default ImageNet's")
    q.add_argument("--layout", choices=["NCHW", "NHWC"], help="image tensor layout (default NCHW)")
    q.add_argument("--force", action="store_true", help="overwrite existing output files")
    q.set_defaults(func=cmd_quantize)

    i = sub.add_parser("inspect", parents=[common], help="show a model's operators and tensors",
                       epilog="example:\n  intq inspect model.onnx --input-shape input=1x3x224x224",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("model", help="an .onnx model")
    i.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224", help="bind a dynamic input shape")
    i.set_defaults(func=cmd_inspect)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        result = args.func(args)
    except UsageError as e:
        print(f"intq {args.command}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # one readable paragraph, the traceback only with --debug
        if args.debug:
            traceback.print_exc()
        print(f"intq {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
