"""intq.qat — quantization-aware training in PyTorch that deploys to intq's integer graph.

    qat = intq.qat.prepare(model, example_inputs, per_channel=True)   # torch.nn.Module -> QATModule
    ...  # the user's training loop: qat is an ordinary nn.Module
    qat.freeze_observers(); qat.freeze_bn()
    qg = intq.qat.convert(qat)                                        # intq integer Graph
    intq.export_tflite(qg, "model_int8.tflite")

:func:`prepare` imports the model into intq's float graph (ONNX export, then
:func:`intq.passes.simplify`: batch norm folded and ReLU fused exactly as for post-training
quantization) and asks :func:`intq.convert.convert` itself which tensors it quantizes and how
each one's parameters arise (:mod:`intq.qat.plan`). The returned :class:`QATModule` runs that
graph in PyTorch with fake quantization at exactly those tensors: weights symmetric int8 per
channel, biases int32, activations asymmetric int8 from exponential-moving-average ranges, fixed
parameters where the spec fixes them, the input's parameters where an op only moves values.
Linear layers requantize as the integer target does, and in eval mode every op gives the integer
kernel's value. Conv + BatchNorm train with BN folding simulated (Jacob et al. 2018, section 3.2).
:func:`convert` hands the folded float equivalent and the learned ranges to
:func:`intq.convert.convert`, and checks that every parameter it chose is the one the module
simulated. See ``docs/qat.md``.

PyTorch is needed (the ``torch`` extra: ``pip install 'intq[torch]'``); importing this package without it raises
:class:`QATError`.
"""

from __future__ import annotations

import importlib.util

from intq.qat.errors import QATError

if importlib.util.find_spec("torch") is None:  # pragma: no cover - exercised only without torch
    raise QATError("intq.qat needs PyTorch, which is not installed: pip install 'intq[torch]'")

from intq.qat.convert import convert  # noqa: E402
from intq.qat.fake_quant import fake_quantize_activation, fake_quantize_bias, fake_quantize_weight, round_half_away  # noqa: E402
from intq.qat.module import QATModule  # noqa: E402
from intq.qat.plan import QuantPoint, quantization_plan  # noqa: E402
from intq.qat.prepare import prepare  # noqa: E402

__all__ = [
    "prepare",
    "convert",
    "QATModule",
    "QATError",
    "QuantPoint",
    "quantization_plan",
    "fake_quantize_activation",
    "fake_quantize_weight",
    "fake_quantize_bias",
    "round_half_away",
]
