/* intq C runtime, part 3: DEPTHWISE_CONV_2D (intq.kernels.depthwise_conv_2d), one channel plane at
 * a time.
 *
 * For each image and input channel c, the plane x[n, :, :, c] is copied into a scratch buffer whose
 * border (the padding) holds Z_x, filled once; output channels c*M + m are then computed from that
 * plane: acc = offset + sum over taps of plane * w, with offset = b - Z_x * sum(w) from prepare (a
 * padding tap contributes Z_x * w, which the offset cancels: TFLite's sum over in-image taps of
 * (x - Z_x) * w). Partial sums stay within 128 * sum|w|, the total within the bound checked at
 * prepare.
 *
 * In place: with M = 1, y may equal x. Writing output channel c of image n only overwrites bytes
 * of channel c of images <= n (the output has no more pixels than the input), which the plane
 * already holds, so the other channels are read intact. The arena plan uses this to drop the
 * output buffer of a depthwise layer whose input dies there. */

/*@@ intq_depthwise_params */
typedef struct {
    int32_t batch, in_h, in_w, in_c, out_h, out_w, mult;
    int32_t kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t plane_h, plane_w;  /* the padded plane: every tap any output reads */
    int32_t in_zp, out_zp, act_min, act_max;
    const int8_t *w;           /* [KH*KW][C*M], as in the model */
    const int32_t *offset;     /* b - Z_x * sum(w), per output channel */
    const int32_t *mult_q;     /* Q0.31 multiplier per output channel */
    const int8_t *shift;       /* positive = left */
} intq_depthwise_params;

/*@@ intq_depthwise: intq_depthwise_params intq_requant */
static void intq_depthwise(const intq_depthwise_params *p, const int8_t *x, int8_t *y, int8_t *plane) {
    const int32_t cm = p->in_c * p->mult, taps = p->kh * p->kw;
    int32_t n, c, m, oy, ox, i, j, r;
    for (r = 0; r < p->plane_h * p->plane_w; ++r) plane[r] = (int8_t)p->in_zp;
    for (n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * p->in_c;
        int8_t *yb = y + (size_t)n * p->out_h * p->out_w * cm;
        for (c = 0; c < p->in_c; ++c) {
            for (i = 0; i < p->in_h; ++i) {
                int8_t *row = plane + (size_t)(i + p->pad_top) * p->plane_w + p->pad_left;
                const int8_t *src = xb + (size_t)i * p->in_w * p->in_c + c;
                for (j = 0; j < p->in_w; ++j) row[j] = src[(size_t)j * p->in_c];
            }
            for (m = 0; m < p->mult; ++m) {
                const int32_t oc = c * p->mult + m;
                const int8_t *w = p->w + oc;
                const int32_t off = p->offset[oc], mq = p->mult_q[oc], lo = p->act_min, hi = p->act_max;
                const int sh = p->shift[oc];
                if (taps == 9 && p->kw == 3 && p->dil_h == 1 && p->dil_w == 1) {
                    /* the common 3x3 window: its nine weights held in locals */
                    const int32_t w0 = w[0], w1 = w[cm], w2 = w[2 * (size_t)cm], w3 = w[3 * (size_t)cm],
                                  w4 = w[4 * (size_t)cm], w5 = w[5 * (size_t)cm], w6 = w[6 * (size_t)cm],
                                  w7 = w[7 * (size_t)cm], w8 = w[8 * (size_t)cm];
                    for (oy = 0; oy < p->out_h; ++oy) {
                        const int8_t *r0 = plane + (size_t)oy * p->stride_h * p->plane_w;
                        const int8_t *r1 = r0 + p->plane_w, *r2 = r1 + p->plane_w;
                        int8_t *out = yb + (size_t)oy * p->out_w * cm + oc;
                        for (ox = 0; ox < p->out_w; ++ox, r0 += p->stride_w, r1 += p->stride_w, r2 += p->stride_w) {
                            const int32_t a = r0[0] * w0 + r0[1] * w1 + r0[2] * w2 + r1[0] * w3 + r1[1] * w4
                                            + r1[2] * w5 + r2[0] * w6 + r2[1] * w7 + r2[2] * w8;
                            out[(size_t)ox * cm] = intq_requant(a + off, mq, sh, p->out_zp, lo, hi);
                        }
                    }
                    continue;
                }
                for (oy = 0; oy < p->out_h; ++oy) {
                    const int8_t *prow = plane + (size_t)oy * p->stride_h * p->plane_w;
                    int8_t *out = yb + (size_t)oy * p->out_w * cm + oc;
                    for (ox = 0; ox < p->out_w; ++ox) {
                        const int8_t *pp = prow + (size_t)ox * p->stride_w;
                        int32_t a = 0, t = 0;
                        for (i = 0; i < p->kh; ++i) {
                            const int8_t *pr = pp + (size_t)i * p->dil_h * p->plane_w;
                            for (j = 0; j < p->kw; ++j, ++t) a += pr[j * p->dil_w] * w[(size_t)t * cm];
                        }
                        out[(size_t)ox * cm] = intq_requant(a + off, mq, sh, p->out_zp, lo, hi);
                    }
                }
            }
        }
    }
}
