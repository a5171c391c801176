/* intq C runtime, part 4: elementwise operators.
 *
 * Unary int8 operators whose output depends on one int8 (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU,
 * RELU*, int8 QUANTIZE) are one 256-entry table each, computed by the intq kernel itself on every
 * int8 code (intq.export.c.lower), indexed by the byte's bits. Binary operators broadcast as numpy
 * (and TFLite) do: the shapes are merged and padded to INTQ_MAX_RANK at code generation, a
 * broadcast dimension has stride 0. All run in place (y may equal an input of the same shape).
 * Comparisons write bool bytes (0/1); SELECT_V2 copies elements of any size; PRELU and RSQRT's
 * checked table follow. */

/*@@ intq_lut */
/* y = table[x] on bytes: int8 or uint8 in and out (the table holds the output's bytes). */
static void intq_lut(const uint8_t *table, int32_t n, const void *x_v, void *y_v) {
    const uint8_t *x = (const uint8_t *)x_v;
    uint8_t *y = (uint8_t *)y_v;
    int32_t i;
    for (i = 0; i < n; ++i) y[i] = table[x[i]];
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

/*@@ intq_sqdiff_params: intq_bcast */
/* SQUARED_DIFFERENCE (intq.kernels.squared_difference SquaredDifferenceParams): y = clamp(mbqm(d * d, m,
 * shift) + Z_y), d = table_a[a] - table_b[b], table_x[x] = R_x((x - Z_x) << 7) from prepare; |d| <= 32640,
 * d * d < 2^30, and a left shift only where prepare proved the shifted square fits int32. */
typedef struct {
    int32_t n;
    const intq_bcast *bc;
    const int32_t *table_a, *table_b;
    int32_t mult, shift, out_zp, act_min, act_max;
} intq_sqdiff_params;

/*@@ intq_sqdiff: intq_sqdiff_params intq_bcast intq_requant */
static void intq_sqdiff(const intq_sqdiff_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#define INTQ_SQDIFF_ELEM(i, ia, ib)                                                             \
    do {                                                                                        \
        const int32_t d_ = p->table_a[(uint8_t)a[ia]] - p->table_b[(uint8_t)b[ib]];            \
        y[i] = intq_requant(d_ * d_, p->mult, p->shift, p->out_zp, p->act_min, p->act_max);     \
    } while (0)
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_SQDIFF_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_SQDIFF_ELEM);
    }
#undef INTQ_SQDIFF_ELEM
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

/*@@ intq_lut_checked */
/* RSQRT (intq.kernels.rsqrt): y = table[x], but an input below `min` (a negative real value) fails
 * the invocation as both runtimes do: returns `status` before writing anything. */
static int intq_lut_checked(const int8_t *table, int32_t n, int32_t min, int status, const int8_t *x, int8_t *y) {
    int32_t i;
    for (i = 0; i < n; ++i) if (x[i] < min) return status;
    for (i = 0; i < n; ++i) y[i] = table[(uint8_t)x[i]];
    return 0;
}

/*@@ intq_minmax16: intq_minmax_params intq_bcast */
/* 16x8 MAXIMUM / MINIMUM: intq_minmax on int16 values (one scale in and out, zero point 0). */
static void intq_minmax16(const intq_minmax_params *p, const int16_t *a, const int16_t *b, int16_t *y) {
#define INTQ_MINMAX16_ELEM(i, ia, ib) \
    y[i] = (p->maximum ? (a[ia] > b[ib]) : (a[ia] < b[ib])) ? a[ia] : b[ib]
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_MINMAX16_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_MINMAX16_ELEM);
    }
#undef INTQ_MINMAX16_ELEM
}

/*@@ intq_lut16_checked */
/* 16x8 RSQRT (intq.kernels.rsqrt, either target): y = table[x] for x >= 0, the table the kernel's own
 * run on the 32768 non-negative int16 codes; a negative input fails the invocation as both runtimes
 * do: returns `status` before writing anything. */
static int intq_lut16_checked(const int16_t *table, int32_t n, int status, const int16_t *x, int16_t *y) {
    int32_t i;
    for (i = 0; i < n; ++i) if (x[i] < 0) return status;
    for (i = 0; i < n; ++i) y[i] = table[x[i]];
    return 0;
}

/*@@ intq_compare_params: intq_bcast */
/* EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL (intq.kernels._elementwise_common
 * ComparisonParams): relation(table_a[a], table_b[b]) on the int32 values TFLite compares, each
 * operand's R((x - Z) << 8) tabulated at prepare; the bool output is one byte, 0 or 1. */
typedef struct {
    int32_t n;
    const intq_bcast *bc;
    const int32_t *table_a, *table_b;
    int32_t relation;            /* 0 ==, 1 !=, 2 <, 3 <=, 4 >, 5 >= */
} intq_compare_params;

/*@@ intq_relation */
static inline uint8_t intq_relation(int32_t relation, int32_t a, int32_t b) {
    switch (relation) {
    case 0: return (uint8_t)(a == b);
    case 1: return (uint8_t)(a != b);
    case 2: return (uint8_t)(a < b);
    case 3: return (uint8_t)(a <= b);
    case 4: return (uint8_t)(a > b);
    default: return (uint8_t)(a >= b);
    }
}

