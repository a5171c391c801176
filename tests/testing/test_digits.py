"""The digits intq ships (intq/data/digits.npz) are scikit-learn's: the split's arrays have the
digests they had when load_split read scikit-learn's load_digits (taken before the file replaced it)."""

import hashlib

import numpy as np

from intq.testing.digits import load_digits, load_split

#: sha256 (first 16 hex digits) of x_train, y_train, x_test, y_test as scikit-learn 1.9.1 gave them
DIGESTS = ("1a799bb4e167f358", "3a6c01c266e98f75", "dff1762a03535154", "e89ace8b35485092")


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]


def test_the_split_is_scikit_learns():
    (x_train, y_train), (x_test, y_test) = load_split()
    assert [a.shape for a in (x_train, y_train, x_test, y_test)] == [(1347, 1, 8, 8), (1347,), (450, 1, 8, 8), (450,)]
    assert (x_train.dtype, y_train.dtype) == (np.float32, np.int64)
    assert tuple(_digest(a) for a in (x_train, y_train, x_test, y_test)) == DIGESTS


def test_load_digits_gives_copies():
    images, target = load_digits()
    images[0, 0, 0] = 99
    assert load_digits()[0][0, 0, 0] != 99
    assert images.shape == (1797, 8, 8) and target.max() == 9
