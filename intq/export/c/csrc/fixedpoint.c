/* intq C runtime, part 1: the fixed-point primitives of intq.qmath.raw in C99.
 *
 * Each block below (a line "@@ name: dependencies" in a comment opens it) is emitted into a
 * generated model only when an operator needs it, so the file compiles without unused-function
 * warnings. Every function is the C form of one intq.qmath.raw function, on int32 values, and is
 * tested against the big-integer reference tests/qmath/reference.py (tests/export/c_primitives).
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
