/* intq C runtime, part 1: the fixed-point primitives of intq.qmath.raw in C99.
 *
 * Each block below (a line "@@ name: dependencies" in a comment opens it) is emitted into a
 * generated model only when an operator needs it, so the file compiles without unused-function
 * warnings. Every function is the C form of one intq rule (mostly intq.qmath.raw), on int32 values:
 * intq/export/c/rules.py (C_RULES) names the rule of each, and tests/export/c/test_rules.py runs
 * each body against it bit for bit; tests/export/c/test_primitives.py checks them against the
 * big-integer reference tests/qmath/reference.py.
 *
 * Portability: C99 leaves >> of a negative value implementation-defined and makes << of a negative
 * value undefined. Right shifts here go through intq_asr32 / intq_asr64, which shift only
 * non-negative values (for x < 0, ~x >= 0 and floor(x / 2^n) = ~(~x >> n)); left shifts of possibly
 * negative values are written as products with a power of two, whose range the kernels bound at
 * prepare. int32_t is two's complement by definition (C99 7.18.1.1), so & on it is well defined. */

/*@@ intq_asr32 */
/* floor(x / 2^n), n in [0, 31]: an arithmetic right shift that does not depend on the compiler. */
static inline int32_t intq_asr32(int32_t x, int n) { return x >= 0 ? x >> n : ~(~x >> n); }

/*@@ intq_asr64 */
/* floor(x / 2^n), n in [0, 63], on int64. */
static inline int64_t intq_asr64(int64_t x, int n) { return x >= 0 ? x >> n : ~(~x >> n); }

/*@@ intq_wrap32 */
/* The int32 whose bits are u (two's complement wrap-around), portably: raw.wrap32. */
static inline int32_t intq_wrap32(uint32_t u) {
    return u <= (uint32_t)INT32_MAX ? (int32_t)u : (int32_t)(u - 2147483648u) - INT32_MAX - 1;
}

/*@@ intq_clamp */
static inline int32_t intq_clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/*@@ intq_srdhm: intq_asr64 */
/* gemmlowp SaturatingRoundingDoublingHighMul (raw.srdhm): floor((a*b + 2^30) / 2^31), ties toward
 * +infinity; a == b == INT32_MIN saturates to INT32_MAX. */
static inline int32_t intq_srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    return (int32_t)intq_asr64((int64_t)a * b + ((int64_t)1 << 30), 31);
}

/*@@ intq_rdbp: intq_asr32 */
/* gemmlowp RoundingDivideByPOT (raw.rdbp): x / 2^e rounded half away from zero, e in [0, 31]. */
static inline int32_t intq_rdbp(int32_t x, int e) {
    const int32_t mask = (int32_t)(((uint32_t)1 << e) - 1u);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return intq_asr32(x, e) + (remainder > threshold ? 1 : 0);
}

/*@@ intq_mbqm: intq_srdhm intq_rdbp intq_wrap32 */
/* TFLite MultiplyByQuantizedMultiplier, double rounding (raw.mbqm): x * m * 2^(shift - 31) as
 * RDBP(SRDHM(x * 2^max(shift, 0), m), max(-shift, 0)); shift in [-31, 30], positive = left. The
 * left shift wraps as C's int32 arithmetic does on the runtimes (raw.mbqm's wrap32); the kernels
 * bound x so that it does not. */
static inline int32_t intq_mbqm(int32_t x, int32_t m, int shift) {
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return intq_rdbp(intq_srdhm(intq_wrap32((uint32_t)x << left), m), right);
}

/*@@ intq_requant: intq_mbqm intq_clamp */
/* The output stage every requantizing kernel shares (intq.kernels.requantize.DoubleRounding):
 * clamp(mbqm(acc, m, shift) + zero_point, lo, hi). */
static inline int8_t intq_requant(int32_t acc, int32_t m, int shift, int32_t zp, int32_t lo, int32_t hi) {
    return (int8_t)intq_clamp(intq_mbqm(acc, m, shift) + zp, lo, hi);
}

