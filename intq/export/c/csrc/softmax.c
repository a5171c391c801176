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
