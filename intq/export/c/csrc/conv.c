/* intq C runtime, part 2: CONV_2D and FULLY_CONNECTED (intq.kernels.conv_2d, fully_connected).
 *
 * acc[o] = offset[o] + sum over taps and channels of x * w, with offset = b - Z_x * sum(w) from the
 * kernel's prepare (the zero-point expansion, Jacob et al. 2.3). A tap outside the image reads Z_x,
 * so its Z_x * w cancels in the offset: the sum equals TFLite's b + sum over in-image taps of
 * (x - Z_x) * w. Every partial sum is bounded by 128 * sum|w| and the total by the |acc| bound
 * the kernel checks at prepare, so no int32 addition overflows. Output channels are computed eight
 * (then four, then one) at a time from weights packed [block][tap][channel][block]
 * (intq.export.c.lower.pack_conv_weights);
 * a FULLY_CONNECTED layer is the 1x1 convolution of its rows. */

/*@@ intq_conv_params */
typedef struct {
    int32_t batch, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t groups;           /* in_c / the weights' channels */
    int32_t in_zp;            /* Z_x: what a tap outside the image reads */
    int32_t out_zp, act_min, act_max;
    const int8_t *w;          /* packed weights */
    const int32_t *offset;    /* b - Z_x * sum(w), per output channel */
    const int32_t *mult;      /* Q0.31 multiplier per output channel */
    const int8_t *shift;      /* per output channel, positive = left */
} intq_conv_params;

/*@@ intq_conv_taps: intq_conv_params */
/* a0..a<B-1> += sum over the window's taps and the group's channels of x * w[k], for the B output
 * channels whose weights start at wp ([tap][channel][B]); a tap outside the image reads Z_x. */
#define INTQ_CONV_TAPS(B, MAC)                                                                   \
    for (i = 0; i < p->kh; ++i) {                                                                \
        const int32_t iy = iy0 + i * p->dil_h;                                                   \
        for (j = 0; j < p->kw; ++j, wp += (B) * cg) {                                            \
            const int32_t ix = ix0 + j * p->dil_w;                                               \
            const int8_t *w = wp;                                                                \
            if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {                            \
                const int32_t v = p->in_zp;                                                      \
                for (c = 0; c < cg; ++c, w += (B)) { MAC }                                       \
            } else {                                                                             \
                const int8_t *xp = xb + ((size_t)iy * p->in_w + ix) * p->in_c + c0;             \
                for (c = 0; c < cg; ++c, w += (B)) { const int32_t v = xp[c]; MAC }              \
            }                                                                                    \
        }                                                                                        \
    }
#define INTQ_MAC8 a0 += v * w[0]; a1 += v * w[1]; a2 += v * w[2]; a3 += v * w[3]; \
                  a4 += v * w[4]; a5 += v * w[5]; a6 += v * w[6]; a7 += v * w[7];
#define INTQ_MAC4 a0 += v * w[0]; a1 += v * w[1]; a2 += v * w[2]; a3 += v * w[3];
#define INTQ_MAC1 a0 += v * w[0];
#define INTQ_CONV_OUT(k, a) \
    out[oc + (k)] = intq_requant((a) + p->offset[oc + (k)], p->mult[oc + (k)], p->shift[oc + (k)], p->out_zp, \
                                 p->act_min, p->act_max)

/*@@ intq_conv: intq_conv_params intq_conv_taps intq_requant */
static void intq_conv(const intq_conv_params *p, const int8_t *x, int8_t *y) {
    const int32_t cg = p->in_c / p->groups, opg = p->out_c / p->groups;
    const int32_t kg = p->kh * p->kw * cg;
    int32_t n, oy, ox, g, o, i, j, c;
    for (n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * p->in_c;
        for (oy = 0; oy < p->out_h; ++oy) {
            const int32_t iy0 = oy * p->stride_h - p->pad_top;
            for (ox = 0; ox < p->out_w; ++ox) {
                const int32_t ix0 = ox * p->stride_w - p->pad_left;
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->out_c;
                for (g = 0; g < p->groups; ++g) {
                    const int8_t *wp = p->w + (size_t)g * opg * kg;
                    const int32_t c0 = g * cg;
                    for (o = 0; o + 8 <= opg; o += 8) {  /* blocks of 8 output channels */
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
                        const int32_t oc = g * opg + o;
                        INTQ_CONV_TAPS(8, INTQ_MAC8)
                        INTQ_CONV_OUT(0, a0); INTQ_CONV_OUT(1, a1); INTQ_CONV_OUT(2, a2); INTQ_CONV_OUT(3, a3);
                        INTQ_CONV_OUT(4, a4); INTQ_CONV_OUT(5, a5); INTQ_CONV_OUT(6, a6); INTQ_CONV_OUT(7, a7);
                    }
                    if (o + 4 <= opg) {  /* then one of 4 */
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                        const int32_t oc = g * opg + o;
                        INTQ_CONV_TAPS(4, INTQ_MAC4)
                        INTQ_CONV_OUT(0, a0); INTQ_CONV_OUT(1, a1); INTQ_CONV_OUT(2, a2); INTQ_CONV_OUT(3, a3);
                        o += 4;
                    }
                    for (; o < opg; ++o) {  /* then one at a time */
                        int32_t a0 = 0;
                        const int32_t oc = g * opg + o;
                        INTQ_CONV_TAPS(1, INTQ_MAC1)
                        INTQ_CONV_OUT(0, a0);
                    }
                }
            }
        }
    }
}

