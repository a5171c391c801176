"""TPU-MLIR calibration tables both ways, on the table TPU-MLIR 1.30.2 wrote for the digits CNN."""

from pathlib import Path

import numpy as np
import pytest

import intq
from intq.calibration import calibrate
from intq.calibration.tpu_mlir_table import (
    TpuMlirTableError,
    read_tpu_mlir_table,
    tpu_mlir_name_map,
    write_tpu_mlir_table,
)
from intq.frontends.tpu_mlir import load_tpu_mlir
from intq.passes import simplify
from intq.testing.digits import load_split

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "tpu_mlir" / "digits"
TABLE = FIXTURE / "digits_cali_table"


@pytest.fixture(scope="module")
def float_graph():
    return simplify(intq.load(intq.__path__[0] + "/data/digits_cnn.onnx", input_shapes={"image": (1, 1, 8, 8)}))


def test_names_map_to_onnx_tensors(float_graph):
    table = read_tpu_mlir_table(TABLE, float_graph.tensors)
    assert set(table.ranges) == {"image", "/features/features.2/Relu_output_0", "/features/features.5/Relu_output_0",
                                 "/features/features.6/MaxPool_output_0", "/features/features.8/Relu_output_0",
                                 "/ReduceMean_output_0", "logits"}
    assert table.options["tpu_mlir_names"]["logits_Gemm"] == "logits"
    assert tpu_mlir_name_map(["a_b_Conv", "x"], ["a_b", "a"]) == {"a_b_Conv": "a_b"}  # the longest tensor name


def test_symmetric_and_asymmetric_ranges_are_what_tpu_mlir_quantized_with():
    """The int8 models TPU-MLIR built from this table: symmetric scales are threshold/255 for uint8
    (min >= 0) and threshold/127 for int8 (measured on 1.30.2; spec 002 writes t/128); asymmetric
    ones (max - min)/255 over [min(min, 0), max(max, 0)]."""
    sym, asym = read_tpu_mlir_table(TABLE), read_tpu_mlir_table(TABLE, scheme="asymmetric")
    for kind, table in (("sym", sym), ("asym", asym)):
        g = load_tpu_mlir(FIXTURE / f"digits_bm1684x_int8_{kind}_tpu.mlir")
        checked = 0
        for name, (lo, hi) in table.ranges.items():
            qp = g.tensors[name].qparams if name in g.tensors else None
            if qp is None:
                continue
            if kind == "sym":
                want = hi / (255 if qp.dtype == np.uint8 else 127)
            else:
                want = (hi - lo) / 255
            assert qp.scale[0] == pytest.approx(want, rel=1e-6), (kind, name)
            checked += 1
        assert checked >= 6


def test_write_then_read_round_trips_intq_ranges(tmp_path, float_graph):
    (x_train, _), _ = load_split()
    table = calibrate(float_graph, [x[None] for x in x_train[:32]])
    tpu_names = list(read_tpu_mlir_table(TABLE).options["tpu_mlir"])
    out = tmp_path / "intq_cali_table"
    assert write_tpu_mlir_table(table, out, tpu_names) == len(tpu_names)
    back = read_tpu_mlir_table(out, float_graph.tensors, scheme="asymmetric")
    for name, (lo, hi) in back.ranges.items():
        want_lo, want_hi = table.ranges[name]
        assert (lo, hi) == pytest.approx((min(want_lo, 0.0), max(want_hi, 0.0)), abs=1e-7)
    th, lo, hi = back.options["tpu_mlir"]["logits_Gemm"]
    assert th == pytest.approx(max(abs(lo), abs(hi)))
    with pytest.raises(TpuMlirTableError, match="exists"):
        write_tpu_mlir_table(table, out, tpu_names)
    with pytest.raises(TpuMlirTableError, match="no range in the table for 1 TPU-MLIR op"):
        write_tpu_mlir_table(table, tmp_path / "t2", [*tpu_names, "nowhere_Conv"])


def test_bad_tables_name_file_and_line(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("# op_name    threshold    min    max\nimage 1.0 0.0\n")
    with pytest.raises(TpuMlirTableError, match=r"bad:2: expected 'name threshold min max'"):
        read_tpu_mlir_table(bad)
    bad.write_text("x 1.0 2.0 0.5\n")
    with pytest.raises(TpuMlirTableError, match=r"bad:1: invalid threshold"):
        read_tpu_mlir_table(bad)
