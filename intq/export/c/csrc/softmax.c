/* intq C runtime, part 6: SOFTMAX (intq.kernels.softmax), TFLite's reference_ops::Softmax.
 *
 * Per row: d = max - x in [0, 255]; the Q12.19 exps of the differences (exp_q12, 0 beyond the input
 * radius, from prepare) summed with int32 wrap-around as C's; 1/sum by GetReciprocal; each output
 * clamp(RDBP(SRDHM(1/sum, exp_q0[d]), bits_over_unit + 23) - 128), or -128 beyond the radius. A row
 * whose sum reaches 2^28 / 2^19 = 512 makes the shift leave [0, 31]: the runtimes abort, intq
 * raises, and the generated code returns INTQ_ERROR_SOFTMAX_RANGE (only rows of 512 or more
 * elements can). */

/*@@ intq_softmax_params */
typedef struct {
    int32_t rows, depth, radius;
    const int32_t *exp_q0, *exp_q12;  /* [256], by d = max - x */
} intq_softmax_params;

/*@@ intq_softmax: intq_softmax_params intq_get_reciprocal intq_srdhm intq_rdbp intq_clamp intq_wrap32 */
static int intq_softmax(const intq_softmax_params *p, const int8_t *x, int8_t *y) {
    int32_t r, i;
    for (r = 0; r < p->rows; ++r) {
        const int8_t *xr = x + (size_t)r * p->depth;
        int8_t *yr = y + (size_t)r * p->depth;
        int32_t mx = -128, inverse;
        uint32_t sum = 0;
        int bits_over_unit, exponent;
        for (i = 0; i < p->depth; ++i) if (xr[i] > mx) mx = xr[i];
        for (i = 0; i < p->depth; ++i) sum += (uint32_t)p->exp_q12[mx - xr[i]];
        inverse = intq_get_reciprocal(intq_wrap32(sum), 12, &bits_over_unit);
        exponent = bits_over_unit + 31 - 8;
        if (exponent < 0 || exponent > 31) return 1;
        for (i = 0; i < p->depth; ++i) {
            const int32_t d = mx - xr[i];
            yr[i] = d <= p->radius
                ? (int8_t)intq_clamp(intq_rdbp(intq_srdhm(inverse, p->exp_q0[d]), exponent) - 128, -128, 127)
                : (int8_t)-128;
        }
    }
    return 0;
}

/*@@ intq_log_softmax_params */
/* LOG_SOFTMAX (intq.kernels.log_softmax LogSoftmaxParams), TFLite's LogSoftmax: per row, with
 * d = max - x, sum the Q12.19 exps exp_q12[d] (int32 wrap-around as C's), take its Q5.26 log, and
 * y = clamp(RDBP(scaled_q5[d] - log, 22) + 127) where -d > max(diff_min - 1, mbqm(log + INT32_MIN,
 * reverse)), else -128. Output (16/256, 127). */
typedef struct {
    int32_t rows, depth, diff_min, reverse_mult, reverse_shift;
    const int32_t *scaled_q5, *exp_q12;  /* [256], by d */
} intq_log_softmax_params;

/*@@ intq_log_softmax: intq_log_softmax_params intq_log_x_ge_1 intq_mbqm intq_rdbp intq_clamp intq_wrap32 */
static void intq_log_softmax(const intq_log_softmax_params *p, const int8_t *x, int8_t *y) {
    int32_t r, i;
    for (r = 0; r < p->rows; ++r) {
        const int8_t *xr = x + (size_t)r * p->depth;
        int8_t *yr = y + (size_t)r * p->depth;
        int32_t mx = -128, log_sum, adjusted, reverse;
        uint32_t sum = 0;
        for (i = 0; i < p->depth; ++i) if (xr[i] > mx) mx = xr[i];
        for (i = 0; i < p->depth; ++i) sum += (uint32_t)p->exp_q12[mx - xr[i]];
        log_sum = intq_log_x_ge_1(intq_wrap32(sum), 12, 5);
        reverse = intq_mbqm(intq_wrap32((uint32_t)log_sum + 2147483648u), p->reverse_mult, p->reverse_shift);
        adjusted = p->diff_min - 1 > reverse ? p->diff_min - 1 : reverse;
        for (i = 0; i < p->depth; ++i) {
            const int32_t d = mx - xr[i];
            yr[i] = -d > adjusted
                ? (int8_t)intq_clamp(intq_rdbp(intq_wrap32((uint32_t)p->scaled_q5[d] - (uint32_t)log_sum), 22) + 127,
                                     -128, 127)
                : (int8_t)-128;
        }
    }
}

/*@@ intq_l2_normalization: intq_inv_sqrt intq_mbqm intq_clamp */
/* L2_NORMALIZATION (intq.kernels.l2_normalization), TFLite's L2Normalization: per row of `depth`,
 * acc = sum (x - Z)^2 (< 2^31: depth <= 33025, checked at prepare), (m, shift) = 1/sqrt(acc), then
 * y = clamp(mbqm(x - Z, m, shift + 7)) (output scale 1/128, zero point 0). In place safe: a row is
 * read whole before it is written. */
static void intq_l2_normalization(int32_t rows, int32_t depth, int32_t zp, const int8_t *x, int8_t *y) {
    int32_t r, i;
    for (r = 0; r < rows; ++r) {
        const int8_t *xr = x + (size_t)r * depth;
        int8_t *yr = y + (size_t)r * depth;
        int32_t acc = 0, m;
        int shift;
        for (i = 0; i < depth; ++i) acc += (xr[i] - zp) * (xr[i] - zp);
        m = intq_inv_sqrt(acc, &shift);
        for (i = 0; i < depth; ++i) yr[i] = (int8_t)intq_clamp(intq_mbqm(xr[i] - zp, m, shift + 7), -128, 127);
    }
}
