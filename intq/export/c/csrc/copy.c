/* intq C runtime, part 9: data movement (TRANSPOSE, CONCATENATION, PACK, PAD, SLICE, STRIDED_SLICE,
 * SPLIT, BROADCAST_TO, SPACE_TO_DEPTH, ...) as strided byte copies: dst[dst_base + sum_k i_k * ds_k] =
 * src[src_base + sum_k i_k * ss_k] over the index box dims, innermost last, in bytes (dimensions
 * merged where contiguous at code generation; a stride may be 0 or negative). No arithmetic: the
 * integers move unchanged, whatever their type. GATHER reads its indices at run time. */

/*@@ intq_copy_params */
typedef struct {
    int32_t rank, dims[6], ss[6], ds[6];
    int32_t src_base, dst_base;
} intq_copy_params;

/*@@ intq_copy: intq_copy_params */
static void intq_copy(const intq_copy_params *p, const void *src_v, void *dst_v) {
    const uint8_t *src = (const uint8_t *)src_v;
    uint8_t *dst = (uint8_t *)dst_v;
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
/* n elements of `size` bytes, each a copy of *value (the constant's own bytes: no byte order assumed). */
static void intq_fill(void *dst_v, int32_t n, const void *value_v, int32_t size) {
    uint8_t *dst = (uint8_t *)dst_v;
    const uint8_t *value = (const uint8_t *)value_v;
    int32_t i, k;
    if (size == 1) {
        for (i = 0; i < n; ++i) dst[i] = value[0];
        return;
    }
    for (i = 0; i < n; ++i)
        for (k = 0; k < size; ++k) dst[(size_t)i * size + k] = value[k];
}

/*@@ intq_gather_params */
/* GATHER (intq.kernels.gather): x as [batch][outer][axis][inner bytes], indices [batch][coords];
 * y[b][o][c] = x[b][o][idx[b][c]]. */
typedef struct {
    int32_t batch, outer, axis, inner, coords;
    int32_t wide;     /* 1: int64 indices, 0: int32 */
    int32_t status;   /* returned for an index outside [0, axis): both runtimes fail the invocation */
} intq_gather_params;

/*@@ intq_gather: intq_gather_params */
static int intq_gather(const intq_gather_params *p, const void *x_v, const void *idx_v, void *y_v) {
    const uint8_t *x = (const uint8_t *)x_v;
    uint8_t *y = (uint8_t *)y_v;
    int32_t b, o, c, k;
    for (b = 0; b < p->batch; ++b)
        for (o = 0; o < p->outer; ++o)
            for (c = 0; c < p->coords; ++c) {
                const size_t at = (size_t)b * p->coords + c;
                const int64_t i = p->wide ? ((const int64_t *)idx_v)[at] : ((const int32_t *)idx_v)[at];
                const uint8_t *src;
                uint8_t *dst = y + (((size_t)b * p->outer + o) * p->coords + c) * p->inner;
                if (i < 0 || i >= p->axis) return p->status;
                src = x + (((size_t)b * p->outer + o) * p->axis + (size_t)i) * p->inner;
                for (k = 0; k < p->inner; ++k) dst[k] = src[k];
            }
    return 0;
}
