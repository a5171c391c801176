"""prepare: where fake quantization goes (asked of intq.convert), how ranges start and move,
starting from a PTQ calibration table, and the errors a user can cause."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import intq  # noqa: E402
from intq.calibration import reconcile_ranges  # noqa: E402
from intq.passes import simplify  # noqa: E402
from intq.qat import QATError  # noqa: E402
from intq.qmath import choose_qparams  # noqa: E402

from .conftest import Gated, TinyCNN, run_integer  # noqa: E402


def test_import_intq_does_not_import_torch():
    code = "import intq, sys; assert 'torch' not in sys.modules; import intq.qat; assert intq.qat.prepare"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert intq.qat.prepare is not None  # the lazy attribute


def test_plan_follows_the_op_rules(digits):
    """Sigmoid and softmax outputs fixed (1/256, -128), average pooling and flatten the input's
    parameters, the concat's inputs its union range; no tensor between a conv and its fused ReLU."""
    torch.manual_seed(0)
    qat = intq.qat.prepare(Gated(), digits[0][:1], calibration_data=[digits[0][:64]])
    g = qat.graph
    kinds = {g.producer(t).op_type if g.producer(t) else "input": p for t, p in qat.plan.items()}
    assert (kinds["Sigmoid"].kind, kinds["Sigmoid"].scale, kinds["Sigmoid"].zero_point) == ("fixed", 1 / 256, -128)
    assert (kinds["Softmax"].kind, kinds["Softmax"].scale, kinds["Softmax"].zero_point) == ("fixed", 1 / 256, -128)
    assert kinds["AveragePool"].kind == "same"
    assert {g.producer(t).op_type for t in qat.plan if g.producer(t)} == {n.op_type for n in g.nodes}  # one per node
    qp = qat.quant_params()
    concat = next(n for n in g.nodes if n.op_type == "Concat")
    assert all(qp[i] == qp[concat.outputs[0]] for i in concat.inputs)  # sole readers adopt the union range
    relu_fused = [n for n in g.nodes if n.attrs.get("fused_activation") == "RELU"]
    assert relu_fused and all(qp[n.outputs[0]][1] == -128 for n in relu_fused)  # range starts at 0


def test_parameters_are_convert_s_for_the_module_s_ranges(digits):
    """Independently of the plan: reconcile the module's ranges and choose_qparams them as
    intq.convert does (fixed outputs aside), and compare."""
    torch.manual_seed(0)
    qat = intq.qat.prepare(Gated(), digits[0][:1], calibration_data=[digits[0][:64]])
    table = reconcile_ranges(qat.graph, qat.calibration_table())
    fixed = {t for t, p in qat.plan.items() if p.kind == "fixed"}
    for t, (s, z) in qat.quant_params().items():
        if t in fixed:
            continue
        src = t
        while qat.plan[src].kind == "same":
            src = qat.plan[src].source
        want = choose_qparams(*table[src], "int8")
        assert (s, z) == (float(want.scale[0]), int(want.zero_point[0])), t


def test_ranges_move_by_moving_average_and_freeze(digits):
    torch.manual_seed(0)
    qat = intq.qat.prepare(TinyCNN(), digits[0][:1], calibration_data=[digits[0][:64]], ema_decay=0.9)
    x = digits[0][64:128] * 2.0  # inputs in [0, 2]: the input range must grow
    before = qat.ranges()["input"]
    qat.train()
    qat(x)
    after = qat.ranges()["input"]
    np.testing.assert_allclose(after, (0.9 * before[0] + 0.1 * float(x.min()), 0.9 * before[1] + 0.1 * float(x.max())))
    qat.freeze_observers()
    qat(x)
    assert qat.ranges()["input"] == after
    qat.freeze_observers(False).eval()
    qat(x)
    assert qat.ranges()["input"] == after  # eval mode never observes


def test_qat_from_a_ptq_table_starts_as_the_ptq_model(digits, float_models):
    """prepare(table=...) uses the PTQ calibration: same activation parameters as intq.quantize
    with that table, and before any training the same outputs (within one output step: the two
    fold batch norm in different precisions, which may move a weight across a rounding tie)."""
    xtr, _, xte, _ = digits
    model = copy.deepcopy(float_models["tiny_cnn"])
    graph = simplify(intq.load(model, example_inputs=xtr[:1]))
    table = intq.calibrate(graph, [s[None].numpy() for s in xtr[:64]])
    ptq = intq.quantize(graph, table=table)
    qat = intq.qat.prepare(model, xtr[:1], table=table).eval()
    int_of = {f: k for k, (f, _) in ptq.metadata["float_tensor_of"].items()}
    for t, (s, z) in qat.quant_params().items():
        qp = ptq.tensors[int_of[t]].qparams
        assert (s, z) == (float(qp.scale[0]), int(qp.zero_point[0])), t
    with torch.no_grad():
        simulated = qat(xte[:100]).numpy()
    deployed = run_integer(ptq, xte[:100].numpy())
    step = qat.quant_params()[qat.graph.outputs[0]][0]
    assert np.abs(simulated - deployed).max() / step <= 1.0 + 1e-4
    assert (simulated.argmax(1) == deployed.argmax(1)).mean() >= 0.99


def test_convert_refuses_a_simulation_it_would_not_deploy(trained_qat):
    """The post-conversion check can fail: a module whose plan misreads a rule is caught."""
    import dataclasses

    qat, _ = trained_qat["gated"]
    sig = next(t for t, p in qat.plan.items() if p.kind == "fixed")
    saved = qat.plan[sig]
    qat.plan[sig] = dataclasses.replace(saved, scale=1 / 128, zero_point=0)  # TANH's, not LOGISTIC's
    qat._cache = None
    try:
        with pytest.raises(QATError, match="quantizes it with scale"):
            intq.qat.convert(qat)
    finally:
        qat.plan[sig] = saved
        qat._cache = None


class _ConstantScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x) * 2.0


class _Erf(nn.Module):
    def forward(self, x):
        return torch.erf(x)


def test_errors_name_the_problem(digits):
    x = digits[0][:1]
    with pytest.raises(QATError, match="torch.nn.Module"):
        intq.qat.prepare("model.onnx", x)
    with pytest.raises(QATError, match="example_inputs"):
        intq.qat.prepare(TinyCNN(), x.numpy())
    with pytest.raises(QATError, match=r"/Mul.*constant operand"):
        intq.qat.prepare(_ConstantScale(), x)
    with pytest.raises(intq.UnsupportedOperatorError, match="Erf"):
        intq.qat.prepare(_Erf(), x)
    qat = intq.qat.prepare(TinyCNN(), x)
    with pytest.raises(QATError, match="expected 1 input"):
        qat(x, x)
    with pytest.raises(QATError, match="intq.qat.prepare returned"):
        intq.qat.convert(TinyCNN())
