/* intq C runtime, part 4: BATCH_MATMUL (intq.kernels.batch_matmul), TFLite's BatchMatMul<int8, int32>.
 *
 * Per batch (the batch axes broadcast as an elementwise operator's, one "element" per matrix: the
 * intq_bcast strides count elements of each operand): y[i][j] = clamp(mbqm(sum_k (a[i][k] - Z_a)
 * (b[k][j] - Z_b), m, shift) + Z_y) with a[i][k] at i * a_row + k * a_k and b[k][j] at k * b_k +
 * j * b_col (adj_x / adj_y swap them). |acc| <= depth * 255 * 255 < 2^31 (depth checked at prepare). */

/*@@ intq_matmul_params: intq_bcast */
typedef struct {
    int32_t rows, cols, depth, a_row, a_k, b_k, b_col;
    const intq_bcast *bc;
    int32_t zp_a, zp_b, mult, shift, out_zp, act_min, act_max;
} intq_matmul_params;

/*@@ intq_matmul: intq_matmul_params intq_bcast intq_requant */
static void intq_matmul(const intq_matmul_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#define INTQ_MATMUL_ELEM(n, ia, ib)                                                                  \
    do {                                                                                            \
        const int8_t *am_ = a + (ia), *bm_ = b + (ib);                                              \
        int8_t *ym_ = y + (size_t)(n) * p->rows * p->cols;                                          \
        int32_t r_, c_, k_;                                                                         \
        for (r_ = 0; r_ < p->rows; ++r_)                                                            \
            for (c_ = 0; c_ < p->cols; ++c_) {                                                      \
                int32_t acc_ = 0;                                                                   \
                for (k_ = 0; k_ < p->depth; ++k_)                                                   \
                    acc_ += (am_[r_ * p->a_row + k_ * p->a_k] - p->zp_a) * (bm_[k_ * p->b_k + c_ * p->b_col] - p->zp_b); \
                ym_[r_ * p->cols + c_] = intq_requant(acc_, p->mult, p->shift, p->out_zp, p->act_min, p->act_max); \
            }                                                                                       \
    } while (0)
    INTQ_BROADCAST(p->bc, INTQ_MATMUL_ELEM);
#undef INTQ_MATMUL_ELEM
}
