import numpy as np
import pytest

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

#: int32 values where fixed-point code goes wrong first.
INT32_EDGES = sorted(
    {INT32_MIN, INT32_MIN + 1, -(2**30) - 1, -(2**30), -(2**30) + 1, -65536, -32768, -256, -129, -128,
     -3, -2, -1, 0, 1, 2, 3, 127, 128, 255, 32767, 65536, 2**30 - 1, 2**30, 2**30 + 1,
     INT32_MAX - 1, INT32_MAX}
)

#: multipliers from quantize_multiplier are 0 or in [2^30, 2^31).
MULTIPLIER_EDGES = [0, 1, 2**30, 2**30 + 1, 1518500250, 2**31 - 2, 2**31 - 1]


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def random_int32(rng, n):
    """Half uniform over int32, half log-uniform magnitudes (accumulator-like), random signs."""
    uniform = rng.integers(INT32_MIN, INT32_MAX, size=n // 2, endpoint=True, dtype=np.int64)
    mags = np.floor(2.0 ** rng.uniform(0, 31, size=n - n // 2)).astype(np.int64)
    mags = np.minimum(mags, INT32_MAX)
    signs = rng.choice([-1, 1], size=mags.size)
    return np.concatenate([uniform, mags * signs])
