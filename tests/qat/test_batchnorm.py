"""Conv + BatchNorm in QAT: batch statistics while training, folding simulated (Jacob et al. 2018
section 3.2), running statistics frozen on request, and the folded layer the deployed one."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import intq  # noqa: E402
from intq.passes import simplify  # noqa: E402

from .conftest import TinyCNN  # noqa: E402


@pytest.fixture()
def pair(digits):
    xtr = digits[0]
    torch.manual_seed(1)
    model = TinyCNN()
    with torch.no_grad():  # non-trivial statistics and affine parameters
        for bn in (model.features[1], model.features[3][1]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
    qat = intq.qat.prepare(copy.deepcopy(model), xtr[:1], calibration_data=[xtr[:128]])
    return model, qat


def test_training_uses_batch_statistics_and_updates_running_ones(pair, digits):
    """With fake quantization off, a training step of the QAT module is the float module's."""
    model, qat = pair
    x = digits[0][:64]
    model.train()
    qat.train().enable_fake_quant(False)
    ref = model(x)
    out = qat(x)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    for name, bn in (("/features/features.0/Conv", model.features[1]), ("/features/features.3/features.3.0/Conv", model.features[3][1])):
        state = qat.layer(name).bn
        torch.testing.assert_close(state.running_mean, bn.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(state.running_var, bn.running_var, rtol=1e-5, atol=1e-6)


def test_freeze_bn_stops_statistics_and_gives_the_folded_layer(pair, digits):
    _, qat = pair
    x = digits[0][:64]
    qat.train().freeze_bn().freeze_observers()
    qat.exact_ops = "frozen"  # non-linear ops by the integer kernels in training too
    layers = [qat.layer(n.name) for n in qat.graph.nodes if n.op_type == "Conv" and qat.layer(n.name).bn is not None]
    before = [(l.bn.running_mean.clone(), l.bn.running_var.clone()) for l in layers]
    out_train = qat(x)
    for l, (m, v) in zip(layers, before):
        assert torch.equal(l.bn.running_mean, m) and torch.equal(l.bn.running_var, v)
    with torch.no_grad():
        out_eval = qat.eval()(x)
    assert torch.equal(out_train.detach(), out_eval)


def test_folded_weights_are_intq_s_folding(pair, digits):
    """The layer folds as intq.passes.fold_batch_norms does (it in float64, the QAT layer in float32)."""
    model, qat = pair
    g = simplify(intq.load(model.eval(), example_inputs=digits[0][:1]))
    for node in g.nodes:
        if node.op_type == "Conv" and node.inputs[1].endswith("weight_bn_folded"):
            w, b = qat.layer(node.name).folded()
            np.testing.assert_allclose(w.detach().numpy(), g.constant(node.inputs[1]), rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(b.detach().numpy(), g.constant(node.inputs[2]), rtol=2e-6, atol=1e-6)


def test_gradients_reach_every_parameter(pair, digits):
    _, qat = pair
    x, y = digits[0][:64], digits[1][:64]
    for frozen in (False, True):
        qat.train().freeze_bn(frozen)
        qat.zero_grad()
        torch.nn.functional.cross_entropy(qat(x), y).backward()
        for name, p in qat.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, (frozen, name)