/*@@ intq_double_product */
/* LiteRT's reference FULLY_CONNECTED output stage (target litert-ref; intq.kernels.requantize.
 * DoubleProduct): std::round(double(acc) * M), in integers. M = mant * 2^-k (mant < 2^53, k > 0,
 * from the double the kernel prepared). The exact product P = |acc| * mant (at most 31 + 53 = 84
 * bits, kept in two 64-bit limbs) is rounded to 53 significant bits, ties to even (what the IEEE
 * double multiplication does), then at bit k, ties away from zero (std::round), and the sign put
 * back. The magnitude saturates at 2^30: every output clamp lies far inside. */
static int32_t intq_double_product(int32_t acc, uint64_t mant, int32_t k) {
    const uint64_t u = (uint64_t)(acc < 0 ? -(int64_t)acc : (int64_t)acc);
    const uint64_t low = u * (mant & 0xFFFFFFFFu), high = u * (mant >> 32);  /* < 2^63, < 2^52 */
    uint64_t lo = low + (high << 32), hi = (high >> 32) + (lo < low ? 1u : 0u);
    uint64_t r;
    int32_t bits = 0, d = 0, e;
    if (hi != 0) { uint64_t t = hi; bits = 64; while (t) { ++bits; t >>= 1; } }
    else { uint64_t t = lo; while (t) { ++bits; t >>= 1; } }
    if (bits > 53) {  /* drop d <= 31 bits, ties to even */
        uint64_t rem, half;
        d = bits - 53;
        rem = lo & ((UINT64_C(1) << d) - 1u);
        half = UINT64_C(1) << (d - 1);
        lo = (lo >> d) | (hi << (64 - d));  /* < 2^53 */
        if (rem > half || (rem == half && (lo & 1u))) ++lo;  /* may reach 2^53: still exact */
    }
    e = k - d;  /* |value| = lo * 2^-e */
    if (lo == 0 || e > 55) return 0;  /* lo <= 2^53: below 1/4 */
    if (e <= 0) r = UINT64_C(1) << 30;
    else r = (lo + (UINT64_C(1) << (e - 1))) >> e;  /* half away from zero on the magnitude */
    if (r > (UINT64_C(1) << 30)) r = UINT64_C(1) << 30;
    return acc < 0 ? -(int32_t)r : (int32_t)r;
}

/*@@ intq_clz32 */
/* CountLeadingZeros of a uint32 (32 for 0), by binary search (_fixedpoint_lut.count_leading_zeros32). */
static inline int intq_clz32(uint32_t y) {
    int n = 0;
    if (y == 0) return 32;
    if (y <= 0xFFFFu) { n += 16; y <<= 16; }
    if (y <= 0xFFFFFFu) { n += 8; y <<= 8; }
    if (y <= 0xFFFFFFFu) { n += 4; y <<= 4; }
    if (y <= 0x3FFFFFFFu) { n += 2; y <<= 2; }
    if (y <= 0x7FFFFFFFu) { n += 1; }
    return n;
}

/*@@ intq_mul_by_pot: intq_rdbp */
/* gemmlowp SaturatingRoundingMultiplyByPOT (raw.mul_by_pot): x * 2^e saturated for e >= 0,
 * RDBP(x, -e) for e < 0. */
static inline int32_t intq_mul_by_pot(int32_t x, int e) {
    int32_t threshold;
    if (e < 0) return intq_rdbp(x, -e);
    threshold = (int32_t)(((uint32_t)1 << (31 - e)) - 1u);
    if (x > threshold) return INT32_MAX;
    if (x < -threshold) return INT32_MIN;
    return x * ((int32_t)1 << e);
}

