"""How often intq's ``ort`` SOFTMAX differs from onnxruntime's QLinearSoftmax on random rows.

    python tools/probe_ort_softmax.py [--trials 60] [--rows 2000] [--seed 0]

Per trial: a random depth D in [1, 39], input scale and zero point (the output's are TFLite's
fixed 1/256 and -128, which intq's SOFTMAX requires); ``rows`` random int8 rows run by one QLinearSoftmax (opset-13 form, last axis; one thread)
and by intq's target ``ort`` (a single SOFTMAX graph). Prints the elements that differ among those
whose emulated value lies in the int8 range (onnxruntime 1.32 wraps, not clamps, int8 values above
127: out-of-range elements are counted apart). docs/engine.md quotes the result.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import intq  # noqa: E402
from intq.ir import Graph, Node, Tensor  # noqa: E402
from intq.qmath import QuantParams  # noqa: E402
from intq.runtime.oracles.ort import ort_session  # noqa: E402


def _ort_softmax(x: np.ndarray, sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    n, d = x.shape
    inits = [helper.make_tensor("xs", TensorProto.FLOAT, [], [sx]), helper.make_tensor("xz", TensorProto.INT8, [], [zx]),
             helper.make_tensor("ys", TensorProto.FLOAT, [], [sy]), helper.make_tensor("yz", TensorProto.INT8, [], [zy])]
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft", axis=-1,
                            opset=13)
    g = helper.make_graph([node], "softmax", [helper.make_tensor_value_info("x", TensorProto.INT8, [n, d])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [n, d])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    return ort_session(m.SerializeToString(), "disable_all").run(None, {"x": x})[0]


def _intq_softmax(x: np.ndarray, sx: float, zx: int, sy: float, zy: int) -> np.ndarray:
    qx, qy = QuantParams(np.float32(sx), zx, np.int8), QuantParams(np.float32(sy), zy, np.int8)
    tensors = {"x": Tensor("x", np.dtype(np.int8), x.shape, qparams=qx), "y": Tensor("y", np.dtype(np.int8), x.shape, qparams=qy)}
    g = Graph([Node("SOFTMAX", "softmax", ("x",), ("y",), {"beta": 1.0})], tensors, ("x",), ("y",), name="softmax")
    return intq.Interpreter(g, target="ort").run({"x": x})["y"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    differ = compared = 0
    for _ in range(args.trials):
        d = int(rng.integers(1, 40))
        sx = float(np.float32(10 ** rng.uniform(-2, 0)))
        sy, zy, zx = 1 / 256, -128, int(rng.integers(-128, 128))
        x = rng.integers(-128, 128, size=(args.rows, d)).astype(np.int8)
        theirs = _ort_softmax(x, sx, zx, sy, zy)
        mine = _intq_softmax(x, sx, zx, sy, zy)
        inside = mine < 127  # intq clamps at 127; onnxruntime wraps what lies above
        bad = int(((theirs != mine) & inside).sum())
        differ += bad
        compared += int(inside.sum())
        if bad:
            print(f"D={d} s_x={sx:.6g} Z_x={zx} s_y={sy:.6g} Z_y={zy}: {bad} differ", flush=True)
    print(f"{differ} of {compared} elements below 127 differ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
