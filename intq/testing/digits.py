"""scikit-learn's digits (1797 8x8 grey images), as intq's demo, tests and training script use
them: float32 NCHW images in [0, 1], a fixed split.

The images ship inside intq (``intq/data/digits.npz``, 45 KB, written from scikit-learn's
``load_digits`` by ``tools/make_digits_data.py``), so neither the demo nor the tests need
scikit-learn.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import numpy as np

HELD_OUT = 450  # samples kept out of training (25%)
SEED = 0


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    with resources.files("intq").joinpath("data", "digits.npz").open("rb") as f, np.load(f) as z:
        return z["images"], z["target"]


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """``(images, target)``: uint8 [1797, 8, 8] with values 0..16 (scikit-learn's
    ``load_digits().images``) and uint8 [1797] classes 0..9, in scikit-learn's order."""
    images, target = _digits()
    return images.copy(), target.copy()


def load_split() -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``((x_train, y_train), (x_test, y_test))``; x: float32 [N, 1, 8, 8] in [0, 1], y: int64."""
    images, target = _digits()
    x = (images.astype(np.float32) / 16.0)[:, None, :, :]
    y = target.astype(np.int64)
    order = np.random.default_rng(SEED).permutation(len(y))
    test, train = order[:HELD_OUT], order[HELD_OUT:]
    return (x[train], y[train]), (x[test], y[test])
