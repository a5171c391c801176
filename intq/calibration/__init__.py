"""intq.calibration — measure every float tensor's range over representative data.

:func:`calibrate` runs the float graph over the data (:mod:`intq.calibration.data` reads arrays,
dicts, folders of .npy/.npz/images) and returns a :class:`CalibrationTable` (JSON save/load,
mergeable). The observers (:mod:`intq.calibration.observers`: min/max, moving average,
percentile, MSE, KL-entropy, per-channel) keep small, exactly mergeable states.
:func:`reconcile_ranges` applies the shared-scale rules of integer ops (backward calibration).
"""

from intq.calibration.calibrate import CalibrationTable, Progress, calibrate
from intq.calibration.data import DEFAULT_BATCH_SIZE, CalibrationDataError, ImagePreprocess, iter_batches, iter_samples

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

from intq.calibration.reconcile import reconcile_ranges

__all__ = [
    "calibrate",
    "CalibrationTable",
    "Progress",
    "reconcile_ranges",
    "iter_samples",
    "iter_batches",
    "DEFAULT_BATCH_SIZE",
    "ImagePreprocess",
    "CalibrationDataError",
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
