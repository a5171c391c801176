"""Float (numpy) implementations of ONNX operators (opset 21 semantics) for intq's float
interpreter.

``FLOAT_OPS[op_type](*inputs, **attributes)`` returns a tuple of output arrays; see
:mod:`intq.runtime.float_ops.registry` for the calling convention. Importing this package
registers every family module:

=============  ==========================================================================
module         operators
=============  ==========================================================================
conv           Conv, ConvTranspose
pool           MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
linalg         MatMul, Gemm
elementwise    arithmetic, math, comparison, logic, Where, Cast, CastLike, Identity, Dropout
activation     Relu, LeakyRelu, PRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Elu, Selu,
               Celu, Softplus, Softsign, ThresholdedRelu, Mish, Gelu, Swish, Clip, and the
               intq-domain SiLU (x * sigmoid(x), written by intq.passes)
norm           BatchNormalization, LayerNormalization, InstanceNormalization,
               GroupNormalization
shape          Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather,
               GatherElements, Shape, Size, ConstantOfShape, Range, Expand, Tile, Pad,
               DepthToSpace, SpaceToDepth, Constant, NonZero, Einsum
reduce         ReduceMean/Max/Min/Sum/Prod/L1/L2/SumSquare/LogSumExp, ArgMax, ArgMin
resize         Resize
softmax        Softmax, LogSoftmax
rnn            LSTM (unrolled into the ops above by intq.passes.rnn before conversion)
attention      GatherND, and the intq-domain MaskedSoftmax (written by intq.passes.attention)
=============  ==========================================================================
"""

from . import activation, attention, conv, elementwise, linalg, norm, pool, reduce, resize, rnn, shape, softmax  # noqa: F401
from .registry import FLOAT_OPS

lookup = FLOAT_OPS.lookup

__all__ = ["FLOAT_OPS", "lookup"]
