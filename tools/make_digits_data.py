#!/usr/bin/env python3
"""Write ``intq/data/digits.npz``: scikit-learn's digits (1797 8x8 grey images, values 0..16, and
their labels), the data of intq's demo, tests and training script, so that intq needs no
scikit-learn (run by hand; needs scikit-learn):

    .venv/bin/python tools/make_digits_data.py

The file holds ``images`` (uint8 [1797, 8, 8], 0..16, as ``load_digits().images``) and ``target``
(uint8 [1797]); :func:`intq.testing.digits.load_split` reads it. ``tests/testing/test_digits.py``
checks the arrays it gives against digests taken from scikit-learn's own ``load_digits``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "intq" / "data" / "digits.npz"


def main() -> None:
    from sklearn.datasets import load_digits

    d = load_digits()
    images, target = d.images, d.target
    assert np.array_equal(images, np.round(images)) and images.min() >= 0 and images.max() <= 16
    buf = io.BytesIO()
    np.savez_compressed(buf, images=images.astype(np.uint8), target=target.astype(np.uint8))
    OUT.write_bytes(buf.getvalue())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): images {images.shape}, target {target.shape}")


if __name__ == "__main__":
    main()
