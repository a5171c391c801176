"""intq.runtime.oracles — run a ``.tflite`` model under a real runtime, every tensor returned.

The runtimes intq's integer kernels are tested against, bit for bit:

* :mod:`intq.runtime.oracles.litert`: :func:`~intq.runtime.oracles.litert.run_litert`, LiteRT's
  interpreter (reference, optimized or XNNPACK kernels);
* :mod:`intq.runtime.oracles.tflm`: :func:`~intq.runtime.oracles.tflm.run_tflm`, TensorFlow Lite
  for Microcontrollers on the host (the default ``tflite`` target);
* :mod:`intq.runtime.oracles.ort`: :func:`~intq.runtime.oracles.ort.run_ort`, onnxruntime's CPU
  provider on an ONNX model (the ``ort`` targets; outputs only).

Both take the same inputs (a list in the model's input order, or a dict by name or position,
checked by :func:`intq.runtime.oracles.inputs.order_inputs`) and return the same result layout.
"""
