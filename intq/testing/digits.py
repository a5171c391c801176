"""scikit-learn's digits (1797 8x8 images, shipped inside scikit-learn: no download), as intq's
demo, tests and training script use them: float32 NCHW images in [0, 1], a fixed split."""

from __future__ import annotations

import numpy as np

HELD_OUT = 450  # samples kept out of training (25%)
SEED = 0


def load_split() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((x_train, y_train), (x_test, y_test))``; x: float32 [N, 1, 8, 8] in [0, 1], y: int64."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    test, train = order[:HELD_OUT], order[HELD_OUT:]
    return (x[train], y[train]), (x[test], y[test])
