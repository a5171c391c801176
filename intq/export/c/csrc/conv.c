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
