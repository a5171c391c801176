/* intq C runtime, part 7: data movement (RESHAPE copies, TRANSPOSE, CONCATENATION, PAD, SLICE,
 * STRIDED_SLICE, SPLIT, ...) as one strided copy: dst[dst_base + sum_k i_k * ds_k] =
 * src[src_base + sum_k i_k * ss_k] over the index box dims, innermost last (dimensions merged
 * where contiguous at code generation). No arithmetic: the bytes move unchanged. */

/*@@ intq_copy_params */
typedef struct {
    int32_t rank, dims[6], ss[6], ds[6];
    int32_t src_base, dst_base;
} intq_copy_params;

/*@@ intq_copy: intq_copy_params */
static void intq_copy(const intq_copy_params *p, const int8_t *src, int8_t *dst) {
    int32_t idx[6] = {0}, s = p->src_base, t = p->dst_base, d, k;
    const int32_t inner = p->dims[p->rank - 1], si = p->ss[p->rank - 1], di = p->ds[p->rank - 1];
    for (;;) {
        if (si == 1 && di == 1) {
            for (k = 0; k < inner; ++k) dst[t + k] = src[s + k];
        } else {
            for (k = 0; k < inner; ++k) dst[t + k * di] = src[s + k * si];
        }
        for (d = p->rank - 2; d >= 0; --d) {
            s += p->ss[d]; t += p->ds[d];
            if (++idx[d] < p->dims[d]) break;
            s -= p->ss[d] * p->dims[d]; t -= p->ds[d] * p->dims[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
}

/*@@ intq_fill */
static void intq_fill(int8_t *dst, int32_t n, int8_t value) {
    int32_t i;
    for (i = 0; i < n; ++i) dst[i] = value;
}
