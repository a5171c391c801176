"""intq.calibration — measure every float tensor's range over representative data.

:func:`calibrate` runs the float graph over the data (:mod:`intq.calibration.data` reads arrays,
dicts, folders of .npy/.npz/images) and returns a :class:`CalibrationTable` (JSON save/load,
mergeable). The observers (:mod:`intq.calibration.observers`: min/max, moving average,
percentile, MSE, KL-entropy, ``auto`` per tensor, per-channel) keep small, exactly mergeable
states; :func:`method_per_tensor` says which method set each range. Tensors an activation bounds
keep their observed range under every method (:func:`bounded_tensors`).
:func:`reconcile_ranges` applies the shared-scale rules of integer ops (backward calibration).
:func:`read_tpu_mlir_table` / :func:`write_tpu_mlir_table` convert to and from TPU-MLIR's table.
"""

from intq.calibration.calibrate import CalibrationTable, Progress, bounded_tensors, calibrate, method_per_tensor
from intq.calibration.data import DEFAULT_BATCH_SIZE, CalibrationDataError, ImagePreprocess, iter_batches, iter_samples

from intq.calibration.observers import (
    OBSERVER_METHODS,
    AlignedHistogram,
    AutoObserver,
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
from intq.calibration.tpu_mlir_table import read_tpu_mlir_table, write_tpu_mlir_table

__all__ = [
    "calibrate",
    "bounded_tensors",
    "method_per_tensor",
    "CalibrationTable",
    "Progress",
    "reconcile_ranges",
    "read_tpu_mlir_table",
    "write_tpu_mlir_table",
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
    "AutoObserver",
    "aligned_exponent",
    "make_observer",
    "OBSERVER_METHODS",
]
