"""Run a ``.tflite`` model under TensorFlow Lite for Microcontrollers' reference kernels, on the host.

This is the oracle of intq's default ``tflite`` target: what integer-only devices compute. It
uses the ``tflite-micro`` package (``tflite_micro.python.tflite_micro.runtime``) with
``kPreserveAllTensors`` so every tensor of the run can be compared. Same calling convention and
result layout as :func:`intq.runtime.oracles.litert.run_litert`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from intq.errors import IntqError
from intq.runtime.oracles.inputs import order_inputs
from intq.tflite.schema import TENSOR_TYPE_DTYPES

_ARENA_BYTES = 64 * 1024 * 1024  # host runs: generous; microcontroller arena sizing is not tested here


#: TFLite builtins intq writes that this TensorFlow Lite Micro (tflite-micro 0.dev20261023) has no kernel
#: for, measured (its op resolver refuses the model: "Didn't find op for builtin opcode ..."): a .tflite
#: holding one runs in LiteRT only. tests/kernels/test_gelu.py and test_elementwise.py check the refusals.
TFLM_HAS_NO_KERNEL = frozenset({"GELU", "RELU_N1_TO_1"})


class TflmOracleError(IntqError, ValueError):
    """TFLite Micro could not load or run the model, or the inputs do not fit it."""


def run_tflm(model_bytes: bytes, inputs: Mapping[str | int, np.ndarray] | Sequence[np.ndarray],
             preserve_all_tensors: bool = True) -> dict[str, Any]:
    """Run ``model_bytes`` once under TFLite Micro; returns ``outputs``, ``output_names``, ``tensors``."""
    return run_tflm_sequence(model_bytes, [inputs], preserve_all_tensors)[0]


def run_tflm_sequence(model_bytes: bytes, feeds: Sequence[Mapping[str | int, np.ndarray] | Sequence[np.ndarray]],
                      preserve_all_tensors: bool = True) -> list[dict[str, Any]]:
    """Invoke one TFLite Micro interpreter once per entry of ``feeds``, in order: a streaming model's
    resource variables carry from one invocation to the next. One result per invocation, as
    :func:`run_tflm` returns it (resource handles, which hold no tensor data, are not in ``tensors``)."""
    try:
        from tflite_micro.python.tflite_micro import runtime
    except ImportError:
        raise TflmOracleError("the TFLite Micro oracle needs the tflite-micro package (pip install intq[test])") from None
    model_bytes = bytes(model_bytes)
    config = runtime.InterpreterConfig.kPreserveAllTensors if preserve_all_tensors else runtime.InterpreterConfig.kAllocationRecording
    try:
        with _native_log() as log:
            interp = runtime.Interpreter.from_bytes(model_bytes, arena_size=_ARENA_BYTES, intrepreter_config=config)
    except Exception as exc:  # the binding raises a bare RuntimeError; the reason is in TFLM's log
        raise TflmOracleError(f"TFLite Micro rejected the model: {exc}{_reason(log)}") from exc
    sub = schema.Model.GetRootAs(model_bytes, 0).Subgraphs(0)
    details = [{"name": sub.Tensors(sub.Inputs(i)).Name().decode(), "shape": sub.Tensors(sub.Inputs(i)).ShapeAsNumpy(),
                "dtype": TENSOR_TYPE_DTYPES[sub.Tensors(sub.Inputs(i)).Type()]} for i in range(sub.InputsLength())]
    results = []
    for inputs in feeds:
        for i, arr in enumerate(order_inputs(details, inputs, TflmOracleError)):
            interp.set_input(arr, i)
        try:
            with _native_log() as log:
                interp.invoke()
        except Exception as exc:
            raise TflmOracleError(f"TFLite Micro failed to run the model: {exc}{_reason(log)}") from exc
        outputs = [np.array(interp.get_output(i)) for i in range(sub.OutputsLength())]
        names = [sub.Tensors(sub.Outputs(i)).Name().decode() for i in range(sub.OutputsLength())]
        tensors: dict[str, np.ndarray] = {}
        if preserve_all_tensors:
            for t in range(sub.TensorsLength()):
                if sub.Tensors(t).Type() == schema.TensorType.RESOURCE:  # a variable's handle: reading it crashes
                    continue
                value = interp.GetTensor(t, 0)  # {"dtype", "shape", "tensor_data"}, or None
                if value is not None:
                    tensors[sub.Tensors(t).Name().decode()] = np.array(value["tensor_data"])
        results.append({"outputs": outputs, "output_names": names, "tensors": tensors})
    return results


@contextlib.contextmanager
def _native_log():
    """Capture what TFLM's C++ code prints on file descriptor 2 (``MicroPrintf``: the reason of a
    refusal) while inside; ``log[0]`` holds it afterwards, and it is printed on again, unchanged."""
    log = [""]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            log[0] = tmp.read().decode("utf-8", "replace")
            if log[0]:
                sys.stderr.write(log[0])


def _reason(log: list[str]) -> str:
    text = " ".join(line.strip() for line in log[0].splitlines() if line.strip())
    return f" ({text})" if text else ""
