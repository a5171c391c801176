"""intq.qmath — the exact arithmetic of integer-only inference.

Parameters (``QuantParams``, ``choose_qparams``), float <-> int conversion (``quantize``,
``dequantize``), rounding modes (``Rounding``), real multipliers as integers
(``quantize_multiplier``, ``quantize_multiplier_bits``), the fixed-point primitives of each
runtime's requantization contract, and the scale folding / alignment of the spec texts.
docs/arithmetic.md says which runtime uses which contract.
"""

from intq.qmath.fixedpoint import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    multiply_by_quantized_multiplier_single_rounding,
    requantize_float32_rne,
    right_shift_round,
    rounded_right_shift,
    rounding_divide_by_pot,
    saturate,
    saturating_rounding_doubling_high_mul,
    tpu_mlir_multiply_rshift,
)
from intq.qmath.multiplier import (
    FixedPointScale,
    QuantizedMultiplier,
    quantize_multiplier,
    quantize_multiplier_bits,
    relative_error,
    tpu_mlir_multiplier_rshift,
)
from intq.qmath.params import QuantParams, choose_qparams, dequantize, dtype_range, quantize
from intq.qmath.rounding import Rounding, round_float
from intq.qmath.scales import (
    ScaleAlignment,
    align_scales,
    aligned_value,
    apply_fixed_point_scale,
    effective_scale,
)

__all__ = [
    "QuantParams",
    "choose_qparams",
    "dtype_range",
    "quantize",
    "dequantize",
    "Rounding",
    "round_float",
    "QuantizedMultiplier",
    "FixedPointScale",
    "quantize_multiplier",
    "quantize_multiplier_bits",
    "tpu_mlir_multiplier_rshift",
    "relative_error",
    "saturating_rounding_doubling_high_mul",
    "rounding_divide_by_pot",
    "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_single_rounding",
    "multiply_by_quantized_multiplier_int64",
    "requantize_float32_rne",
    "rounded_right_shift",
    "right_shift_round",
    "tpu_mlir_multiply_rshift",
    "saturate",
    "effective_scale",
    "apply_fixed_point_scale",
    "ScaleAlignment",
    "align_scales",
    "aligned_value",
]
