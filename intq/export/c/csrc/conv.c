/* intq C runtime, part 2: CONV_2D and FULLY_CONNECTED (intq.kernels.conv_2d, fully_connected).
 *
 * acc[o] = offset[o] + sum over taps and channels of x * w, with offset = b - Z_x * sum(w) from the
 * kernel's prepare (the zero-point expansion, Jacob et al. 2.3). A tap outside the image reads Z_x,
 * so its Z_x * w cancels in the offset: the sum equals TFLite's b + sum over in-image taps of
 * (x - Z_x) * w. Every partial sum is bounded by 128 * sum|w| and the total by the |acc| bound
 * the kernel checks at prepare, so no int32 addition overflows. Output channels are computed four
 * at a time from weights packed [block][tap][channel][4] (intq.export.c.lower.pack_conv_weights);
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

/*@@ intq_conv: intq_conv_params intq_requant */
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
                    const int8_t *wg = p->w + (size_t)g * opg * kg;
                    const int32_t c0 = g * cg;
                    for (o = 0; o + 4 <= opg; o += 4) {
                        const int8_t *wp = wg + (size_t)o * kg;
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                        const int32_t oc = g * opg + o;
                        for (i = 0; i < p->kh; ++i) {
                            const int32_t iy = iy0 + i * p->dil_h;
                            for (j = 0; j < p->kw; ++j, wp += 4 * cg) {
                                const int32_t ix = ix0 + j * p->dil_w;
                                if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                                    const int32_t v = p->in_zp;
                                    for (c = 0; c < cg; ++c) {
                                        a0 += v * wp[4 * c]; a1 += v * wp[4 * c + 1];
                                        a2 += v * wp[4 * c + 2]; a3 += v * wp[4 * c + 3];
                                    }
                                } else {
                                    const int8_t *xp = xb + ((size_t)iy * p->in_w + ix) * p->in_c + c0;
                                    for (c = 0; c < cg; ++c) {
                                        const int32_t v = xp[c];
                                        a0 += v * wp[4 * c]; a1 += v * wp[4 * c + 1];
                                        a2 += v * wp[4 * c + 2]; a3 += v * wp[4 * c + 3];
                                    }
                                }
                            }
                        }
                        out[oc] = intq_requant(a0 + p->offset[oc], p->mult[oc], p->shift[oc], p->out_zp, p->act_min, p->act_max);
                        out[oc + 1] = intq_requant(a1 + p->offset[oc + 1], p->mult[oc + 1], p->shift[oc + 1], p->out_zp, p->act_min, p->act_max);
                        out[oc + 2] = intq_requant(a2 + p->offset[oc + 2], p->mult[oc + 2], p->shift[oc + 2], p->out_zp, p->act_min, p->act_max);
                        out[oc + 3] = intq_requant(a3 + p->offset[oc + 3], p->mult[oc + 3], p->shift[oc + 3], p->out_zp, p->act_min, p->act_max);
                    }
                    for (; o < opg; ++o) {
                        const int8_t *wp = wg + (size_t)o * kg;
                        int32_t a = 0;
                        const int32_t oc = g * opg + o;
                        for (i = 0; i < p->kh; ++i) {
                            const int32_t iy = iy0 + i * p->dil_h;
                            for (j = 0; j < p->kw; ++j, wp += cg) {
                                const int32_t ix = ix0 + j * p->dil_w;
                                if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                                    for (c = 0; c < cg; ++c) a += p->in_zp * wp[c];
                                } else {
                                    const int8_t *xp = xb + ((size_t)iy * p->in_w + ix) * p->in_c + c0;
                                    for (c = 0; c < cg; ++c) a += xp[c] * wp[c];
                                }
                            }
                        }
                        out[oc] = intq_requant(a + p->offset[oc], p->mult[oc], p->shift[oc], p->out_zp, p->act_min, p->act_max);
                    }
                }
            }
        }
    }
}