/*@@ intq_rounding_half_sum: intq_asr64 */
/* gemmlowp RoundingHalfSum on int32: (a + b + sign(a + b)) / 2 with C truncation. */
static inline int32_t intq_rounding_half_sum(int32_t a, int32_t b) {
    const int64_t s = (int64_t)a + b;
    const int64_t t = s + (s >= 0 ? 1 : -1);
    return (int32_t)(t >= 0 ? t / 2 : -((-t) / 2));
}

/*@@ intq_one_over_one_plus_x: intq_srdhm intq_mul_by_pot intq_rounding_half_sum */
/* gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out): three Newton-Raphson steps from
 * 48/17 - 32/17 d on the half denominator (_fixedpoint_lut.one_over_one_plus_x_for_x_in_0_1). */
static inline int32_t intq_one_over_one_plus_x(int32_t a) {
    const int32_t half_denominator = intq_rounding_half_sum(a, INT32_MAX);
    int32_t x = 1515870810 + intq_srdhm(half_denominator, -1010580540); /* 48/17 and -32/17 in Q2.29 */
    int i;
    for (i = 0; i < 3; ++i) {
        const int32_t one_minus = (1 << 29) - intq_srdhm(half_denominator, x); /* 1.0 in Q2.29 */
        x = x + intq_mul_by_pot(intq_srdhm(x, one_minus), 2);
    }
    return intq_mul_by_pot(x, 1);
}

/*@@ intq_get_reciprocal: intq_clz32 intq_one_over_one_plus_x intq_wrap32 */
/* TFLite GetReciprocal: 1 / (x * 2^-bits_over_unit) in Q0.31, x > 0 in Q(integer_digits). */
static inline int32_t intq_get_reciprocal(int32_t x, int integer_digits, int *bits_over_unit) {
    const int headroom_plus_one = intq_clz32((uint32_t)x);
    *bits_over_unit = integer_digits - headroom_plus_one;
    return intq_one_over_one_plus_x(intq_wrap32(((uint32_t)x << headroom_plus_one) - 2147483648u));
}

/*@@ intq_saturating_add */
static inline int32_t intq_saturating_add(int32_t a, int32_t b) {
    const int64_t s = (int64_t)a + b;
    return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}

/*@@ intq_log_x_ge_1: intq_clz32 intq_mul_by_pot intq_srdhm intq_rdbp intq_saturating_add intq_rounding_half_sum intq_one_over_one_plus_x intq_wrap32 */
/* TFLite's log_x_for_x_greater_than_or_equal_to_1_impl (_fixedpoint_lut.log_x_for_x_greater_than_or_equal_to_1):
 * log(x) from Q(in) to Q(out) raws, x > 0. x = 2^z r with r normalised two ways (around 1 and around
 * sqrt(1/2)); log r from a rational approximation; accumulated with one extra integer bit. Additions
 * that C's int32 arithmetic would wrap are written with intq_wrap32. */