/*@@ intq_conv_pixels: intq_conv */
/* A 1x1 convolution (stride 1, no padding, one group) or a FULLY_CONNECTED layer whose output
 * overwrites its input (the arena plan shares their bytes): pixel (row) q is copied to ``pixel``
 * (in_c bytes) and convolved from there into y + q * out_c. With out_c <= in_c, output q ends at or
 * before input q + 1 starts, so it only overwrites inputs already read. pixel == NULL: the output
 * has its own bytes, intq_conv. */
static void intq_conv_pixels(const intq_conv_params *p, const int8_t *x, int8_t *y, int8_t *pixel) {
    intq_conv_params one;
    int32_t q, c;
    const int32_t pixels = p->batch * p->in_h * p->in_w;
    if (pixel == NULL) { intq_conv(p, x, y); return; }
    one = *p;
    one.batch = one.in_h = one.in_w = one.out_h = one.out_w = 1;
    for (q = 0; q < pixels; ++q) {
        const int8_t *src = x + (size_t)q * p->in_c;
        for (c = 0; c < p->in_c; ++c) pixel[c] = src[c];
        intq_conv(&one, pixel, y + (size_t)q * p->out_c);
    }
}

/*@@ intq_fc_double_params */
typedef struct {
    int32_t rows, in_c, out_c, out_zp, act_min, act_max;
    const int8_t *w;          /* [out_c][in_c] */
    const int32_t *offset;    /* b - Z_x * sum(w), per output channel */
    const int64_t *mant;      /* M = mant * 2^-k per output channel (intq_double_product) */
    const int32_t *k;
} intq_fc_double_params;

/*@@ intq_fc_double: intq_fc_double_params intq_double_product intq_clamp */
/* FULLY_CONNECTED under litert-ref: the same accumulator as intq_conv (offset added last: every
 * partial sum stays within 128 * sum|w|), requantized by LiteRT's reference double product. */
static void intq_fc_double(const intq_fc_double_params *p, const int8_t *x, int8_t *y) {
    int32_t r, o, c;
    for (r = 0; r < p->rows; ++r) {
        const int8_t *xr = x + (size_t)r * p->in_c;
        for (o = 0; o < p->out_c; ++o) {
            const int8_t *w = p->w + (size_t)o * p->in_c;
            int32_t acc = 0;
            for (c = 0; c < p->in_c; ++c) acc += xr[c] * w[c];
            y[(size_t)r * p->out_c + o] = (int8_t)intq_clamp(
                intq_double_product(acc + p->offset[o], (uint64_t)p->mant[o], p->k[o]) + p->out_zp,
                p->act_min, p->act_max);
        }
    }
}

/*@@ intq_transpose_conv_params */
/* TRANSPOSE_CONV (intq.kernels.transpose_conv): input pixel (iy, ix) scatters tap (i, j) into output
 * (iy * stride_h - pad_top + i, ix * stride_w - pad_left + j). Gathered per output pixel and channel:
 * acc = bias + sum over the taps that land there of (tap_offset[tap][o] + sum_c x * w[o][tap][c]),
 * tap_offset = -Z_x * sum_c w from prepare, so each tap adds sum_c (x - Z_x) w and every partial sum
 * stays within the bound checked at prepare (255 * sum|w| + |b|). */
typedef struct {
    int32_t batch, in_h, in_w, in_c, out_h, out_w, out_c, kh, kw, stride_h, stride_w, pad_top, pad_left;
    int32_t out_zp, act_min, act_max;
    const int8_t *w;              /* [C_out][KH][KW][C_in], as in the model */
    const int32_t *tap_offset;    /* [KH][KW][C_out] */
    const int32_t *bias;          /* [C_out] */
    const int32_t *mult;
    const int8_t *shift;
} intq_transpose_conv_params;

/*@@ intq_transpose_conv: intq_transpose_conv_params intq_requant */
static void intq_transpose_conv(const intq_transpose_conv_params *p, const int8_t *x, int8_t *y) {
    int32_t n, oy, ox, o, i, j, c;
    for (n = 0; n < p->batch; ++n)
        for (oy = 0; oy < p->out_h; ++oy)
            for (ox = 0; ox < p->out_w; ++ox) {
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * p->out_c;
                for (o = 0; o < p->out_c; ++o) {
                    int32_t acc = p->bias[o];
                    for (i = 0; i < p->kh; ++i) {
                        const int32_t ty = oy + p->pad_top - i;
                        int32_t iy;
                        if (ty < 0 || ty % p->stride_h) continue;
                        iy = ty / p->stride_h;
                        if (iy >= p->in_h) continue;
                        for (j = 0; j < p->kw; ++j) {
                            const int32_t tx = ox + p->pad_left - j;
                            const int8_t *xp, *wp;
                            int32_t ix, sum;
                            if (tx < 0 || tx % p->stride_w) continue;
                            ix = tx / p->stride_w;
                            if (ix >= p->in_w) continue;
                            xp = x + (((size_t)n * p->in_h + iy) * p->in_w + ix) * p->in_c;
                            wp = p->w + (((size_t)o * p->kh + i) * p->kw + j) * p->in_c;
                            sum = p->tap_offset[(i * p->kw + j) * p->out_c + o];
                            for (c = 0; c < p->in_c; ++c) sum += xp[c] * wp[c];
                            acc += sum;
                        }
                    }
                    out[o] = intq_requant(acc, p->mult[o], p->shift[o], p->out_zp, p->act_min, p->act_max);
                }
            }
}
