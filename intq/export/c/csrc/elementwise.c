/* intq C runtime, part 4: elementwise operators.
 *
 * Unary int8 operators whose output depends on one int8 (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU,
 * RELU*, int8 QUANTIZE) are one 256-entry table each, computed by the intq kernel itself on every
 * int8 code (intq.export.c.lower), indexed by the byte's bits. Binary operators broadcast as numpy
 * (and TFLite) do: the shapes are merged and padded to INTQ_MAX_RANK at code generation, a
 * broadcast dimension has stride 0. All run in place (y may equal an input of the same shape). */

/*@@ intq_lut */
static void intq_lut(const int8_t *table, int32_t n, const int8_t *x, int8_t *y) {
    int32_t i;
    for (i = 0; i < n; ++i) y[i] = table[(uint8_t)x[i]];
}

/*@@ intq_bcast */
#define INTQ_MAX_RANK 6
/* Output dims (row-major, innermost last) and each input's element strides (0: broadcast). */
typedef struct {
    int32_t rank, dims[INTQ_MAX_RANK], sa[INTQ_MAX_RANK], sb[INTQ_MAX_RANK];
} intq_bcast;
/* Visit the output in order: ELEM(i, ia, ib) with the output index i and the inputs' offsets. */
#define INTQ_BROADCAST(bc, ELEM)                                                              \
    do {                                                                                      \
        int32_t idx_[INTQ_MAX_RANK] = {0}, i_ = 0, ia_ = 0, ib_ = 0, d_, k_;                  \
        const int32_t inner_ = (bc)->dims[(bc)->rank - 1];                                     \
        const int32_t sai_ = (bc)->sa[(bc)->rank - 1], sbi_ = (bc)->sb[(bc)->rank - 1];        \
        for (;;) {                                                                            \
            for (k_ = 0; k_ < inner_; ++k_, ++i_) ELEM(i_, ia_ + k_ * sai_, ib_ + k_ * sbi_); \
            for (d_ = (bc)->rank - 2; d_ >= 0; --d_) {                                         \
                ia_ += (bc)->sa[d_]; ib_ += (bc)->sb[d_];                                      \
                if (++idx_[d_] < (bc)->dims[d_]) break;                                        \
                ia_ -= (bc)->sa[d_] * (bc)->dims[d_]; ib_ -= (bc)->sb[d_] * (bc)->dims[d_];    \
                idx_[d_] = 0;                                                                  \
            }                                                                                 \
            if (d_ < 0) break;                                                                \
        }                                                                                     \
    } while (0)

/*@@ intq_add_params: intq_bcast */
/* ADD and SUB (intq.kernels.add AddParams): y = clamp(mbqm(table_a[a] + table_b[b], m, shift) + Z_y);
 * table_x[x] = R_x((x - Z_x) << 20) from prepare (SUB: table_b negated), |sum| < 2^28. */
typedef struct {
    int32_t n;                   /* output elements */
    const intq_bcast *bc;        /* NULL: equal shapes */
    const int32_t *table_a, *table_b;
    int32_t mult, shift, out_zp, act_min, act_max;
} intq_add_params;

/*@@ intq_add: intq_add_params intq_bcast intq_requant */
static void intq_add(const intq_add_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#define INTQ_ADD_ELEM(i, ia, ib) \
    y[i] = intq_requant(p->table_a[(uint8_t)a[ia]] + p->table_b[(uint8_t)b[ib]], p->mult, p->shift, p->out_zp, p->act_min, p->act_max)
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_ADD_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_ADD_ELEM);
    }
#undef INTQ_ADD_ELEM
}

/*@@ intq_mul_params: intq_bcast */
/* MUL (intq.kernels.mul MulParams): y = clamp(mbqm((a - Z_a)(b - Z_b), m, shift) + Z_y), |product| <= 65025. */
typedef struct {
    int32_t n;
    const intq_bcast *bc;
    int32_t zp_a, zp_b, mult, shift, out_zp, act_min, act_max;
} intq_mul_params;

/*@@ intq_mul: intq_mul_params intq_bcast intq_requant */
static void intq_mul(const intq_mul_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#define INTQ_MUL_ELEM(i, ia, ib) \
    y[i] = intq_requant((a[ia] - p->zp_a) * (b[ib] - p->zp_b), p->mult, p->shift, p->out_zp, p->act_min, p->act_max)
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_MUL_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_MUL_ELEM);
    }
#undef INTQ_MUL_ELEM
}

/*@@ intq_minmax_params: intq_bcast */
/* MAXIMUM / MINIMUM: the stored integers compared (same parameters in and out, spec 003). */
typedef struct {
    int32_t n;
    const intq_bcast *bc;
    int32_t maximum;             /* 1: MAXIMUM, 0: MINIMUM */
} intq_minmax_params;

/*@@ intq_minmax: intq_minmax_params intq_bcast */
static void intq_minmax(const intq_minmax_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#define INTQ_MINMAX_ELEM(i, ia, ib) \
    y[i] = (p->maximum ? (a[ia] > b[ib]) : (a[ia] < b[ib])) ? a[ia] : b[ib]
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_MINMAX_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_MINMAX_ELEM);
    }
#undef INTQ_MINMAX_ELEM
}