/*@@ intq_compare: intq_compare_params intq_bcast intq_relation */
static void intq_compare(const intq_compare_params *p, const int8_t *a, const int8_t *b, uint8_t *y) {
#define INTQ_COMPARE_ELEM(i, ia, ib) y[i] = intq_relation(p->relation, p->table_a[(uint8_t)a[ia]], p->table_b[(uint8_t)b[ib]])
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_COMPARE_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_COMPARE_ELEM);
    }
#undef INTQ_COMPARE_ELEM
}

/*@@ intq_bcast3: intq_bcast */
/* Three operands broadcast to the output (SELECT_V2): output dims and each operand's element strides. */
typedef struct {
    int32_t rank, dims[INTQ_MAX_RANK], sa[INTQ_MAX_RANK], sb[INTQ_MAX_RANK], sc[INTQ_MAX_RANK];
} intq_bcast3;

/*@@ intq_select_params: intq_bcast3 */
/* SELECT_V2 (intq.kernels.select_v2): y = cond ? x : y elementwise, elements of `size` bytes copied. */
typedef struct {
    int32_t n;
    const intq_bcast3 *bc;       /* NULL: equal shapes */
    int32_t size;
} intq_select_params;

/*@@ intq_select: intq_select_params intq_bcast3 */
static void intq_select(const intq_select_params *p, const uint8_t *c, const void *a_v, const void *b_v, void *y_v) {
    const uint8_t *a = (const uint8_t *)a_v, *b = (const uint8_t *)b_v;
    uint8_t *y = (uint8_t *)y_v;
    const int32_t sz = p->size;
    int32_t k;
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i)
            for (k = 0; k < sz; ++k) y[(size_t)i * sz + k] = c[i] ? a[(size_t)i * sz + k] : b[(size_t)i * sz + k];
    } else {
        const intq_bcast3 *bc = p->bc;
        int32_t idx[INTQ_MAX_RANK] = {0}, i = 0, ic = 0, ia = 0, ib = 0, d, j;
        const int32_t inner = bc->dims[bc->rank - 1];
        const int32_t sci = bc->sa[bc->rank - 1], sai = bc->sb[bc->rank - 1], sbi = bc->sc[bc->rank - 1];
        for (;;) {
            for (j = 0; j < inner; ++j, ++i) {
                const uint8_t *src = c[ic + j * sci] ? a + (size_t)(ia + j * sai) * sz : b + (size_t)(ib + j * sbi) * sz;
                for (k = 0; k < sz; ++k) y[(size_t)i * sz + k] = src[k];
            }
            for (d = bc->rank - 2; d >= 0; --d) {
                ic += bc->sa[d]; ia += bc->sb[d]; ib += bc->sc[d];
                if (++idx[d] < bc->dims[d]) break;
                ic -= bc->sa[d] * bc->dims[d]; ia -= bc->sb[d] * bc->dims[d]; ib -= bc->sc[d] * bc->dims[d];
                idx[d] = 0;
            }
            if (d < 0) break;
        }
    }
}

/*@@ intq_prelu_params: intq_bcast */
/* PRELU (intq.kernels.prelu PreluParams): v = x - Z_in; y = clamp(Z_out + (v >= 0 ? mbqm(v, m_pos, s_pos)
 * : mbqm(v * (alpha - Z_alpha), m_neg, s_neg)), -128, 127); |v| <= 255 and |v (alpha - Z_alpha)| <=
 * 65025, and prepare bounds the left shifts (22 and 15 bits) so that int32 holds them. */
typedef struct {
    int32_t n;
    const intq_bcast *bc;        /* x has the output's shape (sa); alpha broadcasts (sb) */
    int32_t zp_in, zp_alpha, zp_out, mult_pos, shift_pos, mult_neg, shift_neg;
} intq_prelu_params;

/*@@ intq_prelu: intq_prelu_params intq_bcast intq_mbqm intq_clamp */
static void intq_prelu(const intq_prelu_params *p, const int8_t *x, const int8_t *alpha, int8_t *y) {
#define INTQ_PRELU_ELEM(i, ia, ib)                                                                    \
    do {                                                                                            \
        const int32_t v_ = x[ia] - p->zp_in;                                                        \
        const int32_t r_ = v_ >= 0 ? intq_mbqm(v_, p->mult_pos, p->shift_pos)                       \
                                   : intq_mbqm(v_ * (alpha[ib] - p->zp_alpha), p->mult_neg, p->shift_neg); \
        y[i] = (int8_t)intq_clamp(r_ + p->zp_out, -128, 127);                                       \
    } while (0)
    if (p->bc == NULL) {
        int32_t i;
        for (i = 0; i < p->n; ++i) INTQ_PRELU_ELEM(i, i, i);
    } else {
        INTQ_BROADCAST(p->bc, INTQ_PRELU_ELEM);
    }
#undef INTQ_PRELU_ELEM
}
