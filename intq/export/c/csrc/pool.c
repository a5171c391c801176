/* intq C runtime, part 5: pooling and reductions (intq.kernels.max_pool_2d, average_pool_2d, mean,
 * _pool_common). A window is clipped to the image (padding is neither read nor counted). */

/*@@ intq_pool_params */
typedef struct {
    int32_t batch, in_h, in_w, channels, out_h, out_w;
    int32_t filter_h, filter_w, stride_h, stride_w, pad_top, pad_left;
    int32_t act_min, act_max;
} intq_pool_params;

/*@@ intq_max_pool: intq_pool_params intq_clamp */
/* MAX_POOL_2D: the window maximum (starting at -128), clamped to the fused activation. */
static void intq_max_pool(const intq_pool_params *p, const int8_t *x, int8_t *y) {
    int32_t n, oy, ox, c, iy, ix;
    for (n = 0; n < p->batch; ++n)
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t ya = y0 < 0 ? 0 : y0, yb = y0 + p->filter_h > p->in_h ? p->in_h : y0 + p->filter_h;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t xa = x0 < 0 ? 0 : x0, xb = x0 + p->filter_w > p->in_w ? p->in_w : x0 + p->filter_w;
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->channels;
                for (c = 0; c < p->channels; ++c) {
                    int32_t m = -128;
                    for (iy = ya; iy < yb; ++iy)
                        for (ix = xa; ix < xb; ++ix) {
                            const int32_t v = x[(((size_t)n * p->in_h + iy) * p->in_w + ix) * p->channels + c];
                            if (v > m) m = v;
                        }
                    out[c] = (int8_t)intq_clamp(m, p->act_min, p->act_max);
                }
            }
        }
}

/*@@ intq_average_pool: intq_pool_params intq_clamp */
/* AVERAGE_POOL_2D: the window sum divided by the in-image count, rounded half away from zero
 * (_pool_common.rounded_average: (|acc| + count/2) / count with the sign of acc), clamped. The
 * window sum is at most 128 * filter_h * filter_w (checked at prepare). */
static void intq_average_pool(const intq_pool_params *p, const int8_t *x, int8_t *y) {
    int32_t n, oy, ox, c, iy, ix;
    for (n = 0; n < p->batch; ++n)
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t ya = y0 < 0 ? 0 : y0, yb = y0 + p->filter_h > p->in_h ? p->in_h : y0 + p->filter_h;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t xa = x0 < 0 ? 0 : x0, xb = x0 + p->filter_w > p->in_w ? p->in_w : x0 + p->filter_w;
                const int32_t count = (yb - ya) * (xb - xa);
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->channels;
                for (c = 0; c < p->channels; ++c) {
                    int32_t acc = 0, q;
                    for (iy = ya; iy < yb; ++iy)
                        for (ix = xa; ix < xb; ++ix)
                            acc += x[(((size_t)n * p->in_h + iy) * p->in_w + ix) * p->channels + c];
                    q = ((acc < 0 ? -acc : acc) + count / 2) / count;
                    out[c] = (int8_t)intq_clamp(acc < 0 ? -q : q, p->act_min, p->act_max);
                }
            }
        }
}

/*@@ intq_mean_params */
/* MEAN (intq.kernels._pool_common QuantizedSumParams): y = clamp(mbqm(sum - Z_in * count, m, shift)
 * + Z_out, -128, 127), 1/count folded into (m, shift) at prepare; |sum - Z_in count| <= 255 count. The
 * input is read as [outer][reduced][inner]-style index sets: the kept and the reduced dimensions,
 * each with its element strides (merged where contiguous at code generation). */
typedef struct {
    int32_t kept_rank, kept_dims[6], kept_strides[6];
    int32_t red_rank, red_dims[6], red_strides[6];
    int32_t input_offset, mult, shift, out_zp;
} intq_mean_params;

/*@@ intq_mean: intq_mean_params intq_mbqm intq_clamp */
static void intq_mean(const intq_mean_params *p, const int8_t *x, int8_t *y) {
    int32_t ki[6] = {0}, ri[6], kbase = 0, out = 0, d;
    for (;;) {
        int32_t acc = 0, rbase = 0;
        for (d = 0; d < p->red_rank; ++d) ri[d] = 0;
        for (;;) {
            int32_t k;
            const int32_t inner = p->red_dims[p->red_rank - 1], s = p->red_strides[p->red_rank - 1];
            for (k = 0; k < inner; ++k) acc += x[kbase + rbase + k * s];
            for (d = p->red_rank - 2; d >= 0; --d) {
                rbase += p->red_strides[d];
                if (++ri[d] < p->red_dims[d]) break;
                rbase -= p->red_strides[d] * p->red_dims[d];
                ri[d] = 0;
            }
            if (d < 0) break;
        }
        y[out++] = (int8_t)intq_clamp(intq_mbqm(acc - p->input_offset, p->mult, p->shift) + p->out_zp, -128, 127);
        for (d = p->kept_rank - 1; d >= 0; --d) {
            kbase += p->kept_strides[d];
            if (++ki[d] < p->kept_dims[d]) break;
            kbase -= p->kept_strides[d] * p->kept_dims[d];
            ki[d] = 0;
        }
        if (d < 0) break;
    }
}