static inline int32_t intq_log_x_ge_1(int32_t x, int input_integer_bits, int output_integer_bits) {
    const int32_t sqrt_sqrt_half = 1805811301, sqrt_half = 1518500250, log_2 = 1488522236; /* Q0.31 */
    const int32_t alpha_n = 117049297, alpha_d = 127690142, alpha_i = 1057819769, alpha_f = 638450708;
    const int accum_bits = output_integer_bits + 1;
    const int32_t shifted_quarter = intq_mul_by_pot(536870912, -accum_bits); /* 1/4 as Q(accum_bits) */
    const int z_a_headroom_plus_1 = intq_clz32((uint32_t)x);
    const int32_t r_a_tmp = intq_mul_by_pot(x, z_a_headroom_plus_1 - 1);
    const int32_t r_a_raw = intq_mul_by_pot(intq_srdhm(r_a_tmp, sqrt_half), 1);
    const int32_t z_a_pow_2_adj = intq_saturating_add(
        intq_mul_by_pot(input_integer_bits - z_a_headroom_plus_1, 31 - accum_bits), shifted_quarter);
    const int32_t z_b = intq_srdhm(x, sqrt_half);
    const int z_b_headroom = intq_clz32((uint32_t)z_b) - 1;
    const int32_t r_b_raw = intq_mul_by_pot(x, z_b_headroom);
    const int32_t z_b_pow_2_adj = intq_saturating_add(
        intq_mul_by_pot(input_integer_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter);
    const int32_t r = r_a_raw < r_b_raw ? r_a_raw : r_b_raw;
    const int32_t z_pow_2_adj = z_a_pow_2_adj > z_b_pow_2_adj ? z_a_pow_2_adj : z_b_pow_2_adj;
    const int32_t p = intq_rounding_half_sum(r, sqrt_sqrt_half);
    const int32_t q1 = intq_wrap32((uint32_t)r - (uint32_t)sqrt_sqrt_half);
    const int32_t q = intq_wrap32((uint32_t)q1 + (uint32_t)q1);
    const int32_t common_sq = intq_srdhm(q, q);
    const int32_t num = intq_wrap32((uint32_t)intq_srdhm(q, r) + (uint32_t)intq_srdhm(intq_srdhm(q, common_sq), alpha_n));
    const int32_t denom_minus_one = intq_wrap32(
        (uint32_t)intq_srdhm(p, intq_wrap32((uint32_t)alpha_i + (uint32_t)q + (uint32_t)intq_srdhm(alpha_d, common_sq)))
        + (uint32_t)intq_srdhm(alpha_f, q));
    const int32_t recip_denom = intq_one_over_one_plus_x(denom_minus_one);
    const int32_t num_scaled = intq_mul_by_pot(num, -accum_bits);
    const int32_t total = intq_wrap32((uint32_t)intq_srdhm(z_pow_2_adj, log_2) + (uint32_t)intq_srdhm(num_scaled, recip_denom));
    return intq_mul_by_pot(total, accum_bits - output_integer_bits);
}

/*@@ intq_inv_sqrt: intq_clz32 intq_rdbp intq_srdhm intq_mul_by_pot */
/* TFLite's GetInvSqrtQuantizedMultiplierExp with reverse_shift -1 (_fixedpoint_lut.inv_sqrt_multiplier):
 * 1/sqrt(acc) ~= multiplier * 2^(shift - 31) (*shift positive = left), acc in [0, 2^31); acc <= 1 gives
 * (INT32_MAX, 0). Five Newton-Raphson steps in Q3.28 from 1; every value shifted is non-negative. */
static inline int32_t intq_inv_sqrt(int32_t acc, int *shift_out) {
    const int32_t half_three_q3 = (1 << 28) + (1 << 27), sqrt_half = 1518500250; /* 1.5 in Q3.28; sqrt(1/2) Q0.31 */
    int32_t value, half_input, x;
    int shift, pairs, i;
    if (acc <= 1) {
        *shift_out = 0;
        return INT32_MAX;
    }
    value = acc;
    shift = 11;
    if (value >= (1 << 29)) {
        value >>= 2;
        shift += 1;
    }
    pairs = (intq_clz32((uint32_t)value) - 1) / 2 - 1; /* value < 2^29: clz >= 3, pairs >= 0 */
    shift -= pairs;
    value <<= 2 * pairs;                                /* now in [2^27, 2^29) */
    half_input = intq_rdbp(value >> 1, 1);
    x = 1 << 28;                                        /* 1.0 in Q3.28 */
    for (i = 0; i < 5; ++i) {
        const int32_t x3 = intq_mul_by_pot(intq_srdhm(intq_srdhm(x, x), x), 6);
        x = intq_mul_by_pot(intq_srdhm(half_three_q3, x) - intq_srdhm(half_input, x3), 3);
    }
    x = intq_srdhm(x, sqrt_half);
    if (shift < 0) {
        x <<= -shift;
        shift = 0;
    }
    *shift_out = -shift;
    return x;
}
