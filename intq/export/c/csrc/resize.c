/* intq C runtime, part 8: RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR on NHWC int8 images. The
 * source indices and weights of every output row and column are the kernel's prepared ones. */

/*@@ intq_resize_params */
/* RESIZE_BILINEAR (intq.kernels.resize_bilinear, TFLite's ResizeBilinearInteger): per output pixel
 * acc = (x[ylo][xlo] wy_lo + x[yhi][xlo] wy_hi) wx_lo + (x[ylo][xhi] wy_lo + x[yhi][xhi] wy_hi) wx_hi,
 * 10-bit weights per axis (|acc| <= 2^29), y = (acc +- 2^19) / 2^20 truncated (half away from zero),
 * stored as TFLite's static_cast<int8_t> (two's complement wrap, written portably). */
typedef struct {
    int32_t batch, in_h, in_w, channels, out_h, out_w;
    const int32_t *row_lo, *row_hi, *row_w_lo, *row_w_hi;
    const int32_t *col_lo, *col_hi, *col_w_lo, *col_w_hi;
} intq_resize_params;

/*@@ intq_resize_bilinear: intq_resize_params */
static void intq_resize_bilinear(const intq_resize_params *p, const int8_t *x, int8_t *y) {
    int32_t n, oy, ox, c;
    const int32_t row = p->in_w * p->channels;
    for (n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * row;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int8_t *r0 = xb + (size_t)p->row_lo[oy] * row, *r1 = xb + (size_t)p->row_hi[oy] * row;
            const int32_t wy0 = p->row_w_lo[oy], wy1 = p->row_w_hi[oy];
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t c0 = p->col_lo[ox] * p->channels, c1 = p->col_hi[ox] * p->channels;
                const int32_t wx0 = p->col_w_lo[ox], wx1 = p->col_w_hi[ox];
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->channels;
                for (c = 0; c < p->channels; ++c) {
                    const int32_t acc = (r0[c0 + c] * wy0 + r1[c0 + c] * wy1) * wx0
                                      + (r0[c1 + c] * wy0 + r1[c1 + c] * wy1) * wx1;
                    const int32_t q = ((acc < 0 ? -acc : acc) + (1 << 19)) >> 20;
                    const int32_t v = (acc < 0 ? -q : q) & 0xFF;
                    out[c] = (int8_t)(v > 127 ? v - 256 : v);
                }
            }
        }
    }
}

/*@@ intq_nearest_params */
/* RESIZE_NEAREST_NEIGHBOR (intq.kernels.resize_nearest_neighbor): y[n][i][j] = x[n][rows[i]][cols[j]]. */
typedef struct {
    int32_t batch, in_h, in_w, channels, out_h, out_w;
    const int32_t *rows, *cols;
} intq_nearest_params;

/*@@ intq_resize_nearest: intq_nearest_params */
static void intq_resize_nearest(const intq_nearest_params *p, const int8_t *x, int8_t *y) {
    int32_t n, oy, ox, c;
    for (n = 0; n < p->batch; ++n)
        for (oy = 0; oy < p->out_h; ++oy) {
            const int8_t *src_row = x + ((size_t)n * p->in_h + p->rows[oy]) * p->in_w * p->channels;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int8_t *src = src_row + (size_t)p->cols[ox] * p->channels;
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->channels;
                for (c = 0; c < p->channels; ++c) out[c] = src[c];
            }
        }
}
