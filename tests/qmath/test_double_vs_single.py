"""Double rounding (gemmlowp / TFLite reference / TFLM) vs single rounding (CMSIS-NN, ruy).

Not just "they differ": each is checked against its exact rational definition, and the fraction
of disagreement is checked against the analysis below.

With X = x*m/2^31 (exact) and a right shift n, double rounding is D = round_away(round(X) / 2^n)
and single rounding is S = round_half_up(X / 2^n). They differ exactly when the first rounding
lands X on a tie of the second: for X > 0 when X is in [(k+1/2)2^n - 1/2, (k+1/2)2^n), a band of
width 1/2 in every 2^n, so the expected fraction is 2^-(n+1); there |D| = |S| + 1.
"""

from fractions import Fraction

import numpy as np

from intq.qmath import multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_single_rounding

from . import reference as ref


def test_each_is_what_it_claims_and_the_disagreement_rate(rng):
    n_samples, n = 1_000_000, 6
    x = rng.integers(-(2**24), 2**24, size=n_samples)  # accumulator-sized
    m = rng.integers(2**30, 2**31, size=n_samples)
    shift = -n
    d = multiply_by_quantized_multiplier(x, m, shift).astype(np.int64)
    s = multiply_by_quantized_multiplier_single_rounding(x, m, shift).astype(np.int64)

    differ = d != s
    rate = differ.mean()
    expected = 2.0 ** -(n + 1)
    sd = np.sqrt(expected * (1 - expected) / n_samples)
    assert abs(rate - expected) < 5 * sd, f"disagreement rate {rate:.6f}, predicted {expected:.6f}"
    assert np.all(np.abs(d[differ]) == np.abs(s[differ]) + 1), "double rounding must be the one further from zero"

    # Check each against its exact definition on every disagreement and on a random sample.
    idx = np.concatenate([np.flatnonzero(differ), rng.choice(n_samples, 5000, replace=False)])
    for i in idx:
        xi, mi = int(x[i]), int(m[i])
        exact = Fraction(xi * mi, 2**31)
        first = ref.round_rational(exact, "half_up")  # SRDHM: nearest, ties toward +inf
        assert d[i] == ref.round_rational(Fraction(first, 2**n), "half_away_from_zero")
        assert s[i] == ref.round_rational(exact / 2**n, "half_up")
        assert abs(s[i] - exact / 2**n) <= Fraction(1, 2)  # single rounding is correctly rounded
        assert abs(d[i] - exact / 2**n) < Fraction(1, 2) + Fraction(1, 2 ** (n + 1))
