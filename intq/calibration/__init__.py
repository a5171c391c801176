"""intq.calibration — observers that watch float tensors over calibration data and report ranges.

See :mod:`intq.calibration.observers`: min/max, moving average, percentile, MSE and KL-entropy
observers with a small, exactly mergeable state, and :func:`make_observer` to build one by name.
"""

from intq.calibration.observers import (
    OBSERVER_METHODS,
    AlignedHistogram,
    EntropyObserver,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MSEObserver,
    Observer,
    PercentileObserver,
    PerChannelMinMaxObserver,
    aligned_exponent,
    make_observer,
)

__all__ = [
    "Observer",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "HistogramObserver",
    "PercentileObserver",
    "MSEObserver",
    "EntropyObserver",
    "AlignedHistogram",
    "aligned_exponent",
    "make_observer",
    "OBSERVER_METHODS",
]
