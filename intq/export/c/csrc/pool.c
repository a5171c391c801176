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

/*@@ intq_reduce_box */
/* A reduction's input read as two index sets: the kept dimensions (in output order) and the reduced
 * ones, each with its element strides (merged where contiguous at code generation; rank 0 kept: one
 * output). INTQ_REDUCE(box, BEGIN, STEP(offset), END(out)) visits every output in order: BEGIN, then
 * STEP on each input element of its reduced set, then END with the output's index. */
typedef struct {
    int32_t kept_rank, kept_dims[6], kept_strides[6];
    int32_t red_rank, red_dims[6], red_strides[6];
} intq_reduce_box;
#define INTQ_REDUCE(box, BEGIN, STEP, END)                                                           \
    do {                                                                                             \
        int32_t ki_[6] = {0}, ri_[6], kbase_ = 0, out_ = 0, d_;                                      \
        for (;;) {                                                                                   \
            int32_t rbase_ = 0;                                                                      \
            BEGIN                                                                                    \
            for (d_ = 0; d_ < (box)->red_rank; ++d_) ri_[d_] = 0;                                     \
            for (;;) {                                                                               \
                int32_t k_;                                                                          \
                const int32_t inner_ = (box)->red_dims[(box)->red_rank - 1];                         \
                const int32_t s_ = (box)->red_strides[(box)->red_rank - 1];                          \
                for (k_ = 0; k_ < inner_; ++k_) { STEP(kbase_ + rbase_ + k_ * s_) }                  \
                for (d_ = (box)->red_rank - 2; d_ >= 0; --d_) {                                       \
                    rbase_ += (box)->red_strides[d_];                                                \
                    if (++ri_[d_] < (box)->red_dims[d_]) break;                                      \
                    rbase_ -= (box)->red_strides[d_] * (box)->red_dims[d_];                          \
                    ri_[d_] = 0;                                                                     \
                }                                                                                    \
                if (d_ < 0) break;                                                                   \
            }                                                                                        \
            END(out_)                                                                                \
            ++out_;                                                                                  \
            for (d_ = (box)->kept_rank - 1; d_ >= 0; --d_) {                                         \
                kbase_ += (box)->kept_strides[d_];                                                   \
                if (++ki_[d_] < (box)->kept_dims[d_]) break;                                         \
                kbase_ -= (box)->kept_strides[d_] * (box)->kept_dims[d_];                            \
                ki_[d_] = 0;                                                                         \
            }                                                                                        \
            if (d_ < 0) break;                                                                       \
        }                                                                                            \
    } while (0)

/*@@ intq_mean_params: intq_reduce_box */
/* MEAN and SUM (intq.kernels._pool_common QuantizedSumParams): y = clamp(mbqm(sum - Z_in * count, m,
 * shift) + Z_out, -128, 127), MEAN's 1/count folded into (m, shift) at prepare; |sum - Z_in count| <=
 * 255 count. as_uint8: LiteRT 2.3's reference SUM reads the bytes as uint8 and clamps to [0, 255]
 * (target litert-ref; intq.kernels.sum). */
typedef struct {
    intq_reduce_box box;
    int32_t input_offset, mult, shift, out_zp, as_uint8;
} intq_mean_params;

/*@@ intq_mean: intq_mean_params intq_mbqm intq_clamp */
static void intq_mean(const intq_mean_params *p, const int8_t *x, int8_t *y) {
    int32_t acc = 0;
#define INTQ_MEAN_BEGIN acc = 0;
#define INTQ_MEAN_STEP(at) acc += p->as_uint8 ? (int32_t)(uint8_t)x[at] : (int32_t)x[at];
#define INTQ_MEAN_END(o)                                                                           \
    {                                                                                              \
        const int32_t v_ = intq_mbqm(acc - p->input_offset, p->mult, p->shift) + p->out_zp;        \
        if (p->as_uint8) {                                                                         \
            const int32_t u_ = intq_clamp(v_, 0, 255);                                             \
            y[o] = (int8_t)(u_ > 127 ? u_ - 256 : u_);                                             \
        } else {                                                                                   \
            y[o] = (int8_t)intq_clamp(v_, -128, 127);                                              \
        }                                                                                          \
    }
    INTQ_REDUCE(&p->box, INTQ_MEAN_BEGIN, INTQ_MEAN_STEP, INTQ_MEAN_END);
#undef INTQ_MEAN_BEGIN
#undef INTQ_MEAN_STEP
#undef INTQ_MEAN_END
}

/*@@ intq_extremum_params: intq_reduce_box */
/* REDUCE_MAX / REDUCE_MIN, ARG_MAX / ARG_MIN: the extremum of the stored integers (same parameters in
 * and out), or its first index along the one reduced dimension (strictly greater / smaller replaces:
 * ties keep the first index, as TFLite's ArgMinMax). */
typedef struct {
    intq_reduce_box box;
    int32_t maximum;             /* 1: MAX, 0: MIN */
} intq_extremum_params;

/*@@ intq_reduce_extremum: intq_extremum_params */
static void intq_reduce_extremum(const intq_extremum_params *p, const int8_t *x, int8_t *y) {
    int32_t best = 0;
#define INTQ_EXT_BEGIN best = p->maximum ? -128 : 127;
#define INTQ_EXT_STEP(at) if (p->maximum ? x[at] > best : x[at] < best) best = x[at];
#define INTQ_EXT_END(o) y[o] = (int8_t)best;
    INTQ_REDUCE(&p->box, INTQ_EXT_BEGIN, INTQ_EXT_STEP, INTQ_EXT_END);
#undef INTQ_EXT_BEGIN
#undef INTQ_EXT_STEP
#undef INTQ_EXT_END
}

/*@@ intq_arg_extremum: intq_extremum_params */
#define INTQ_ARG_BEGIN best = x[kbase_]; at_ = 0; index = 0;
#define INTQ_ARG_STEP(at)                                                                          \
    if (p->maximum ? x[at] > best : x[at] < best) { best = x[at]; index = at_; }                   \
    ++at_;

/*@@ intq_arg_extremum32: intq_arg_extremum */
static void intq_arg_extremum32(const intq_extremum_params *p, const int8_t *x, int32_t *y) {
    int32_t best = 0, at_ = 0, index = 0;
#define INTQ_ARG_END(o) y[o] = index;
    INTQ_REDUCE(&p->box, INTQ_ARG_BEGIN, INTQ_ARG_STEP, INTQ_ARG_END);
#undef INTQ_ARG_END
}

/*@@ intq_arg_extremum64: intq_arg_extremum */
static void intq_arg_extremum64(const intq_extremum_params *p, const int8_t *x, int64_t *y) {
    int32_t best = 0, at_ = 0, index = 0;
#define INTQ_ARG_END(o) y[o] = (int64_t)index;
    INTQ_REDUCE(&p->box, INTQ_ARG_BEGIN, INTQ_ARG_STEP, INTQ_ARG_END);
#undef INTQ_ARG_END
}
