"""intq.kernels.int16x8 — the 16x8 kernels: int16 activations, int8 weights, int64 biases.

TFLite's "16x8" quantization (spec 003; the converter's
``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``) keeps the int8 operators'
semantics with symmetric int16 activations (zero point 0), but both runtimes implement many
operators differently for int16: int64 accumulators and a 16-bit reduced multiplier (conv family),
``left_shift = 15`` (ADD), 513-entry interpolated tables (SOFTMAX), a fixed 256-entry sigmoid
table (LOGISTIC, TANH). One module per operator, with the contract of :mod:`intq.kernels`; each
registers with ``@kernel(OP, INT16)`` into the one registry (:data:`intq.kernels.KERNELS`), and the
interpreter selects it for a node whose data input is int16 (:func:`intq.kernels.node_activation`).
"""
