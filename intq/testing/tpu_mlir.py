"""The committed TPU-MLIR fixtures (tests/fixtures/tpu_mlir, made by tools/make_tpu_mlir_fixtures.py):
their integer-grid weights and how to read a fixture folder back.

The PyTorch models' conv / linear weights are put on seeded integer grids before export
(:func:`grid_weights`), so TPU-MLIR's int8 weights are exactly the grid: the fixtures store the seed
(``<variant>_weights_recipe.json``, with the sha256 of TPU-MLIR's array) instead of the array, and
:func:`fixture_weights` regenerates it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def grid_weights(seed: int, shape: tuple[int, ...], axis: int = 0) -> np.ndarray:
    """Seeded int8 weights in [-126, 126] with one +-127 per slice along ``axis`` (the output
    channel): a float weight ``k * s_c`` quantizes back to exactly ``k`` under any per-channel
    max-abs scheme (``s = max|w| / 127``), after batch-norm folding too (it rescales a channel)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-126, 127, size=shape).astype(np.int8)
    moved = np.moveaxis(k, axis, 0)
    flat = moved.reshape(shape[axis], -1).copy()
    pos = rng.integers(0, flat.shape[1], size=shape[axis])
    flat[np.arange(shape[axis]), pos] = np.where(rng.random(shape[axis]) < 0.5, -127, 127)
    return np.ascontiguousarray(np.moveaxis(flat.reshape(moved.shape), 0, axis))


#: Hex digits of a tensor digest kept in the fixtures (64 bits: a wrong tensor passes with
#: probability 2^-64).
DIGEST_HEX = 16


def tensor_digest(x: np.ndarray) -> str:
    """The sha256 (first :data:`DIGEST_HEX` hex digits) of one tensor as TPU-MLIR dumps it (its
    storage dtype, NCHW order, C order), with its dtype and shape: what the fixtures commit for
    every tensor of every test input."""
    x = np.ascontiguousarray(x)
    head = f"{x.dtype.str}{list(x.shape)}".encode()
    return hashlib.sha256(head + x.tobytes()).hexdigest()[:DIGEST_HEX]


def fixture_weights(folder: str | Path, variant: str) -> dict[str, np.ndarray]:
    """Every weight array of ``<variant>_tpu.mlir``: the variant's stored ones, the ones its variants
    share (``<model>_shared_weights.npz``) and the regenerated grids (each checked against the
    sha256 TPU-MLIR's array had)."""
    folder = Path(folder)
    with np.load(folder / f"{variant}_tpu_weights.npz") as data:
        weights = {k: data[k] for k in data.files}
    for shared in folder.glob("*_shared_weights.npz"):  # the arrays every variant stores identically
        with np.load(shared) as data:
            weights.update({k: data[k] for k in data.files if k not in weights})
    recipe_file = folder / f"{variant}_weights_recipe.json"
    if recipe_file.exists():
        for name, r in json.loads(recipe_file.read_text()).items():
            k = grid_weights(r["seed"], tuple(r["shape"]))
            flat = (k.T if r["transpose"] else k).reshape(-1)
            digest = hashlib.sha256(np.ascontiguousarray(flat).tobytes()).hexdigest()
            if digest != r["sha256"]:
                raise ValueError(f"{recipe_file}: the regenerated {name!r} does not match TPU-MLIR's array")
            weights[name] = flat
    return weights
