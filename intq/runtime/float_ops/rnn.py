"""Recurrent operators: LSTM (ONNX opset 7/14 semantics), for import and calibration.

The integer engine never sees an LSTM: :func:`intq.passes.rnn.unroll_lstms` writes each one as its
time steps of Gemm, MatMul, Split, Sigmoid, Tanh, Mul and Add (the same arithmetic, step by step),
which convert to TFLite int8 builtins. This float op runs the imported graph (float parity with
onnxruntime, static shapes) before that.

Supported: every direction (forward, reverse, bidirectional), initial states, the bias,
``sequence_lens`` equal to the sequence length. Refused by name: activations other than the
default (Sigmoid, Tanh, Tanh), ``clip``, ``input_forget``, peepholes ``P`` that are not zero,
shorter sequences in ``sequence_lens``, ``layout=1`` (batch first: onnxruntime, intq's float
oracle, refuses it too).
"""

from __future__ import annotations

import numpy as np

from intq.errors import GraphError, UnsupportedOperatorError

from .registry import FLOAT_OPS

DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


def lstm_contract(*, X_shape, W_shape, R_shape, activations, clip, direction, hidden_size, input_forget,
                  P=None, sequence_lens=None, layout=0) -> tuple[int, int, int, int]:
    """Check an LSTM against what intq implements; returns (T, batch, hidden, directions)."""
    dirs = {"forward": 1, "reverse": 1, "bidirectional": 2}.get(direction)
    if dirs is None:
        raise UnsupportedOperatorError(f"LSTM: direction {direction!r} is not forward, reverse or bidirectional")
    acts = tuple(activations) if activations else DEFAULT_ACTIVATIONS * dirs
    if acts != DEFAULT_ACTIVATIONS * dirs:
        raise UnsupportedOperatorError(f"LSTM: activations {list(acts)}; intq implements the default "
                                       f"(Sigmoid, Tanh, Tanh) only")
    if clip is not None:
        raise UnsupportedOperatorError(f"LSTM: clip={clip} is not implemented")
    if input_forget:
        raise UnsupportedOperatorError("LSTM: input_forget=1 (coupled input and forget gates) is not implemented")
    if P is not None and np.any(np.asarray(P) != 0):
        raise UnsupportedOperatorError("LSTM: peephole weights P are not implemented")
    if layout != 0:
        raise UnsupportedOperatorError("LSTM: layout=1 (batch first) is not implemented (onnxruntime refuses it too)")
    if len(X_shape) != 3 or len(W_shape) != 3 or len(R_shape) != 3:
        raise GraphError(f"LSTM: X, W, R must be 3-D, got {list(X_shape)}, {list(W_shape)}, {list(R_shape)}")
    seq, batch = X_shape[0], X_shape[1]
    hidden = R_shape[-1]
    if hidden_size is not None and int(hidden_size) != hidden or W_shape[0] != dirs or W_shape[1] != 4 * hidden:
        raise GraphError(f"LSTM: W {list(W_shape)} and R {list(R_shape)} do not match hidden_size {hidden_size} "
                         f"and {dirs} direction(s)")
    if sequence_lens is not None and np.any(np.asarray(sequence_lens) != seq):
        raise UnsupportedOperatorError(f"LSTM: sequence_lens {np.asarray(sequence_lens).tolist()} shorter than the "
                                       f"sequence ({seq}) are not implemented")
    return seq, batch, hidden, dirs


@FLOAT_OPS.register()
def LSTM(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size=None, input_forget=0,
         layout=0):
    """Y, Y_h, Y_c of ONNX LSTM (gates i, o, f, c; default activations):
    ``g = x_t W^T + (Wb + Rb) + h R^T``; ``C = f * C + i * c~``; ``h = o * tanh(C)``."""
    seq, batch, hidden, dirs = lstm_contract(
        X_shape=X.shape, W_shape=W.shape, R_shape=R.shape, activations=activations, clip=clip, direction=direction,
        hidden_size=hidden_size, input_forget=input_forget, P=P, sequence_lens=sequence_lens, layout=layout)
    x, dtype = X, X.dtype  # [T, B, I]
    y = np.zeros((seq, dirs, batch, hidden), dtype)
    y_h = np.zeros((dirs, batch, hidden), dtype)
    y_c = np.zeros((dirs, batch, hidden), dtype)
    for d in range(dirs):
        bias = np.zeros(4 * hidden, dtype) if B is None else (B[d, :4 * hidden] + B[d, 4 * hidden:]).astype(dtype)
        h, c = (np.zeros((batch, hidden), dtype) if s is None else s[d] for s in (initial_h, initial_c))  # [D, B, H]
        steps = range(seq) if (direction == "forward" or (direction == "bidirectional" and d == 0)) else \
            range(seq - 1, -1, -1)
        for t in steps:
            g = (x[t] @ W[d].T + bias) + h @ R[d].T
            i, o, f, cc = np.split(g, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cc)
            h = _sigmoid(o) * np.tanh(c)
            y[t, d] = h
        y_h[d], y_c[d] = h, c
    return y, y_h, y_c
