"""Cost per element of intq's vectorised requantization primitives (ns/element).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/requantize.py [--elements N]

Requantizes an int32 accumulator tensor of shape (N/64, 64) with per-channel multipliers
(64 channels), as a conv layer's output: intq.qmath's numpy primitives, and the fused compiled
requantizer the kernels use (intq.kernels.requantize). Reports the median of several runs and, for scale,
numpy's own cost for one int64 multiply-add over the same data (a floor for any numpy-based
requantization). The machine is shared: compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from intq.kernels.requantize import make_requantizer, requantize
from intq.kernels.targets import Requant
from intq.qmath import (
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_single_rounding,
    quantize_multiplier,
    requantize_float32_rne,
    saturate,
)


def median_ns_per_element(fn, n_elements: int, repeat: int = 7) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / n_elements * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=1 << 20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    channels = 64
    acc = rng.integers(-(2**20), 2**20, size=(args.elements // channels, channels)).astype(np.int32)
    real = rng.uniform(1e-4, 1e-2, size=channels)
    m, shift = quantize_multiplier(real)
    n = acc.size

    rows = {
        "numpy floor: int64 a*b+c": lambda: acc.astype(np.int64) * m + 3,
        "double rounding (tflite)": lambda: multiply_by_quantized_multiplier(acc, m, shift),
        "double rounding + zp + saturate": lambda: saturate(
            multiply_by_quantized_multiplier(acc, m, shift).astype(np.int64) + 5, -128, 127, np.int8
        ),
        "single rounding": lambda: multiply_by_quantized_multiplier_single_rounding(acc, m, shift),
        "float32 RNE (+zp, clamp)": lambda: requantize_float32_rne(acc, real, 5, -128, 127),
        "kernels' fused double rounding (+zp, clamp)": lambda: requantize(fused, acc),
    }
    fused = make_requantizer(real, Requant.DOUBLE, 5, -128, 127)
    requantize(fused, acc)  # compile once (numba) before timing
    print(f"{n} int32 elements, {channels} channels")
    for name, fn in rows.items():
        print(f"  {name:44s} {median_ns_per_element(fn, n):7.2f} ns/element")


if __name__ == "__main__":
    main()
