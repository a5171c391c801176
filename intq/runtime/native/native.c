/* intq's native run paths: the interpreter's hottest integer kernels compiled for the host CPU.
 *
 * Compiled on first use by intq.runtime.native (the system C compiler, -O3 and the -m flags of the
 * CPU's features) and called through ctypes by the execution plan in place of the kernels'
 * numpy/numba run paths. Integer arithmetic only: no float or double appears in this file
 * (tests/kernels/test_integer_only.py checks it). Every function computes exactly what the kernel
 * it stands for computes (tests/runtime/test_native.py requires equality, on every path):
 *
 *   intq_conv       CONV_2D and FULLY_CONNECTED (intq.kernels.conv_2d, fully_connected): im2col of a
 *                   block of output pixels, an int8 x int8 -> int32 product, the requantization —
 *                   one pass per block, no int32 tensor in memory;
 *   intq_depthwise  DEPTHWISE_CONV_2D with depth multiplier 1 (intq.kernels.depthwise_conv_2d);
 *   intq_requant    the fused requantization alone (intq.qmath.compiled.requantize_rows_double_right);
 *   intq_batch_matmul  BATCH_MATMUL of two activations (intq.kernels.batch_matmul);
 *   intq_softmax    SOFTMAX int8 over the last axis (intq.kernels.softmax);
 *   intq_mul, intq_add (ADD, SUB, SQUARED_DIFFERENCE), intq_max_pool, intq_transpose, intq_pad, intq_mean,
 *   intq_lut (one table), intq_lut_channels (one table per channel: PRELU) — see each.
 *
 * Accumulators. acc = offset[o] + sum over taps of x * w with offset = b - Z_x * sum(w) (the
 * zero-point expansion, Jacob et al. 2.3): a tap outside the image reads Z_x, whose Z_x * w the
 * offset cancels, so the sum equals TFLite's b + sum over in-image taps of (x - Z_x) * w. The
 * kernels' prepare checks |acc| <= 255 sum|w| + |b| < 2^31, and every partial sum here is bounded
 * by the same quantity, so int32 additions are exact (the dot-product instructions add without
 * saturation: an intermediate wrap would still leave the exact final sum). Each product
 * instruction is exact on its operands:
 *   AMX TDPBSSD, NEON SDOT: int8 x int8 summed four at a time into int32;
 *   VPDPBUSD (AVX-512 VNNI, and AVX-VNNI's 256-bit VEX form): uint8 x int8, four at a time into
 *     int32 without saturation — the activations are read as x + 128 (int8 bits xor 0x80) and the
 *     offset holds - 128 * sum(w) more;
 *   VPMADDWD (AVX2, and VPDPWSSD): int16 x int16 pairs summed into int32 — the operands are int8
 *     values sign-extended to int16, so each pair sum is at most 2 * 128 * 128 = 2^15 in magnitude
 *     (the instruction's one overflow, -2^15 * -2^15 twice, needs int16 operands int8 never gives);
 *   NEON SMULL (int8 x int8 -> int16, |x w| <= 2^14) then SADALP (pairs added into int32);
 *   VPMADDUBSW (uint8 x int8 pairs summed in int16 *with saturation*) is not used: x + 128 <= 255
 *     times |w| <= 127, twice, reaches 64770 > 32767 (what onnxruntime's AVX2 U8S8 kernel does).
 *
 * Requantization (gemmlowp's MultiplyByQuantizedMultiplier with no left shift, i.e. every real
 * multiplier below 1; the caller falls back otherwise): h = SRDHM(x, m) = (x * m + 2^30) >> 31 in
 * 64 bits (m in [0, 2^31): the saturating case INT32_MIN * INT32_MIN cannot occur), then gemmlowp's
 * RoundingDivideByPOT in 32 bits, r = (h >> e) + ((h & mask) > (mask >> 1) + (away & (h < 0))),
 * mask = 2^e - 1: ties away from zero with away = 1 (Requant.DOUBLE), up with away = 0
 * (Requant.DOUBLE_HALF_UP); then + Z_y, clamped to [act_min, act_max]. Per output channel: m, e,
 * away, offset (arrays padded to the channel block). rq_scalar is the one definition; the vector
 * forms (v_rq, below: AVX-512, AVX2, NEON) compute the same integers lane by lane; rq_shl_scalar and
 * v_rq_shl take a left shift first (MUL, MEAN, TFLM's SQUARED_DIFFERENCE: a real multiplier of 1 or
 * more).
 *
 * Every rounding body of this file is marked "@rule NAME" and named in one table,
 * intq.runtime.native.rules.NATIVE_RULES, with the intq rule it computes; intq_rule runs each on
 * arrays, and tests/runtime/test_native_rules.py compares it with that rule bit for bit, on every
 * build (the vector forms of each instruction set, the portable scalar one).
 *
 * Paths. The build holds the vector code of the features it was compiled for (intq.runtime.native
 * compiles one library per capped feature set: INTQ_NATIVE_PATH=avx2 builds without AVX-512, ...).
 * Every kernel uses the widest vectors of its build; the matrix product (CONV_2D, FULLY_CONNECTED)
 * has one routine per instruction set, chosen at run time among those the build and the CPU have
 * (intq_native_init; intq.runtime.native measures them on first use):
 *   PATH_AMX      AMX tiles (TDPBSSD), im2col blocks of 32 rows, or straight from the input;
 *   PATH_VNNI     AVX-512 VNNI (VPDPBUSD on zmm), 4 rows x 32 channels per step;
 *   PATH_AVXVNNI  AVX-VNNI (VPDPBUSD on ymm, VEX), 4 rows x 16 channels;
 *   PATH_AVX2     AVX2 (VPMADDWD on int16 operands), 4 rows x 16 channels;
 *   PATH_DOTPROD  ARMv8.2 dot product (SDOT by element), 4 rows x 16 channels;
 *   PATH_NEON     ARMv8 NEON (SMULL + SADALP), 2 rows x 16 channels;
 *   PATH_C        portable C (the compiler vectorizes what it can).
 * Weights are packed once for all but AVX2: [n/16][kp/4][16][4] int8 (four consecutive K values of
 * one channel are one 32-bit lane), K padded to 64 and channels to 32 with zeros; AVX2 multiplies
 * int16, packed [n/8][kp/2][8][2] (intq_pack16).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define INTQ_NEON 1
#if defined(__ARM_FEATURE_DOTPROD)
#define INTQ_DOTPROD 1
#endif
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define INTQ_AVX512 1
#endif
#if defined(INTQ_AVX512) && defined(__AVX512VNNI__)
#define INTQ_VNNI 1
#endif
#if defined(INTQ_AVX512) && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__)
#define INTQ_AMX 1
#endif
#if defined(__AVX2__)
#define INTQ_AVX2 1
#endif
#if defined(INTQ_AVX2) && defined(__AVXVNNI__)
#define INTQ_AVXVNNI 1
#endif

/* The matrix-product paths (intq.runtime.native.PATHS has the same numbers); the best of a build is
 * its highest available number (x86 and ARM never share a build). */
enum { PATH_C = 0, PATH_AVX2 = 1, PATH_AVXVNNI = 2, PATH_VNNI = 3, PATH_AMX = 4, PATH_NEON = 5, PATH_DOTPROD = 6 };
static int intq_path = PATH_C;

#define MB 32 /* output pixels per block: two AMX tiles of 16 rows */

/* ------------------------------------------------------------------------------ requantization */

/*@rule rq_scalar */
static inline int32_t rq_scalar(int32_t x, int32_t m, int32_t e, int32_t away, int32_t zp, int32_t lo, int32_t hi) {
    const int32_t h = (int32_t)(((int64_t)x * m + ((int64_t)1 << 30)) >> 31);
    const int32_t mask = (int32_t)((((uint32_t)1) << e) - 1u);
    const int32_t threshold = (mask >> 1) + (away & (h < 0));
    int32_t y = (h >> e) + ((h & mask) > threshold) + zp;
    return y < lo ? lo : (y > hi ? hi : y);
}

/*@rule rq_shl_scalar: rq_scalar of x << left (left in [0, 31], x << left within int32: the callers' bound) */
static inline int32_t rq_shl_scalar(int32_t x, int32_t left, int32_t m, int32_t e, int32_t away, int32_t zp, int32_t lo,
                                    int32_t hi) {
    return rq_scalar((int32_t)((uint32_t)x << left), m, e, away, zp, lo, hi);
}

typedef struct {
    const int32_t *offset; /* per channel, padded to a multiple of 32 */
    const int32_t *mult;
    const int32_t *exponent; /* right shift e >= 0 */
    const int32_t *away;     /* 1: ties away from zero (DOUBLE), 0: up (DOUBLE_HALF_UP) */
    int32_t out_zp, act_min, act_max;
} intq_rq;

/* ------------------------------------------------------------------------------ vector layer
 *
 * VL lanes of int32 (vi32): 16 on AVX-512, 8 on AVX2, 4 on NEON; none on other builds (their kernels
 * keep the scalar loops). vvalid says which lanes of a partial block are in use (loads read nothing
 * beyond them, stores write nothing beyond them). The kernels below are written once on this layer.
 *
 *   v_load_i8 / v_load_i8n   VL (n) int8 sign-extended to int32 lanes (n: zeros beyond)
 *   v_store_i8n              n lanes (values already in [-128, 127]) as int8
 *   v_madd16(acc, x, w)      acc + x * w: x an int8 value sign-extended, w an int32 lane holding an
 *                            int16 in its low half and 0 above (w & 0xFFFF): VPMADDWD / VPDPWSSD on
 *                            the pairs (x, sign) . (w, 0); NEON recovers the int16 and multiplies
 *   v_gather(table, idx, n)  table[idx] for the lanes in use
 *   v_rq(acc, rq_vec)        rq_scalar lane by lane (the vectors of rq_vec_load: one block of channels)
 */
#if defined(INTQ_AVX512)
#define VL 16
typedef __m512i vi32;
typedef __mmask16 vvalid;
static inline vvalid v_valid(int32_t n) { return n >= 16 ? (vvalid)0xFFFF : (vvalid)((1u << n) - 1u); }
static inline int v_full(vvalid k) { return k == (vvalid)0xFFFF; }
static inline vi32 v_set1(int32_t a) { return _mm512_set1_epi32(a); }
static inline vi32 v_zero(void) { return _mm512_setzero_si512(); }
static inline vi32 v_load(const int32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline void v_store(int32_t *p, vi32 a) { _mm512_storeu_si512((void *)p, a); }
static inline vi32 v_load_i8(const int8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline vi32 v_load_i8n(const int8_t *p, vvalid k) { return _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, p)); }
static inline void v_store_i8n(int8_t *p, vvalid k, vi32 y) { _mm512_mask_cvtsepi32_storeu_epi8(p, k, y); }
static inline vi32 v_add(vi32 a, vi32 b) { return _mm512_add_epi32(a, b); }
static inline vi32 v_sub(vi32 a, vi32 b) { return _mm512_sub_epi32(a, b); }
static inline vi32 v_mullo(vi32 a, vi32 b) { return _mm512_mullo_epi32(a, b); }
static inline vi32 v_shl(vi32 a, vi32 n) { return _mm512_sllv_epi32(a, n); }
static inline vi32 v_min(vi32 a, vi32 b) { return _mm512_min_epi32(a, b); }
static inline vi32 v_max(vi32 a, vi32 b) { return _mm512_max_epi32(a, b); }
static inline vi32 v_madd16(vi32 acc, vi32 x, vi32 w) {
#ifdef INTQ_VNNI
    return _mm512_dpwssd_epi32(acc, x, w);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, w));
#endif
}
static inline vi32 v_gather(const int32_t *table, const int8_t *idx, vvalid k) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, idx)),
                                       (const void *)table, 4);
}
/* SRDHM: the even lanes' 64-bit products (vpmuldq), then the odd lanes'; the logical shift keeps
 * bits 31..62 of x * m + 2^30 in each even lane's low half, which is the arithmetic shift's low 32
 * bits; a left shift by one puts the same bits in each odd lane's high half. m_odd = m >> 32. */
static inline vi32 v_srdhm(vi32 x, vi32 m, vi32 m_odd) {
    const __m512i half = _mm512_set1_epi64((int64_t)1 << 30);
    const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, m), half), 31);
    __m512i odd = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), m_odd), half);
    odd = _mm512_slli_epi64(odd, 1); /* bits 31..62 of x * m + 2^30 into the high half */
    return _mm512_mask_blend_epi32((__mmask16)0xAAAA, even, odd);
}
static inline vi32 v_odd(vi32 m) { return _mm512_srli_epi64(m, 32); }
/* (h >> e) + (rem > threshold), e per lane */
static inline vi32 v_shift_round(vi32 h, vi32 e, vi32 rem, vi32 threshold) {
    const __mmask16 up = _mm512_cmpgt_epi32_mask(rem, threshold);
    const __m512i s = _mm512_srav_epi32(h, e);
    return _mm512_mask_add_epi32(s, up, s, _mm512_set1_epi32(1));
}
static inline vi32 v_and(vi32 a, vi32 b) { return _mm512_and_si512(a, b); }
static inline vi32 v_sign_bit(vi32 h) { return _mm512_srli_epi32(h, 31); }
static inline vi32 v_mask_of(vi32 e) { return _mm512_sub_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), e), _mm512_set1_epi32(1)); }
static inline vi32 v_half_of(vi32 mask) { return _mm512_srli_epi32(mask, 1); }

#elif defined(INTQ_AVX2)
#define VL 8
typedef __m256i vi32;
typedef int32_t vvalid; /* lanes in use, 1..8 */
static inline vvalid v_valid(int32_t n) { return n >= 8 ? 8 : n; }
static inline int v_full(vvalid k) { return k == 8; }
static inline vi32 v_set1(int32_t a) { return _mm256_set1_epi32(a); }
static inline vi32 v_zero(void) { return _mm256_setzero_si256(); }
static inline vi32 v_load(const int32_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline void v_store(int32_t *p, vi32 a) { _mm256_storeu_si256((__m256i *)p, a); }
static inline vi32 v_load_i8(const int8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline vi32 v_load_i8n(const int8_t *p, vvalid k) {
    if (k == 8) return v_load_i8(p);
    int8_t t[8] = {0};
    memcpy(t, p, (size_t)k);
    return v_load_i8(t);
}
static inline void v_store_i8n(int8_t *p, vvalid k, vi32 y) { /* saturating packs: exact on [-128, 127] */
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
    const __m128i b = _mm_packs_epi16(w, w);
    if (k == 8) {
        _mm_storel_epi64((__m128i *)p, b);
    } else {
        int8_t t[16];
        _mm_storeu_si128((__m128i *)t, b);
        memcpy(p, t, (size_t)k);
    }
}
static inline vi32 v_add(vi32 a, vi32 b) { return _mm256_add_epi32(a, b); }
static inline vi32 v_sub(vi32 a, vi32 b) { return _mm256_sub_epi32(a, b); }
static inline vi32 v_mullo(vi32 a, vi32 b) { return _mm256_mullo_epi32(a, b); }
static inline vi32 v_shl(vi32 a, vi32 n) { return _mm256_sllv_epi32(a, n); }
static inline vi32 v_min(vi32 a, vi32 b) { return _mm256_min_epi32(a, b); }
static inline vi32 v_max(vi32 a, vi32 b) { return _mm256_max_epi32(a, b); }
static inline vi32 v_madd16(vi32 acc, vi32 x, vi32 w) {
#ifdef INTQ_AVXVNNI
    return _mm256_dpwssd_avx_epi32(acc, x, w);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(x, w));
#endif
}
static inline vi32 v_gather(const int32_t *table, const int8_t *idx, vvalid k) {
    if (k == 8) {
        const __m256i i = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)idx));
        return _mm256_i32gather_epi32((const int *)table, i, 4);
    }
    int32_t t[8] = {0};
    for (int32_t j = 0; j < k; ++j) t[j] = table[(uint8_t)idx[j]];
    return v_load(t);
}
static inline vi32 v_srdhm(vi32 x, vi32 m, vi32 m_odd) { /* as AVX-512's, on 8 lanes */
    const __m256i half = _mm256_set1_epi64x((int64_t)1 << 30);
    const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, m), half), 31);
    __m256i odd = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m_odd), half);
    odd = _mm256_slli_epi64(odd, 1);
    return _mm256_blend_epi32(even, odd, 0xAA);
}
static inline vi32 v_odd(vi32 m) { return _mm256_srli_epi64(m, 32); }
static inline vi32 v_shift_round(vi32 h, vi32 e, vi32 rem, vi32 threshold) {
    return _mm256_sub_epi32(_mm256_srav_epi32(h, e), _mm256_cmpgt_epi32(rem, threshold)); /* - (-1) adds 1 */
}
static inline vi32 v_and(vi32 a, vi32 b) { return _mm256_and_si256(a, b); }
static inline vi32 v_sign_bit(vi32 h) { return _mm256_srli_epi32(h, 31); }
static inline vi32 v_mask_of(vi32 e) { return _mm256_sub_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(1), e), _mm256_set1_epi32(1)); }
static inline vi32 v_half_of(vi32 mask) { return _mm256_srli_epi32(mask, 1); }

#elif defined(INTQ_NEON)
#define VL 4
typedef int32x4_t vi32;
typedef int32_t vvalid; /* lanes in use, 1..4 */
static inline vvalid v_valid(int32_t n) { return n >= 4 ? 4 : n; }
static inline int v_full(vvalid k) { return k == 4; }
static inline vi32 v_set1(int32_t a) { return vdupq_n_s32(a); }
static inline vi32 v_zero(void) { return vdupq_n_s32(0); }
static inline vi32 v_load(const int32_t *p) { return vld1q_s32(p); }
static inline void v_store(int32_t *p, vi32 a) { vst1q_s32(p, a); }
static inline vi32 v_load_i8(const int8_t *p) {
    int32_t t;
    memcpy(&t, p, 4);
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(t)))));
}
static inline vi32 v_load_i8n(const int8_t *p, vvalid k) {
    if (k == 4) return v_load_i8(p);
    int8_t t[4] = {0};
    memcpy(t, p, (size_t)k);
    return v_load_i8(t);
}
static inline void v_store_i8n(int8_t *p, vvalid k, vi32 y) {
    const int8x8_t b = vmovn_s16(vcombine_s16(vmovn_s32(y), vmovn_s32(y))); /* in [-128, 127]: exact */
    int8_t t[8];
    vst1_s8(t, b);
    memcpy(p, t, (size_t)k);
}
static inline vi32 v_add(vi32 a, vi32 b) { return vaddq_s32(a, b); }
static inline vi32 v_sub(vi32 a, vi32 b) { return vsubq_s32(a, b); }
static inline vi32 v_mullo(vi32 a, vi32 b) { return vmulq_s32(a, b); }
static inline vi32 v_shl(vi32 a, vi32 n) { return vshlq_s32(a, n); } /* n in [0, 31]: a left shift */
static inline vi32 v_min(vi32 a, vi32 b) { return vminq_s32(a, b); }
static inline vi32 v_max(vi32 a, vi32 b) { return vmaxq_s32(a, b); }
static inline vi32 v_madd16(vi32 acc, vi32 x, vi32 w) { /* the int16 in w's low half, sign-extended */
    return vmlaq_s32(acc, x, vshrq_n_s32(vshlq_n_s32(w, 16), 16));
}
static inline vi32 v_gather(const int32_t *table, const int8_t *idx, vvalid k) {
    int32_t t[4] = {0};
    for (int32_t j = 0; j < k; ++j) t[j] = table[(uint8_t)idx[j]];
    return vld1q_s32(t);
}
/* SQRDMULH is SRDHM: (2 x m + 2^31) >> 32 = (x m + 2^30) >> 31, saturating only for INT32_MIN^2
 * (m >= 0 here). */
static inline vi32 v_srdhm(vi32 x, vi32 m, vi32 m_odd) { (void)m_odd; return vqrdmulhq_s32(x, m); }
static inline vi32 v_odd(vi32 m) { return m; }
static inline vi32 v_shift_round(vi32 h, vi32 e, vi32 rem, vi32 threshold) {
    const vi32 s = vshlq_s32(h, vnegq_s32(e)); /* arithmetic right shift by e */
    return vsubq_s32(s, vreinterpretq_s32_u32(vcgtq_s32(rem, threshold)));
}
static inline vi32 v_and(vi32 a, vi32 b) { return vandq_s32(a, b); }
static inline vi32 v_sign_bit(vi32 h) { return vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(h), 31)); }
static inline vi32 v_mask_of(vi32 e) { return vsubq_s32(vshlq_s32(vdupq_n_s32(1), e), vdupq_n_s32(1)); }
static inline vi32 v_half_of(vi32 mask) { return vshrq_n_s32(mask, 1); }
#endif

#ifdef VL
/* One block of VL channels' requantization vectors (offset, multiplier, exponent, rounding mask,
 * half mask, tie rule), loaded once and used for every row of the block. */
typedef struct {
    vi32 off, m, m_odd, e, mask, half, away;
} rq_vec;

static inline void rq_vec_set(rq_vec *v, vi32 off, vi32 m, vi32 e, vi32 away) {
    v->off = off;
    v->m = m;
    v->m_odd = v_odd(m);
    v->e = e;
    v->mask = v_mask_of(e);
    v->half = v_half_of(v->mask);
    v->away = away;
}

/* Channels [c0, c0 + VL) of q (arrays padded to 32: whole vectors are in bounds). */
static inline void rq_vec_load(rq_vec *v, const intq_rq *q, int32_t c0) {
    rq_vec_set(v, v_load(q->offset + c0), v_load(q->mult + c0), v_load(q->exponent + c0), v_load(q->away + c0));
}

/*@rule v_rq: rq_scalar(acc + off, ...) on every lane */
static inline vi32 v_rq(vi32 acc, const rq_vec *v, vi32 zp, vi32 lo, vi32 hi) {
    const vi32 h = v_srdhm(v_add(acc, v->off), v->m, v->m_odd);
    const vi32 threshold = v_add(v->half, v_and(v->away, v_sign_bit(h)));
    const vi32 y = v_add(v_shift_round(h, v->e, v_and(h, v->mask), threshold), zp);
    return v_max(v_min(y, hi), lo);
}

/*@rule v_rq_shl: rq_shl_scalar on every lane (v->off = 0) */
static inline vi32 v_rq_shl(vi32 x, vi32 left, const rq_vec *v, vi32 zp, vi32 lo, vi32 hi) {
    return v_rq(v_shl(x, left), v, zp, lo, hi);
}
#endif

/* y[c] = requant(acc[c] + offset[c0 + c]) for c < n (acc: n values of one row, channels c0...). */
static void rq_row(const intq_rq *q, const int32_t *acc, int32_t c0, int32_t n, int8_t *y) {
    int32_t c = 0;
#ifdef VL
    const vi32 zp = v_set1(q->out_zp), lo = v_set1(q->act_min), hi = v_set1(q->act_max);
    for (; c + VL <= n; c += VL) {
        rq_vec v;
        rq_vec_load(&v, q, c0 + c);
        v_store_i8n(y + c, v_valid(VL), v_rq(v_load(acc + c), &v, zp, lo, hi));
    }
#endif
    for (; c < n; ++c)
        y[c] = (int8_t)rq_scalar(acc[c] + q->offset[c0 + c], q->mult[c0 + c], q->exponent[c0 + c], q->away[c0 + c],
                                 q->out_zp, q->act_min, q->act_max);
}

/* Requantize a block: acc int32 [rows][32] (channels c0 .. c0 + n - 1, n <= 32) -> y rows of
 * y_stride bytes. The per-channel vectors are loaded once for the block's rows. */
static inline void rq_block(const intq_rq *q, const int32_t *acc, int32_t rows, int32_t c0, int32_t n, int8_t *y,
                            int64_t y_stride) {
#ifdef VL
    const vi32 zp = v_set1(q->out_zp), lo = v_set1(q->act_min), hi = v_set1(q->act_max);
    for (int32_t b = 0; b < n; b += VL) { /* one block of channels at a time: its vectors stay in registers */
        rq_vec v;
        rq_vec_load(&v, q, c0 + b);
        const vvalid valid = v_valid(n - b);
        const int32_t *a = acc + b; /* whole vectors: rows are 32 wide */
        int8_t *out = y + b;
        for (int32_t r = 0; r < rows; ++r, a += 32, out += y_stride) v_store_i8n(out, valid, v_rq(v_load(a), &v, zp, lo, hi));
    }
#else
    for (int32_t r = 0; r < rows; ++r) rq_row(q, acc + r * 32, c0, n, y + r * y_stride);
#endif
}

/* acc int32 [rows][cols] (row stride cols) -> y int8 [rows][cols]: the fused requantization. */
void intq_requant(const intq_rq *q, int64_t rows, int32_t cols, const int32_t *acc, int8_t *y) {
    for (int64_t r = 0; r < rows; ++r)
        rq_row(q, acc + r * cols, 0, cols, y + r * cols);
}

/* ------------------------------------------------------------------------------ set-up */

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Bit p set: the matrix-product path p is compiled into this build and usable on this CPU and OS.
 * AMX needs the kernel's permission for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >=
 * 5.16), asked once. */
int intq_native_paths(void) {
    static int paths = -1;
    if (paths >= 0) return paths;
    int mask = 1 << PATH_C;
#ifdef INTQ_AVX2
    mask |= 1 << PATH_AVX2;
#endif
#ifdef INTQ_AVXVNNI
    mask |= 1 << PATH_AVXVNNI;
#endif
#ifdef INTQ_VNNI
    mask |= 1 << PATH_VNNI;
#endif
#ifdef INTQ_AMX
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0) mask |= 1 << PATH_AMX;
#endif
#ifdef INTQ_NEON
    mask |= 1 << PATH_NEON;
#endif
#ifdef INTQ_DOTPROD
    mask |= 1 << PATH_DOTPROD;
#endif
    paths = mask;
    return paths;
}

/* Choose the matrix-product path: ``force`` if it is available (intq_native_paths), else the best
 * available (-1: the best). Returns the path. */
int intq_native_init(int force) {
    const int mask = intq_native_paths();
    int best = PATH_C;
    for (int p = 0; p < 31; ++p)
        if (mask & (1 << p)) best = p;
    intq_path = (force >= 0 && force < 31 && (mask & (1 << force))) ? force : best;
    return intq_path;
}

/* Bytes of the packed weights of an [n][k] matrix (intq_pack). */
int64_t intq_packed_bytes(int32_t k, int32_t n) {
    const int64_t kp = (k + 63) / 64 * 64, np = (n + 31) / 32 * 32;
    return kp * np;
}

/* w int8 [n][k] -> packed [n/16][kp/4][16][4], zeros beyond k and n. */
void intq_pack(int32_t k, int32_t n, const int8_t *w, int8_t *packed) {
    const int32_t kp = (k + 63) / 64 * 64, np = (n + 31) / 32 * 32;
    memset(packed, 0, (size_t)kp * np);
    for (int32_t o = 0; o < n; ++o)
        for (int32_t i = 0; i < k; ++i)
            packed[((size_t)(o / 16) * (kp / 4) + i / 4) * 64 + (o % 16) * 4 + i % 4] = w[(size_t)o * k + i];
}

/* Bytes of intq_pack16's output (the AVX2 path's int16 weights). */
int64_t intq_packed16_bytes(int32_t k, int32_t n) { return 2 * intq_packed_bytes(k, n); }

/* w int8 [n][k] -> int16 [n/8][kp/2][8][2] (two consecutive K values of one channel are one 32-bit
 * lane, VPMADDWD's pair), zeros beyond k and n. */
void intq_pack16(int32_t k, int32_t n, const int8_t *w, int16_t *packed) {
    const int32_t kp = (k + 63) / 64 * 64, np = (n + 31) / 32 * 32;
    memset(packed, 0, (size_t)kp * np * sizeof(int16_t));
    for (int32_t o = 0; o < n; ++o)
        for (int32_t i = 0; i < k; ++i)
            packed[((size_t)(o / 8) * (kp / 2) + i / 2) * 16 + (o % 8) * 2 + i % 2] = w[(size_t)o * k + i];
}
/* ------------------------------------------------------------------------------ convolution */

typedef struct {
    int32_t batch, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t k, kp;   /* kh * kw * in_c, and padded to 64 */
    int32_t in_zp;   /* Z_x: what a tap outside the image reads */
    const int8_t *w; /* packed (intq_pack) */
    intq_rq rq;      /* offset b - Z_x sum(w) */
    const int32_t *offset_u8; /* b - (Z_x + 128) sum(w): the VNNI path's activations are x + 128 */
    int8_t *a;       /* scratch [MB][kp], zeroed once (the columns beyond k stay zero) */
    int32_t *c;      /* scratch [MB][32] */
    const int8_t *lut; /* NULL, or a 256-entry table applied to each finished block of y into z */
    int8_t *z;         /* [batch][out_h][out_w][out_c]: lut[uint8(y)] (intq_conv_lut_obj) */
    const int8_t *w_rows; /* NULL, or the weights per tap row (intq_pack_rows): the AMX direct path */
    int32_t span4;        /* kw * in_c rounded up to 4 (w_rows' K per tap row, <= 64) */
    const int16_t *w16;   /* NULL, or the weights as int16 (intq_pack16): the AVX2 path */
    int16_t *a16;         /* NULL, or scratch [MB][kp] int16, zeroed once: the AVX2 path's block */
} intq_conv_params;

void intq_lut(const int8_t *table, int64_t n, const int8_t *x, int8_t *y);

/* z = lut[y] on the finished rows [r0, r0 + rows) of a convolution's output (in cache). */
static inline void lut_rows(const intq_conv_params *p, const int8_t *y, int64_t r0, int32_t rows) {
    if (p->lut) intq_lut(p->lut, (int64_t)rows * p->out_c, y + r0 * p->out_c, p->z + r0 * p->out_c);
}

/* dst[q] = src[q] ^ flip for q < n. AVX-512: 64 bytes a step, the tail under a byte mask (masked
 * loads read nothing beyond n: no over-read of the input's last bytes). */
static inline void copy_flip(uint8_t *dst, const uint8_t *src, int32_t n, uint8_t flip) {
#ifdef INTQ_AVX512
    const __m512i f = _mm512_set1_epi8((char)flip);
    int32_t q = 0;
    for (; q + 64 <= n; q += 64)
        _mm512_storeu_si512((void *)(dst + q), _mm512_xor_si512(_mm512_loadu_si512((const void *)(src + q)), f));
    if (q < n) {
        const __mmask64 m = ((__mmask64)1 << (n - q)) - 1;
        _mm512_mask_storeu_epi8(dst + q, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + q), f));
    }
#else
    if (flip) {
        for (int32_t q = 0; q < n; ++q) dst[q] = src[q] ^ flip;
    } else {
        memcpy(dst, src, (size_t)n);
    }
#endif
}

/* Rows r0 .. r0 + rows - 1 of the im2col matrix into p->a, as int8 (flip = 0) or as x + 128 (flip =
 * 0x80: int8 bits xor 0x80 are the uint8 x + 128). The output pixel (n, oy, ox) of row r0 is found
 * once and stepped along (no division per row). */
static void fill_block(const intq_conv_params *p, const int8_t *x, int64_t r0, int32_t rows, uint8_t flip) {
    const int32_t c = p->in_c;
    const uint8_t outside = (uint8_t)((uint8_t)(int8_t)p->in_zp ^ flip);
    int32_t ox = (int32_t)(r0 % p->out_w);
    const int64_t t0 = r0 / p->out_w;
    int32_t oy = (int32_t)(t0 % p->out_h), n = (int32_t)(t0 / p->out_h);
    const int32_t span = p->kw * c; /* one tap row's columns */
    for (int32_t r = 0; r < rows; ++r) {
        uint8_t *dst = (uint8_t *)p->a + (size_t)r * p->kp;
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * c;
        const int32_t ix0 = ox * p->stride_w - p->pad_left, ix1 = ix0 + (p->kw - 1) * p->dil_w;
        for (int32_t i = 0; i < p->kh; ++i) {
            const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
            if (p->dil_w == 1 && iy >= 0 && iy < p->in_h && ix0 >= 0 && ix1 < p->in_w) {
                /* the whole tap row inside the image: kw * c contiguous bytes of the input */
                copy_flip(dst, (const uint8_t *)xb + ((size_t)iy * p->in_w + ix0) * c, span, flip);
                dst += span;
                continue;
            }
            for (int32_t j = 0; j < p->kw; ++j, dst += c) {
                const int32_t ix = ox * p->stride_w - p->pad_left + j * p->dil_w;
                if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                    memset(dst, outside, (size_t)c);
                } else {
                    copy_flip(dst, (const uint8_t *)xb + ((size_t)iy * p->in_w + ix) * c, c, flip);
                }
            }
        }
        if (++ox == p->out_w) {
            ox = 0;
            if (++oy == p->out_h) {
                oy = 0;
                ++n;
            }
        }
    }
}

#ifdef INTQ_AMX
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

/* acc tiles for rows [0, MB) x channels [o, o + 32) of the block in p->a, into p->c [MB][32]. */
static void amx_block(const intq_conv_params *p, int32_t o) {
    const int32_t k4 = p->kp / 4;
    const int8_t *b0 = p->w + (size_t)(o / 16) * k4 * 64, *b1 = b0 + (size_t)k4 * 64;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int32_t k = 0; k < p->kp; k += 64) {
        _tile_loadd(4, p->a + k, p->kp);
        _tile_loadd(5, p->a + (size_t)16 * p->kp + k, p->kp);
        _tile_loadd(6, b0 + (size_t)k * 16, 64);
        _tile_loadd(7, b1 + (size_t)k * 16, 64);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, p->c, 128);
    _tile_stored(1, p->c + 16, 128);
    _tile_stored(2, p->c + 16 * 32, 128);
    _tile_stored(3, p->c + 16 * 32 + 16, 128);
}

static void conv_amx(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0);
        for (int32_t o = 0; o < p->out_c; o += 32) {
            const int32_t n = p->out_c - o < 32 ? p->out_c - o : 32;
            amx_block(p, o);
            rq_block(&p->rq, p->c, rows, o, n, y + (size_t)r0 * p->out_c + o, p->out_c);
        }
        lut_rows(p, y, r0, rows);
    }
    _tile_release();
}
#endif

#ifdef INTQ_VNNI
/* Rows [r, r + 4) x channels [o, o + 32) of the block: 8 accumulators, VPDPBUSD on (x + 128, w). */
static void vnni_tile(const intq_conv_params *p, int32_t r, int32_t rows, int32_t o, int8_t *y, int64_t row0) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b0 = p->w + (size_t)(o / 16) * k4 * 64, *b1 = b0 + (size_t)k4 * 64;
    const int32_t *a0 = (const int32_t *)(p->a + (size_t)r * p->kp);
    const int32_t stride = p->kp / 4;
    __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
            c31 = c00;
    for (int32_t q = 0; q < kq; ++q) {
        const __m512i w0 = _mm512_loadu_si512((const void *)(b0 + (size_t)q * 64));
        const __m512i w1 = _mm512_loadu_si512((const void *)(b1 + (size_t)q * 64));
        __m512i v = _mm512_set1_epi32(a0[q]);
        c00 = _mm512_dpbusd_epi32(c00, v, w0);
        c01 = _mm512_dpbusd_epi32(c01, v, w1);
        v = _mm512_set1_epi32(a0[stride + q]);
        c10 = _mm512_dpbusd_epi32(c10, v, w0);
        c11 = _mm512_dpbusd_epi32(c11, v, w1);
        v = _mm512_set1_epi32(a0[2 * stride + q]);
        c20 = _mm512_dpbusd_epi32(c20, v, w0);
        c21 = _mm512_dpbusd_epi32(c21, v, w1);
        v = _mm512_set1_epi32(a0[3 * stride + q]);
        c30 = _mm512_dpbusd_epi32(c30, v, w0);
        c31 = _mm512_dpbusd_epi32(c31, v, w1);
    }
    int32_t *c = p->c;
    _mm512_storeu_si512((void *)(c), c00);
    _mm512_storeu_si512((void *)(c + 16), c01);
    _mm512_storeu_si512((void *)(c + 32), c10);
    _mm512_storeu_si512((void *)(c + 48), c11);
    _mm512_storeu_si512((void *)(c + 64), c20);
    _mm512_storeu_si512((void *)(c + 80), c21);
    _mm512_storeu_si512((void *)(c + 96), c30);
    _mm512_storeu_si512((void *)(c + 112), c31);
    const int32_t n = p->out_c - o < 32 ? p->out_c - o : 32;
    intq_rq q8 = p->rq;
    q8.offset = p->offset_u8;
    rq_block(&q8, c, rows, o, n, y + (size_t)(row0 + r) * p->out_c + o, p->out_c);
}

static void conv_vnni_range(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t begin, int64_t m) {
    for (int64_t r0 = begin; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0x80);
        for (int32_t r = 0; r < rows; r += 4)
            for (int32_t o = 0; o < p->out_c; o += 32) vnni_tile(p, r, rows - r < 4 ? rows - r : 4, o, y, r0);
        lut_rows(p, y, r0, rows);
    }
}

static void conv_vnni(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    conv_vnni_range(p, x, y, 0, m);
}
#endif

#ifdef INTQ_AVXVNNI
/* Rows [r, r + 4) x channels [o, o + 16) of the block into p->c's rows r..r + 3: VPDPBUSD on ymm
 * (VEX), (x + 128, w); the 64 bytes of one K quad of a 16-channel block are two vectors of 8 channels. */
static void avxvnni_tile(const intq_conv_params *p, int32_t r, int32_t o) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
    const int32_t *a0 = (const int32_t *)(p->a + (size_t)r * p->kp);
    const int32_t stride = p->kp / 4;
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
            c31 = c00;
    for (int32_t q = 0; q < kq; ++q, b += 64) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)b), w1 = _mm256_loadu_si256((const __m256i *)(b + 32));
        __m256i v = _mm256_set1_epi32(a0[q]);
        c00 = _mm256_dpbusd_avx_epi32(c00, v, w0);
        c01 = _mm256_dpbusd_avx_epi32(c01, v, w1);
        v = _mm256_set1_epi32(a0[stride + q]);
        c10 = _mm256_dpbusd_avx_epi32(c10, v, w0);
        c11 = _mm256_dpbusd_avx_epi32(c11, v, w1);
        v = _mm256_set1_epi32(a0[2 * stride + q]);
        c20 = _mm256_dpbusd_avx_epi32(c20, v, w0);
        c21 = _mm256_dpbusd_avx_epi32(c21, v, w1);
        v = _mm256_set1_epi32(a0[3 * stride + q]);
        c30 = _mm256_dpbusd_avx_epi32(c30, v, w0);
        c31 = _mm256_dpbusd_avx_epi32(c31, v, w1);
    }
    int32_t *c = p->c + (size_t)r * 32;
    _mm256_storeu_si256((__m256i *)c, c00);
    _mm256_storeu_si256((__m256i *)(c + 8), c01);
    _mm256_storeu_si256((__m256i *)(c + 32), c10);
    _mm256_storeu_si256((__m256i *)(c + 40), c11);
    _mm256_storeu_si256((__m256i *)(c + 64), c20);
    _mm256_storeu_si256((__m256i *)(c + 72), c21);
    _mm256_storeu_si256((__m256i *)(c + 96), c30);
    _mm256_storeu_si256((__m256i *)(c + 104), c31);
}

/* One row r x channels [o, o + 16) into p->c's row r, for blocks of fewer than 4 rows (a batch-1
 * FULLY_CONNECTED, a squeeze-excitation convolution on one pixel): no row computed in vain. Two
 * accumulator chains per 8 channels (even and odd K quads), added at the end. */
static void avxvnni_row(const intq_conv_params *p, int32_t r, int32_t o) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
    const int32_t *a = (const int32_t *)(p->a + (size_t)r * p->kp);
    __m256i c0 = _mm256_setzero_si256(), c1 = c0, d0 = c0, d1 = c0;
    int32_t q = 0;
    for (; q + 2 <= kq; q += 2, b += 128) {
        const __m256i v = _mm256_set1_epi32(a[q]), u = _mm256_set1_epi32(a[q + 1]);
        c0 = _mm256_dpbusd_avx_epi32(c0, v, _mm256_loadu_si256((const __m256i *)b));
        c1 = _mm256_dpbusd_avx_epi32(c1, v, _mm256_loadu_si256((const __m256i *)(b + 32)));
        d0 = _mm256_dpbusd_avx_epi32(d0, u, _mm256_loadu_si256((const __m256i *)(b + 64)));
        d1 = _mm256_dpbusd_avx_epi32(d1, u, _mm256_loadu_si256((const __m256i *)(b + 96)));
    }
    if (q < kq) {
        const __m256i v = _mm256_set1_epi32(a[q]);
        c0 = _mm256_dpbusd_avx_epi32(c0, v, _mm256_loadu_si256((const __m256i *)b));
        c1 = _mm256_dpbusd_avx_epi32(c1, v, _mm256_loadu_si256((const __m256i *)(b + 32)));
    }
    int32_t *c = p->c + (size_t)r * 32;
    _mm256_storeu_si256((__m256i *)c, _mm256_add_epi32(c0, d0));
    _mm256_storeu_si256((__m256i *)(c + 8), _mm256_add_epi32(c1, d1));
}

/* Per 16-channel block, the block's rows four at a time (the weights stay in cache), then one
 * requantization of all its rows (the per-channel vectors loaded once per block). */
static void conv_avxvnni(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    intq_rq q8 = p->rq;
    q8.offset = p->offset_u8;
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0x80);
        for (int32_t o = 0; o < p->out_c; o += 16) {
            if (rows < 4) {
                for (int32_t r = 0; r < rows; ++r) avxvnni_row(p, r, o);
            } else {
                for (int32_t r = 0; r < rows; r += 4) avxvnni_tile(p, r, o);
            }
            rq_block(&q8, p->c, rows, o, p->out_c - o < 16 ? p->out_c - o : 16, y + (size_t)r0 * p->out_c + o, p->out_c);
        }
        lut_rows(p, y, r0, rows);
    }
}
#endif

#ifdef INTQ_AVX2
/* Rows [r, r + 4) x channels [o, o + 16) of the block into p->c's rows r..r + 3: VPMADDWD of the
 * rows' int16 pairs (x_k, x_k+1), broadcast, by the channels' int16 pairs (w_k, w_k+1)
 * (intq_pack16: 8 channels a vector). */
static void avx2_tile(const intq_conv_params *p, int32_t r, int32_t o) {
    const int32_t k2 = p->kp / 2, kq = (p->k + 1) / 2;
    const int16_t *b0 = p->w16 + (size_t)(o / 8) * k2 * 16, *b1 = b0 + (size_t)k2 * 16;
    const int32_t *a0 = (const int32_t *)(p->a16 + (size_t)r * p->kp);
    const int32_t stride = p->kp / 2;
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
            c31 = c00;
    for (int32_t q = 0; q < kq; ++q) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(b0 + (size_t)q * 16)),
                      w1 = _mm256_loadu_si256((const __m256i *)(b1 + (size_t)q * 16));
        __m256i v = _mm256_set1_epi32(a0[q]);
        c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(v, w0));
        c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(v, w1));
        v = _mm256_set1_epi32(a0[stride + q]);
        c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(v, w0));
        c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(v, w1));
        v = _mm256_set1_epi32(a0[2 * stride + q]);
        c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(v, w0));
        c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(v, w1));
        v = _mm256_set1_epi32(a0[3 * stride + q]);
        c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(v, w0));
        c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(v, w1));
    }
    int32_t *c = p->c + (size_t)r * 32;
    _mm256_storeu_si256((__m256i *)c, c00);
    _mm256_storeu_si256((__m256i *)(c + 8), c01);
    _mm256_storeu_si256((__m256i *)(c + 32), c10);
    _mm256_storeu_si256((__m256i *)(c + 40), c11);
    _mm256_storeu_si256((__m256i *)(c + 64), c20);
    _mm256_storeu_si256((__m256i *)(c + 72), c21);
    _mm256_storeu_si256((__m256i *)(c + 96), c30);
    _mm256_storeu_si256((__m256i *)(c + 104), c31);
}

/* One row r x channels [o, o + 16) into p->c's row r, for blocks of fewer than 4 rows (as
 * avxvnni_row), from the int8 weights (intq_pack: half the bytes of the int16 ones, what a row reads
 * once): per K quad, the 16 channels' 64 bytes sign-extended to int16 in four vectors of 4 channels,
 * VPMADDWD by the quad (x_k .. x_k+3) broadcast — two int32 lanes per channel (k, k+1 and k+2,
 * k+3), added pairwise at the end (VPHADDD, then the 64-bit lanes back in channel order). */
static void avx2_row(const intq_conv_params *p, int32_t r, int32_t o) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
    const int16_t *a = p->a16 + (size_t)r * p->kp;
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int32_t q = 0; q < kq; ++q, b += 64) {
        int64_t quad;
        memcpy(&quad, a + 4 * q, 8);
        const __m256i v = _mm256_set1_epi64x(quad);
        acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b)), v));
        acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16))), v));
        acc2 = _mm256_add_epi32(acc2, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 32))), v));
        acc3 = _mm256_add_epi32(acc3, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 48))), v));
    }
    /* acc0 lanes: channel 0's two halves, channel 1's | channels 2, 3; hadd(acc0, acc1): channels
     * 0, 1, 4, 5 | 2, 3, 6, 7 */
    int32_t *c = p->c + (size_t)r * 32;
    _mm256_storeu_si256((__m256i *)c, _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc0, acc1), 0xD8));
    _mm256_storeu_si256((__m256i *)(c + 8), _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc2, acc3), 0xD8));
}

static void conv_avx2(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    const int32_t k16 = (p->k + 15) / 16 * 16; /* the columns the tiles read (beyond: zeros, never written) */
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0);
        for (int32_t r = 0; r < rows; ++r) { /* the block's rows sign-extended to int16, once */
            const int8_t *src = p->a + (size_t)r * p->kp;
            int16_t *dst = p->a16 + (size_t)r * p->kp;
            for (int32_t i = 0; i < k16; i += 16)
                _mm256_storeu_si256((__m256i *)(dst + i), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(src + i))));
        }
        for (int32_t o = 0; o < p->out_c; o += 16) { /* as conv_avxvnni */
            if (rows < 4) {
                for (int32_t r = 0; r < rows; ++r) avx2_row(p, r, o);
            } else {
                for (int32_t r = 0; r < rows; r += 4) avx2_tile(p, r, o);
            }
            rq_block(&p->rq, p->c, rows, o, p->out_c - o < 16 ? p->out_c - o : 16, y + (size_t)r0 * p->out_c + o,
                     p->out_c);
        }
        lut_rows(p, y, r0, rows);
    }
}
#endif

#ifdef INTQ_DOTPROD
/* Rows [r, r + 4) x channels [o, o + 16) of the block: SDOT by element — one K quad of a 16-channel
 * block is four vectors of 4 channels, each multiplied by the matching quad of a row's 16 bytes. */
static void dot_tile(const intq_conv_params *p, int32_t r, int32_t rows, int32_t o, int8_t *y, int64_t row0) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
    const int8_t *a = p->a + (size_t)r * p->kp;
    int32x4_t acc[4][4];
    for (int32_t i = 0; i < 4; ++i)
        for (int32_t j = 0; j < 4; ++j) acc[i][j] = vdupq_n_s32(0);
    for (int32_t q = 0; q < kq; q += 4) { /* 16 bytes of each row: quads q .. q + 3 (kp is a multiple of 64) */
        const int8x16_t a0 = vld1q_s8(a + 4 * q), a1 = vld1q_s8(a + p->kp + 4 * q),
                        a2 = vld1q_s8(a + 2 * p->kp + 4 * q), a3 = vld1q_s8(a + 3 * p->kp + 4 * q);
#define INTQ_DOT_QUAD(l)                                                                                              \
    for (int32_t j = 0; j < 4; ++j) {                                                                                 \
        const int8x16_t w = vld1q_s8(b + (size_t)(q + (l)) * 64 + 16 * j);                                           \
        acc[0][j] = vdotq_laneq_s32(acc[0][j], w, a0, (l));                                                           \
        acc[1][j] = vdotq_laneq_s32(acc[1][j], w, a1, (l));                                                           \
        acc[2][j] = vdotq_laneq_s32(acc[2][j], w, a2, (l));                                                           \
        acc[3][j] = vdotq_laneq_s32(acc[3][j], w, a3, (l));                                                           \
    }
        INTQ_DOT_QUAD(0)
        INTQ_DOT_QUAD(1)
        INTQ_DOT_QUAD(2)
        INTQ_DOT_QUAD(3)
#undef INTQ_DOT_QUAD
    }
    for (int32_t i = 0; i < 4; ++i)
        for (int32_t j = 0; j < 4; ++j) vst1q_s32(p->c + i * 32 + 4 * j, acc[i][j]);
    const int32_t n = p->out_c - o < 16 ? p->out_c - o : 16;
    rq_block(&p->rq, p->c, rows, o, n, y + (size_t)(row0 + r) * p->out_c + o, p->out_c);
}

static void conv_dot(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0);
        for (int32_t r = 0; r < rows; r += 4)
            for (int32_t o = 0; o < p->out_c; o += 16) dot_tile(p, r, rows - r < 4 ? rows - r : 4, o, y, r0);
        lut_rows(p, y, r0, rows);
    }
}
#endif

#ifdef INTQ_NEON
/* Rows [r, r + 2) x channels [o, o + 16) of the block without dot products: per K quad, SMULL of
 * 4 channels' weights by the row's quad (broadcast) gives 8 int16 products (|x w| <= 2^14), SADALP
 * adds adjacent pairs into int32 lanes (two lanes per channel); one pairwise add at the end. */
static void neon_tile(const intq_conv_params *p, int32_t r, int32_t rows, int32_t o, int8_t *y, int64_t row0) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
    const int32_t *a0 = (const int32_t *)(p->a + (size_t)r * p->kp), *a1 = a0 + p->kp / 4;
    int32x4_t lo[2][4], hi[2][4];
    for (int32_t i = 0; i < 2; ++i)
        for (int32_t j = 0; j < 4; ++j) lo[i][j] = hi[i][j] = vdupq_n_s32(0);
    for (int32_t q = 0; q < kq; ++q, b += 64) {
        const int8x16_t x0 = vreinterpretq_s8_s32(vdupq_n_s32(a0[q])), x1 = vreinterpretq_s8_s32(vdupq_n_s32(a1[q]));
        for (int32_t j = 0; j < 4; ++j) {
            const int8x16_t w = vld1q_s8(b + 16 * j); /* channels 4j .. 4j + 3, one quad each */
            lo[0][j] = vpadalq_s16(lo[0][j], vmull_s8(vget_low_s8(w), vget_low_s8(x0)));
            hi[0][j] = vpadalq_s16(hi[0][j], vmull_high_s8(w, x0));
            lo[1][j] = vpadalq_s16(lo[1][j], vmull_s8(vget_low_s8(w), vget_low_s8(x1)));
            hi[1][j] = vpadalq_s16(hi[1][j], vmull_high_s8(w, x1));
        }
    }
    for (int32_t i = 0; i < 2; ++i)
        for (int32_t j = 0; j < 4; ++j) vst1q_s32(p->c + i * 32 + 4 * j, vpaddq_s32(lo[i][j], hi[i][j]));
    const int32_t n = p->out_c - o < 16 ? p->out_c - o : 16;
    rq_block(&p->rq, p->c, rows, o, n, y + (size_t)(row0 + r) * p->out_c + o, p->out_c);
}

static void conv_neon(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0);
        for (int32_t r = 0; r < rows; r += 2)
            for (int32_t o = 0; o < p->out_c; o += 16) neon_tile(p, r, rows - r < 2 ? rows - r : 2, o, y, r0);
        lut_rows(p, y, r0, rows);
    }
}
#endif

#if defined(INTQ_AMX) && defined(INTQ_VNNI)
/* The AMX path without im2col, for convolutions whose every window lies inside the image (no
 * padding: e.g. the first 3x3 convolution on 3 channels after an explicit PAD, or a 1x1, which the
 * caller presents as one row of all the pixels): 16 neighbouring output pixels of one output row
 * are a tile read straight from the input, one row per pixel, stride_w * in_c bytes apart (the rows
 * overlap); per tap row, in pieces of 64 bytes, one product with that piece's weights (w_rows: K =
 * span4, zeros beyond kw * in_c, so the up to 3 bytes read past a pixel's tap row add nothing). The same integer sums
 * as the im2col path. Groups of fewer than 16 pixels, and a group whose read would pass the end of
 * the image, take the VNNI path. */
static int direct_fits(const intq_conv_params *p) {
    return p->w_rows != 0 && p->pad_top == 0 && p->pad_left == 0 && p->dil_w == 1 && p->out_w >= 16 &&
           (p->out_h - 1) * p->stride_h + (p->kh - 1) * p->dil_h < p->in_h &&
           (p->out_w - 1) * p->stride_w + p->kw - 1 < p->in_w;
}

/* 1 where intq_conv takes the AMX direct path for p (tests: the cases that exercise it). */
int intq_conv_direct(const intq_conv_params *p) { return intq_path == PATH_AMX && direct_fits(p); }

static void conv_amx_direct(const intq_conv_params *p, const int8_t *x, int8_t *y) {
    const int32_t c = p->in_c, kq = p->span4 / 4;
    const int32_t full = p->span4 / 64 * 64, tail = p->span4 - full; /* a tap row in 64-byte pieces */
    amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.rows[0] = 16, cfg.colsb[0] = 64;                   /* C: 16 pixels x 16 channels, int32 */
    cfg.rows[1] = 16, cfg.colsb[1] = 64;                   /* A: 16 pixels x a 64-byte piece of a tap row */
    cfg.rows[2] = 16, cfg.colsb[2] = 64;                   /* B: its weights, [16][16][4] */
    cfg.rows[3] = 16, cfg.colsb[3] = tail ? tail : 4;      /* A: the last piece (tail bytes) */
    cfg.rows[4] = tail ? tail / 4 : 1, cfg.colsb[4] = 64;  /* B: its weights */
    _tile_loadconfig(&cfg);
    const size_t image = (size_t)p->in_h * p->in_w * c, stride = (size_t)p->stride_w * c;
    for (int32_t n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * image;
        for (int32_t oy = 0; oy < p->out_h; ++oy) {
            const int64_t row0 = ((int64_t)n * p->out_h + oy) * p->out_w;
            const size_t last_row = (size_t)(oy * p->stride_h + (p->kh - 1) * p->dil_h) * p->in_w;
            int32_t ox = 0;
            for (; ox + 16 <= p->out_w; ox += 16) {
                if ((last_row + (size_t)(ox + 15) * p->stride_w) * c + p->span4 > image) break;
                for (int32_t o = 0; o < p->out_c; o += 16) {
                    _tile_zero(0);
                    for (int32_t i = 0; i < p->kh; ++i) {
                        const size_t iy = (size_t)oy * p->stride_h + (size_t)i * p->dil_h;
                        const int8_t *src = xb + (iy * p->in_w + (size_t)ox * p->stride_w) * c;
                        const int8_t *w = p->w_rows + ((size_t)(o / 16) * p->kh + i) * kq * 64;
                        for (int32_t q = 0; q < full; q += 64) {
                            _tile_loadd(1, src + q, (long)stride);
                            _tile_loadd(2, w + (size_t)q * 16, 64);
                            _tile_dpbssd(0, 1, 2);
                        }
                        if (tail) {
                            _tile_loadd(3, src + full, (long)stride);
                            _tile_loadd(4, w + (size_t)full * 16, 64);
                            _tile_dpbssd(0, 3, 4);
                        }
                    }
                    _tile_stored(0, p->c, 128);
                    rq_block(&p->rq, p->c, 16, o, p->out_c - o < 16 ? p->out_c - o : 16,
                             y + (size_t)(row0 + ox) * p->out_c + o, p->out_c);
                }
                lut_rows(p, y, row0 + ox, 16);
            }
            if (ox < p->out_w) conv_vnni_range(p, x, y, row0 + ox, row0 + p->out_w);
        }
    }
    _tile_release();
}
#endif

#if !(defined(INTQ_AMX) && defined(INTQ_VNNI))
int intq_conv_direct(const intq_conv_params *p) { (void)p; return 0; }
#endif

/* Bytes of intq_pack_rows' output for n channels, kh tap rows of span bytes. */
int64_t intq_packed_rows_bytes(int32_t kh, int32_t span, int32_t n) {
    return (int64_t)(n + 15) / 16 * 16 * kh * ((span + 3) / 4 * 4);
}

/* w int8 [n][kh * span] (K ordered tap row, then kw * in_c) -> [n/16][kh][span4/4][16][4], zeros
 * beyond span and n: each tap row's weights as an AMX B tile (conv_amx_direct). */
void intq_pack_rows(int32_t kh, int32_t span, int32_t n, const int8_t *w, int8_t *out) {
    const int32_t kq = (span + 3) / 4;
    memset(out, 0, (size_t)intq_packed_rows_bytes(kh, span, n));
    for (int32_t o = 0; o < n; ++o)
        for (int32_t i = 0; i < kh; ++i)
            for (int32_t k = 0; k < span; ++k)
                out[(((size_t)(o / 16) * kh + i) * kq + k / 4) * 64 + (o % 16) * 4 + k % 4] =
                    w[(size_t)o * kh * span + (size_t)i * span + k];
}

/* Portable: one row and 16 channels at a time from the packed weights. */
static void conv_c(const intq_conv_params *p, const int8_t *x, int8_t *y, int64_t m) {
    const int32_t k4 = p->kp / 4, kq = (p->k + 3) / 4;
    for (int64_t r0 = 0; r0 < m; r0 += MB) {
        const int32_t rows = m - r0 < MB ? (int32_t)(m - r0) : MB;
        fill_block(p, x, r0, rows, 0);
        for (int32_t r = 0; r < rows; ++r) {
            const int8_t *a = p->a + (size_t)r * p->kp;
            for (int32_t o = 0; o < p->out_c; o += 16) {
                const int8_t *b = p->w + (size_t)(o / 16) * k4 * 64;
                int32_t acc[16] = {0};
                for (int32_t q = 0; q < kq; ++q, b += 64)
                    for (int32_t j = 0; j < 16; ++j)
                        acc[j] += a[4 * q] * b[4 * j] + a[4 * q + 1] * b[4 * j + 1] + a[4 * q + 2] * b[4 * j + 2] +
                                  a[4 * q + 3] * b[4 * j + 3];
                const int32_t n = p->out_c - o < 16 ? p->out_c - o : 16;
                rq_row(&p->rq, acc, o, n, y + (size_t)(r0 + r) * p->out_c + o);
            }
        }
        lut_rows(p, y, r0, rows);
    }
}


/* CONV_2D / FULLY_CONNECTED: x int8 NHWC [batch][in_h][in_w][in_c] -> y int8 [batch][out_h][out_w][out_c],
 * on the matrix-product path chosen by intq_native_init. */
void intq_conv(const intq_conv_params *p, const int8_t *x, int8_t *y) {
    const int64_t m = (int64_t)p->batch * p->out_h * p->out_w;
    switch (intq_path) {
#ifdef INTQ_AMX
    case PATH_AMX:
#ifdef INTQ_VNNI
        if (direct_fits(p)) {
            conv_amx_direct(p, x, y);
            return;
        }
        /* fewer rows than one tile (a FULLY_CONNECTED row, a tiny feature map): the tile set-up costs
         * more than it saves (measured: FC 1x1280x1000 27.5 us AMX, 22.3 us VNNI) */
        if (m < 16) {
            conv_vnni(p, x, y, m);
            return;
        }
#endif
        conv_amx(p, x, y, m);
        return;
#endif
#ifdef INTQ_VNNI
    case PATH_VNNI:
        conv_vnni(p, x, y, m);
        return;
#endif
#ifdef INTQ_AVXVNNI
    case PATH_AVXVNNI:
        conv_avxvnni(p, x, y, m);
        return;
#endif
#ifdef INTQ_AVX2
    case PATH_AVX2:
        if (p->w16 && p->a16) { /* packed for this path (intq.runtime.native.accelerate) */
            conv_avx2(p, x, y, m);
            return;
        }
        break;
#endif
#ifdef INTQ_DOTPROD
    case PATH_DOTPROD:
        conv_dot(p, x, y, m);
        return;
#endif
#ifdef INTQ_NEON
    case PATH_NEON:
        conv_neon(p, x, y, m);
        return;
#endif
    default:
        break;
    }
    conv_c(p, x, y, m);
}
/* ------------------------------------------------------------------------------ depthwise */

typedef struct {
    int32_t batch, in_h, in_w, c, out_h, out_w;
    int32_t kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
    int32_t in_zp;
    const int32_t *w; /* [kh * kw][cp]: w & 0xFFFF (cp = c padded to 16, zeros beyond c) */
    intq_rq rq;       /* offset b - Z_x sum_taps(w), padded to cp */
    int32_t *acc;     /* scratch [cp] */
    const int8_t *lut; /* NULL, or a 256-entry table applied to each finished output row of y into z */
    int8_t *z;
    const int32_t *prefix; /* [kh + 1][kw + 1][cp]: sum of w over taps [0, i) x [0, j) (window offsets) */
    int8_t *padded;        /* NULL, or scratch [pad_h][pad_w][c]: one image with its border of Z_x */
    int32_t pad_h, pad_w;  /* pad_top + the rows (columns) the taps reach */
} intq_dw_params;

/* DEPTHWISE_CONV_2D, depth multiplier 1: y[n,oy,ox,c] = requant(offset[c] + sum_taps x * w).
 *
 * Weights: int32 [taps][cp] holding w & 0xFFFF (the int16 bits of w, high half zero); (int16_t)
 * recovers w. Vectors (the layer above: AVX-512, AVX2, NEON): per pair of output pixels, one
 * pointer per in-image tap and pixel (the taps outside the image folded into the offset, see
 * intq_depthwise), then VL channels at a time over the taps, each weight vector loaded once for
 * both pixels; four pixels per weight load where their windows are whole in the row direction. The
 * product x * w is v_madd16: VPDPWSSD / VPMADDWD on int16 pairs — x sign-extended to 32 bits is
 * the pair (x, sign), the weight the pair (w, 0), so the pair sum is x * w exactly; NEON multiplies
 * the sign-extended int16 by x (|x w| <= 2^22). */

/* The tap indices [*lo, *hi) of one axis whose input coordinate o * stride - pad + i * dil lies in
 * [0, size) (a contiguous range; empty: lo = hi). */
static inline void dw_inside(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t size, int32_t *lo,
                             int32_t *hi) {
    int32_t a = 0, b = k;
    const int32_t base = o * stride - pad;
    while (a < k && base + a * dil < 0) ++a;
    while (b > a && base + (b - 1) * dil >= size) --b;
    *lo = a;
    *hi = b;
}

#define DW_CACHE 8 /* offsets of the clipped tap windows kept per call */

#ifdef VL
/* VL-channel blocks of one pixel pair over `taps` taps: acc = offset + sum_t x(tap_t) w(t). */
static inline void dw_pair(const intq_dw_params *p, const int32_t *offset, int32_t taps, const int8_t *const *tap0,
                           const int8_t *const *tap1, const int32_t *widx, int pair, int8_t *out0, int8_t *out1,
                           vi32 zp, vi32 lo, vi32 hi) {
    const int32_t c = p->c, cp = (c + 15) / 16 * 16;
    for (int32_t ch = 0; ch < c; ch += VL) {
        const vvalid valid = v_valid(c - ch);
        rq_vec v;
        rq_vec_load(&v, &p->rq, ch);
        v.off = v_load(offset + ch);
        vi32 acc0 = v_zero(), acc1 = acc0;
        const int32_t *w = p->w + ch;
        for (int32_t t = 0; t < taps; ++t) {
            const vi32 wv = v_load(w + (size_t)widx[t] * cp);
            acc0 = v_madd16(acc0, v_load_i8n(tap0[t] + ch, valid), wv);
            if (pair) acc1 = v_madd16(acc1, v_load_i8n(tap1[t] + ch, valid), wv);
        }
        v_store_i8n(out0 + ch, valid, v_rq(acc0, &v, zp, lo, hi));
        if (pair) v_store_i8n(out1 + ch, valid, v_rq(acc1, &v, zp, lo, hi));
    }
}

/* Four neighbouring output pixels whose windows span every tap column inside the image and the tap
 * rows [i0, i1) (x0: the first one's tap (i0, 0); offset: that window's, see intq_depthwise): per
 * VL-channel block, each weight vector loaded once for the four, the tap addresses by arithmetic;
 * the same sums as dw_pair (offset + sum over the window's taps x * w). */
static inline void dw_quad(const intq_dw_params *p, const int8_t *x0, int32_t in_w, int32_t i0, int32_t i1,
                           const int32_t *offset, int8_t *out, vi32 zp, vi32 lo, vi32 hi) {
    const int32_t c = p->c, cp = (c + 15) / 16 * 16;
    const size_t step = (size_t)p->stride_w * c, drow = (size_t)p->dil_h * in_w * c, dcol = (size_t)p->dil_w * c;
    for (int32_t ch = 0; ch < c; ch += VL) {
        const vvalid valid = v_valid(c - ch);
        rq_vec v; /* the block's requantization vectors, for the four pixels (v_rq adds the offset) */
        rq_vec_load(&v, &p->rq, ch);
        v.off = v_load(offset + ch);
        vi32 a0 = v_zero(), a1 = a0, a2 = a0, a3 = a0;
        const int32_t *w = p->w + (size_t)i0 * p->kw * cp + ch;
        if (v_full(valid)) { /* a whole block: plain loads */
            for (int32_t i = 0; i < i1 - i0; ++i) {
                const int8_t *r = x0 + i * drow + ch;
                for (int32_t j = 0; j < p->kw; ++j, w += cp, r += dcol) {
                    const vi32 wv = v_load(w);
                    a0 = v_madd16(a0, v_load_i8(r), wv);
                    a1 = v_madd16(a1, v_load_i8(r + step), wv);
                    a2 = v_madd16(a2, v_load_i8(r + 2 * step), wv);
                    a3 = v_madd16(a3, v_load_i8(r + 3 * step), wv);
                }
            }
        } else { /* the last channels: partial loads (nothing read beyond them) */
            for (int32_t i = 0; i < i1 - i0; ++i) {
                const int8_t *r = x0 + i * drow + ch;
                for (int32_t j = 0; j < p->kw; ++j, w += cp, r += dcol) {
                    const vi32 wv = v_load(w);
                    a0 = v_madd16(a0, v_load_i8n(r, valid), wv);
                    a1 = v_madd16(a1, v_load_i8n(r + step, valid), wv);
                    a2 = v_madd16(a2, v_load_i8n(r + 2 * step, valid), wv);
                    a3 = v_madd16(a3, v_load_i8n(r + 3 * step, valid), wv);
                }
            }
        }
        v_store_i8n(out + ch, valid, v_rq(a0, &v, zp, lo, hi));
        v_store_i8n(out + c + ch, valid, v_rq(a1, &v, zp, lo, hi));
        v_store_i8n(out + 2 * c + ch, valid, v_rq(a2, &v, zp, lo, hi));
        v_store_i8n(out + 3 * c + ch, valid, v_rq(a3, &v, zp, lo, hi));
    }
}

/* One output pixel on its whole window (x0: its tap (0, 0); rows in_w pixels apart): dw_quad's sums
 * for a single pixel. */
static void dw_one(const intq_dw_params *p, const int8_t *x0, int32_t in_w, int8_t *out, vi32 zp, vi32 lo, vi32 hi) {
    const int32_t c = p->c, cp = (c + 15) / 16 * 16;
    const size_t drow = (size_t)p->dil_h * in_w * c, dcol = (size_t)p->dil_w * c;
    for (int32_t ch = 0; ch < c; ch += VL) {
        const vvalid valid = v_valid(c - ch);
        rq_vec v;
        rq_vec_load(&v, &p->rq, ch);
        vi32 a0 = v_zero();
        const int32_t *w = p->w + ch;
        for (int32_t i = 0; i < p->kh; ++i) {
            const int8_t *r = x0 + i * drow + ch;
            for (int32_t j = 0; j < p->kw; ++j, w += cp, r += dcol) a0 = v_madd16(a0, v_load_i8n(r, valid), v_load(w));
        }
        v_store_i8n(out + ch, valid, v_rq(a0, &v, zp, lo, hi));
    }
}

/* The whole map from a copy of each image inside a border of Z_x (p->padded): every pixel on its
 * whole window with the offset b - Z_x sum(w) (a border tap reads Z_x, whose product the offset
 * cancels: the sum over in-image taps of (x - Z_x) w, as the clipped windows compute), four at a
 * time. For small maps, where most pixels' windows are clipped. */
static void dw_from_padded(const intq_dw_params *p, const int8_t *x, int8_t *y) {
    const int32_t c = p->c, pw = p->pad_w;
    const vi32 zp = v_set1(p->rq.out_zp), lo = v_set1(p->rq.act_min), hi = v_set1(p->rq.act_max);
    for (int32_t n = 0; n < p->batch; ++n) {
        memset(p->padded, (int)(int8_t)p->in_zp, (size_t)p->pad_h * pw * c);
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * c;
        for (int32_t iy = 0; iy < p->in_h; ++iy)
            memcpy(p->padded + ((size_t)(iy + p->pad_top) * pw + p->pad_left) * c, xb + (size_t)iy * p->in_w * c,
                   (size_t)p->in_w * c);
        for (int32_t oy = 0; oy < p->out_h; ++oy) {
            const int8_t *row = p->padded + (size_t)oy * p->stride_h * pw * c;
            int8_t *out = y + ((size_t)n * p->out_h + oy) * p->out_w * c;
            int32_t ox = 0;
            for (; ox + 4 <= p->out_w; ox += 4)
                dw_quad(p, row + (size_t)ox * p->stride_w * c, pw, 0, p->kh, p->rq.offset, out + (size_t)ox * c, zp, lo, hi);
            for (; ox < p->out_w; ++ox) dw_one(p, row + (size_t)ox * p->stride_w * c, pw, out + (size_t)ox * c, zp, lo, hi);
            if (p->lut) {
                const size_t at = ((size_t)n * p->out_h + oy) * p->out_w * c;
                intq_lut(p->lut, (int64_t)p->out_w * c, y + at, p->z + at);
            }
        }
    }
}
#endif

void intq_depthwise(const intq_dw_params *p, const int8_t *x, int8_t *y) {
    const int32_t c = p->c, cp = (c + 15) / 16 * 16;
#ifdef VL
    if (p->padded) {
        dw_from_padded(p, x, y);
        return;
    }
    /* A tap outside the image reads Z_x, and the offset holds b - Z_x sum_taps(w): its product
     * Z_x w cancels. Each pixel runs on its taps inside the image only, the window [i0, i1) x
     * [j0, j1), from the offset b - Z_x sum_window(w) = offset + Z_x sum_outside(w) (integers:
     * the same sum; cached per window); two neighbours with the same window run as a pair (one
     * weight load for both), a pixel whose right neighbour's window differs runs alone. */
    const int32_t taps = p->kh * p->kw;
    const int8_t *tap0[taps], *tap1[taps];
    int32_t widx[taps];
    int32_t cache[DW_CACHE][cp];
    int32_t key[DW_CACHE][4];
    int32_t cached = 0, next = 0;
    const vi32 zp = v_set1(p->rq.out_zp), lo = v_set1(p->rq.act_min), hi = v_set1(p->rq.act_max);
    for (int32_t n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * c;
        for (int32_t oy = 0; oy < p->out_h; ++oy) {
            int32_t i0, i1, pair = 0;
            dw_inside(oy, p->stride_h, p->pad_top, p->dil_h, p->kh, p->in_h, &i0, &i1);
            for (int32_t ox = 0; ox < p->out_w; ox += 1 + pair) {
                int8_t *out0 = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * c, *out1 = out0 + c;
                int32_t j0, j1, k0 = -1, k1 = -1;
                dw_inside(ox, p->stride_w, p->pad_left, p->dil_w, p->kw, p->in_w, &j0, &j1);
                if (ox + 1 < p->out_w) dw_inside(ox + 1, p->stride_w, p->pad_left, p->dil_w, p->kw, p->in_w, &k0, &k1);
                pair = j0 == k0 && j1 == k1; /* else this pixel alone, on its own window */
                const int32_t *offset = p->rq.offset;
                if (i1 - i0 != p->kh || j1 - j0 != p->kw) {
                    int32_t slot = -1;
                    for (int32_t s = 0; s < cached; ++s)
                        if (key[s][0] == i0 && key[s][1] == i1 && key[s][2] == j0 && key[s][3] == j1) slot = s;
                    if (slot < 0) {
                        slot = next;
                        next = (next + 1) % DW_CACHE;
                        if (cached < DW_CACHE) ++cached;
                        key[slot][0] = i0, key[slot][1] = i1, key[slot][2] = j0, key[slot][3] = j1;
                        /* offset + Z_x (sum of all taps - sum of the window), the window's sum from
                         * four prefix sums (vectors: 32-bit wrapping, the same integers mod 2^32 as
                         * the tap-by-tap sum, and the final accumulator fits int32) */
                        int32_t *off = cache[slot];
                        const int32_t row = (p->kw + 1) * cp;
                        const int32_t *all = p->prefix + (size_t)p->kh * row + (size_t)p->kw * cp;
                        const int32_t *a11 = p->prefix + (size_t)i1 * row + (size_t)j1 * cp,
                                      *a01 = p->prefix + (size_t)i0 * row + (size_t)j1 * cp,
                                      *a10 = p->prefix + (size_t)i1 * row + (size_t)j0 * cp,
                                      *a00 = p->prefix + (size_t)i0 * row + (size_t)j0 * cp;
                        const vi32 zx = v_set1(p->in_zp);
                        for (int32_t q = 0; q < cp; q += VL) {
                            const vi32 inside = v_add(v_sub(v_load(a11 + q), v_load(a01 + q)),
                                                      v_sub(v_load(a00 + q), v_load(a10 + q)));
                            const vi32 outside = v_sub(v_load(all + q), inside);
                            v_store(off + q, v_add(v_load(p->rq.offset + q), v_mullo(zx, outside)));
                        }
                    }
                    offset = cache[slot];
                }
                if (i1 > i0 && ox + 4 <= p->out_w) {
                    /* four pixels whose windows have every tap column inside the image (the first's
                     * leftmost and the last's rightmost): dw_quad, on this row window's offset */
                    const int32_t first = ox * p->stride_w - p->pad_left;
                    if (first >= 0 && first + 3 * p->stride_w + (p->kw - 1) * p->dil_w < p->in_w) {
                        const int32_t iy = oy * p->stride_h - p->pad_top + i0 * p->dil_h;
                        dw_quad(p, xb + ((size_t)iy * p->in_w + first) * c, p->in_w, i0, i1, offset, out0, zp, lo, hi);
                        pair = 3;
                        continue;
                    }
                }
                int32_t m = 0;
                for (int32_t i = i0; i < i1; ++i) {
                    const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
                    for (int32_t j = j0; j < j1; ++j, ++m) {
                        const int32_t ix = ox * p->stride_w - p->pad_left + j * p->dil_w;
                        widx[m] = i * p->kw + j;
                        tap0[m] = xb + ((size_t)iy * p->in_w + ix) * c;
                        tap1[m] = pair ? tap0[m] + (size_t)p->stride_w * c : tap0[m];
                    }
                }
                dw_pair(p, offset, m, tap0, tap1, widx, pair, out0, out1, zp, lo, hi);
            }
            if (p->lut) {
                const size_t row = ((size_t)n * p->out_h + oy) * p->out_w * c;
                intq_lut(p->lut, (int64_t)p->out_w * c, y + row, p->z + row);
            }
        }
    }
#else
    for (int32_t n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * c;
        for (int32_t oy = 0; oy < p->out_h; ++oy) {
            for (int32_t ox = 0; ox < p->out_w; ++ox) {
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * c;
                int32_t *acc = p->acc;
                memcpy(acc, p->rq.offset, sizeof(int32_t) * (size_t)c);
                for (int32_t i = 0; i < p->kh; ++i) {
                    const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
                    for (int32_t j = 0; j < p->kw; ++j) {
                        const int32_t ix = ox * p->stride_w - p->pad_left + j * p->dil_w;
                        const int32_t *wt = p->w + (size_t)(i * p->kw + j) * cp;
                        if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                            for (int32_t q = 0; q < c; ++q) acc[q] += p->in_zp * (int16_t)wt[q];
                        } else {
                            const int8_t *src = xb + ((size_t)iy * p->in_w + ix) * c;
                            for (int32_t q = 0; q < c; ++q) acc[q] += src[q] * (int16_t)wt[q];
                        }
                    }
                }
                for (int32_t q = 0; q < c; ++q)
                    out[q] = (int8_t)rq_scalar(acc[q], p->rq.mult[q], p->rq.exponent[q], p->rq.away[q], p->rq.out_zp,
                                               p->rq.act_min, p->rq.act_max);
            }
            if (p->lut) {
                const size_t row = ((size_t)n * p->out_h + oy) * p->out_w * c;
                intq_lut(p->lut, (int64_t)p->out_w * c, y + row, p->z + row);
            }
        }
    }
#endif
}

/* ------------------------------------------------------------------------------ ADD, SUB, MUL */

typedef struct {
    int64_t rows;
    int32_t cols;
    int32_t a_rows, a_cols, b_rows, b_cols; /* 1 where that operand broadcasts (MUL); ADD: rows, cols */
    int32_t za, zb;                         /* MUL: the inputs' zero points */
    const int32_t *table_a, *table_b;       /* ADD / SUB: [256] rescaled inputs, indexed by the uint8 bits */
    int32_t mult, left, right, away, out_zp, act_min, act_max;
    int32_t square;                         /* intq_add: 1 for SQUARED_DIFFERENCE, 0 for ADD / SUB */
} intq_binary_params;

/* MUL (intq.kernels.mul, the reference kernel): y = clamp(SRDHM(((a - Z_a)(b - Z_b)) << left, m)
 * RDBPOT right + Z_y); |(a - Z_a)(b - Z_b)| << left fits int32 (the kernel's prepare). a and b are
 * [rows][cols] operands or one broadcast row ([1][cols] or [1][1]). */
void intq_mul(const intq_binary_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
#ifdef VL
    rq_vec v;
    rq_vec_set(&v, v_zero(), v_set1(p->mult), v_set1(p->right), v_set1(p->away));
    const vi32 left = v_set1(p->left), zp = v_set1(p->out_zp), lo = v_set1(p->act_min), hi = v_set1(p->act_max);
    const int a_full = p->a_rows == p->rows && p->a_cols == p->cols, b_full = p->b_rows == p->rows && p->b_cols == p->cols;
    if (p->rows > 1 && p->cols <= 2048 &&
        ((a_full && p->b_rows == 1 && p->b_cols == p->cols) || (b_full && p->a_rows == 1 && p->a_cols == p->cols))) {
        /* one operand a row [1, C] broadcast over the other's rows (the squeeze-excitation product):
         * the row's (b - Z_b) vectors made once, the other operand in one flat pass of VL lanes when
         * C is a multiple of VL (the product commutes), else row by row */
        const int8_t *full = a_full ? a : b, *row = a_full ? b : a;
        const vi32 zf = v_set1(a_full ? p->za : p->zb), zr = v_set1(a_full ? p->zb : p->za);
        const int32_t nb = (p->cols + VL - 1) / VL;
        vi32 rv[nb];
        for (int32_t k = 0; k < nb; ++k) rv[k] = v_sub(v_load_i8n(row + VL * k, v_valid(p->cols - VL * k)), zr);
        if (p->cols % VL == 0) {
            const int64_t total = p->rows * (int64_t)p->cols;
            for (int64_t i = 0, k = 0; i < total; i += VL) {
                const vi32 prod = v_mullo(v_sub(v_load_i8(full + i), zf), rv[k]);
                v_store_i8n(y + i, v_valid(VL), v_rq_shl(prod, left, &v, zp, lo, hi));
                if (++k == nb) k = 0;
            }
            return;
        }
        for (int64_t r = 0; r < p->rows; ++r) { /* row by row, the last block of each partial */
            const int8_t *fr = full + r * p->cols;
            int8_t *yr = y + r * p->cols;
            for (int32_t k = 0; k < nb; ++k) {
                const vvalid valid = v_valid(p->cols - VL * k);
                const vi32 prod = v_mullo(v_sub(v_load_i8n(fr + VL * k, valid), zf), rv[k]);
                v_store_i8n(yr + VL * k, valid, v_rq_shl(prod, left, &v, zp, lo, hi));
            }
        }
        return;
    }
#endif
    for (int64_t r = 0; r < p->rows; ++r) {
        const int8_t *ar = a + (p->a_rows > 1 ? r * p->a_cols : 0), *br = b + (p->b_rows > 1 ? r * p->b_cols : 0);
        int8_t *yr = y + r * p->cols;
        int32_t c = 0;
#ifdef VL
        const vi32 za = v_set1(p->za), zb = v_set1(p->zb), a1 = v_set1(ar[0]), b1 = v_set1(br[0]);
        for (; c < p->cols; c += VL) {
            const vvalid valid = v_valid(p->cols - c);
            const vi32 av = p->a_cols > 1 ? v_load_i8n(ar + c, valid) : a1;
            const vi32 bv = p->b_cols > 1 ? v_load_i8n(br + c, valid) : b1;
            const vi32 prod = v_mullo(v_sub(av, za), v_sub(bv, zb));
            v_store_i8n(yr + c, valid, v_rq_shl(prod, left, &v, zp, lo, hi));
        }
#endif
        for (; c < p->cols; ++c) {
            const int32_t prod = (ar[p->a_cols > 1 ? c : 0] - p->za) * (br[p->b_cols > 1 ? c : 0] - p->zb);
            yr[c] = (int8_t)rq_shl_scalar(prod, p->left, p->mult, p->right, p->away, p->out_zp,
                                      p->act_min, p->act_max);
        }
    }
}

/* The two-table binary ops, a and b as MUL's ([rows][cols] or one broadcast row or value):
 *   ADD and SUB (intq.kernels.add's reference kernel; SUB: table_b negated), square = 0:
 *     y = clamp(requant(table_a[a] + table_b[b]) + Z_y), no left shift (|sum| < 2^28);
 *   SQUARED_DIFFERENCE (intq.kernels.squared_difference), square = 1:
 *     y = clamp(requant((table_a[a] - table_b[b])^2 << left) + Z_y): the square < 2^30, and shifted
 *     left (TFLM's output multiplier of 1 or more) within int32 (the kernel's prepare checks both).
 * The tables are the kernels' prepared rescaled inputs, indexed by the uint8 bits of the code;
 * requant is rq_scalar / v_rq (rq_shl_scalar / v_rq_shl: the same after the shift). */
static inline void table_binary(const intq_binary_params *p, const int8_t *a, const int8_t *b, int8_t *y,
                                const int square) {
#ifdef VL
    rq_vec v;
    rq_vec_set(&v, v_zero(), v_set1(p->mult), v_set1(p->right), v_set1(p->away));
    const vi32 zp = v_set1(p->out_zp), lo = v_set1(p->act_min), hi = v_set1(p->act_max), left = v_set1(p->left);
#endif
    for (int64_t r = 0; r < p->rows; ++r) {
        const int8_t *ar = a + (p->a_rows > 1 ? r * p->a_cols : 0), *br = b + (p->b_rows > 1 ? r * p->b_cols : 0);
        int8_t *yr = y + r * p->cols;
        int32_t c = 0;
#ifdef VL
        const vi32 a1 = v_set1(p->table_a[(uint8_t)ar[0]]), b1 = v_set1(p->table_b[(uint8_t)br[0]]);
        for (; c < p->cols; c += VL) {
            const vvalid valid = v_valid(p->cols - c);
            const vi32 av = p->a_cols > 1 ? v_gather(p->table_a, ar + c, valid) : a1;
            const vi32 bv = p->b_cols > 1 ? v_gather(p->table_b, br + c, valid) : b1;
            if (square) {
                const vi32 d = v_sub(av, bv);
                v_store_i8n(yr + c, valid, v_rq_shl(v_mullo(d, d), left, &v, zp, lo, hi));
            } else {
                v_store_i8n(yr + c, valid, v_rq(v_add(av, bv), &v, zp, lo, hi));
            }
        }
#endif
        for (; c < p->cols; ++c) {
            const int32_t ta = p->table_a[(uint8_t)ar[p->a_cols > 1 ? c : 0]];
            const int32_t tb = p->table_b[(uint8_t)br[p->b_cols > 1 ? c : 0]];
            yr[c] = (int8_t)(square ? rq_shl_scalar((ta - tb) * (ta - tb), p->left, p->mult, p->right, p->away,
                                                    p->out_zp, p->act_min, p->act_max)
                                    : rq_scalar(ta + tb, p->mult, p->right, p->away, p->out_zp, p->act_min, p->act_max));
        }
    }
}

/* ADD, SUB and SQUARED_DIFFERENCE (table_binary, each body compiled on its own). */
void intq_add(const intq_binary_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
    if (p->square)
        table_binary(p, a, b, y, 1);
    else
        table_binary(p, a, b, y, 0);
}

/* ------------------------------------------------------------------------------ 16x8 ADD, SUB, MUL */

typedef struct {
    int64_t rows;
    int32_t cols, a_rows, a_cols, b_rows, b_cols; /* as intq_binary_params: [rows][cols], a row, a value */
    int32_t op;                                   /* 0 ADD, 1 SUB, 2 MUL */
    int32_t mult_a, right_a, mult_b, right_b;     /* ADD / SUB: the inputs' rescales (right shifts) */
    int32_t mult, left, right, act_min, act_max;  /* the output's */
} intq_binary16_params;

#ifdef VL
/* VL int16 values sign-extended to int32 lanes; VL lanes (values in [-2^15, 2^15)) stored as int16. */
#if defined(INTQ_AVX512)
static inline vi32 v_load_i16(const int16_t *p) {
    return _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)p));
}
static inline void v_store_i16(int16_t *p, vi32 y) { _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(y)); }
#elif defined(INTQ_AVX2)
static inline vi32 v_load_i16(const int16_t *p) { return _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline void v_store_i16(int16_t *p, vi32 y) { /* saturating pack: exact on int16 values */
    _mm_storeu_si128((__m128i *)p, _mm_packs_epi32(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1)));
}
#elif defined(INTQ_NEON)
static inline vi32 v_load_i16(const int16_t *p) { return vmovl_s16(vld1_s16(p)); }
static inline void v_store_i16(int16_t *p, vi32 y) { vst1_s16(p, vmovn_s32(y)); }
#endif
#endif

/* The 16x8 ADD, SUB and MUL reference kernels (intq.kernels.add / sub / mul ``run_int16``: TFLM's
 * int16 arithmetic, zero points 0), a and b in intq_add's layouts:
 *   ADD, SUB: y = clamp(MBQM(MBQM(a << 15, m_a, -r_a) +- MBQM(b << 15, m_b, -r_b), m, -r)): each
 *     input multiplier below 1/2 and |a << 15| <= 2^30, so the sum stays within 2^30 (the kernel's
 *     prepare: every multiplier from QuantizeMultiplierSmallerThanOneExp, no left shift);
 *   MUL: y = clamp(MBQM(a b, m, s)) with |a b| <= 2^30, a left shift wrapping in int32 as the
 *     kernel's int32 arithmetic does (:func:`intq.qmath.raw.mbqm`);
 * MBQM with gemmlowp's rounding: rq_scalar / rq_shl_scalar (ties away, Z = 0; the inner rescales
 * unclamped), v_rq / v_rq_shl on whole vectors, the scalar body on the rest of a row. */
static inline int32_t add16_scalar(const intq_binary16_params *p, int32_t a, int32_t b, const int op) {
    if (op == 2) return rq_shl_scalar(a * b, p->left, p->mult, p->right, 1, 0, p->act_min, p->act_max);
    const int32_t sa = rq_scalar((int32_t)((uint32_t)a << 15), p->mult_a, p->right_a, 1, 0, INT32_MIN, INT32_MAX);
    const int32_t sb = rq_scalar((int32_t)((uint32_t)b << 15), p->mult_b, p->right_b, 1, 0, INT32_MIN, INT32_MAX);
    return rq_scalar(op == 1 ? sa - sb : sa + sb, p->mult, p->right, 1, 0, p->act_min, p->act_max);
}

static inline void binary16(const intq_binary16_params *p, const int16_t *a, const int16_t *b, int16_t *y,
                            const int op) {
#ifdef VL
    rq_vec va, vb, vo;
    const vi32 one = v_set1(1), zero = v_zero(), fifteen = v_set1(15), left = v_set1(p->left);
    rq_vec_set(&va, zero, v_set1(p->mult_a), v_set1(p->right_a), one);
    rq_vec_set(&vb, zero, v_set1(p->mult_b), v_set1(p->right_b), one);
    rq_vec_set(&vo, zero, v_set1(p->mult), v_set1(p->right), one);
    const vi32 lo = v_set1(p->act_min), hi = v_set1(p->act_max), all_lo = v_set1(INT32_MIN), all_hi = v_set1(INT32_MAX);
#endif
    for (int64_t r = 0; r < p->rows; ++r) {
        const int16_t *ar = a + (p->a_rows > 1 ? r * p->a_cols : 0), *br = b + (p->b_rows > 1 ? r * p->b_cols : 0);
        int16_t *yr = y + r * p->cols;
        int32_t c = 0;
#ifdef VL
        const vi32 a1 = v_set1(ar[0]), b1 = v_set1(br[0]);
        for (; c + VL <= p->cols; c += VL) {
            const vi32 av = p->a_cols > 1 ? v_load_i16(ar + c) : a1, bv = p->b_cols > 1 ? v_load_i16(br + c) : b1;
            vi32 out;
            if (op == 2) {
                out = v_rq_shl(v_mullo(av, bv), left, &vo, zero, lo, hi);
            } else {
                const vi32 sa = v_rq_shl(av, fifteen, &va, zero, all_lo, all_hi);
                const vi32 sb = v_rq_shl(bv, fifteen, &vb, zero, all_lo, all_hi);
                out = v_rq(op == 1 ? v_sub(sa, sb) : v_add(sa, sb), &vo, zero, lo, hi);
            }
            v_store_i16(yr + c, out);
        }
#endif
        for (; c < p->cols; ++c)
            yr[c] = (int16_t)add16_scalar(p, ar[p->a_cols > 1 ? c : 0], br[p->b_cols > 1 ? c : 0], op);
    }
}

void intq_binary16(const intq_binary16_params *p, const int16_t *a, const int16_t *b, int16_t *y) {
    switch (p->op) {
    case 0: binary16(p, a, b, y, 0); break;
    case 1: binary16(p, a, b, y, 1); break;
    default: binary16(p, a, b, y, 2); break;
    }
}

/* ------------------------------------------------------------------------------ MAX_POOL_2D */

typedef struct {
    int32_t batch, in_h, in_w, c, out_h, out_w, filter_h, filter_w, stride_h, stride_w, pad_h, pad_w;
    int32_t act_min, act_max;
} intq_pool_params;

/* MAX_POOL_2D (intq.kernels.max_pool_2d): the maximum over each window clipped to the image,
 * starting from -128, clamped to [act_min, act_max]. */
void intq_max_pool(const intq_pool_params *p, const int8_t *x, int8_t *y) {
    const int32_t c = p->c;
    for (int32_t n = 0; n < p->batch; ++n) {
        const int8_t *xb = x + (size_t)n * p->in_h * p->in_w * c;
        for (int32_t oy = 0; oy < p->out_h; ++oy) {
            const int32_t y0 = oy * p->stride_h - p->pad_h, iy0 = y0 < 0 ? 0 : y0,
                          iy1 = y0 + p->filter_h < p->in_h ? y0 + p->filter_h : p->in_h;
            for (int32_t ox = 0; ox < p->out_w; ++ox) {
                const int32_t x0 = ox * p->stride_w - p->pad_w, ix0 = x0 < 0 ? 0 : x0,
                              ix1 = x0 + p->filter_w < p->in_w ? x0 + p->filter_w : p->in_w;
                int8_t *out = y + (((size_t)n * p->out_h + oy) * p->out_w + ox) * c;
                int32_t ch = 0;
#ifdef INTQ_AVX512
                for (; ch < c; ch += 64) {
                    const __mmask64 valid = c - ch >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (c - ch)) - 1);
                    __m512i m = _mm512_set1_epi8(-128);
                    for (int32_t iy = iy0; iy < iy1; ++iy)
                        for (int32_t ix = ix0; ix < ix1; ++ix)
                            m = _mm512_max_epi8(m, _mm512_maskz_loadu_epi8(valid, xb + ((size_t)iy * p->in_w + ix) * c + ch));
                    m = _mm512_min_epi8(_mm512_max_epi8(m, _mm512_set1_epi8((char)p->act_min)),
                                        _mm512_set1_epi8((char)p->act_max));
                    _mm512_mask_storeu_epi8(out + ch, valid, m);
                }
#elif defined(INTQ_AVX2)
                for (; ch + 32 <= c; ch += 32) {
                    __m256i m = _mm256_set1_epi8(-128);
                    for (int32_t iy = iy0; iy < iy1; ++iy)
                        for (int32_t ix = ix0; ix < ix1; ++ix)
                            m = _mm256_max_epi8(m, _mm256_loadu_si256((const __m256i *)(xb + ((size_t)iy * p->in_w + ix) * c + ch)));
                    m = _mm256_min_epi8(_mm256_max_epi8(m, _mm256_set1_epi8((char)p->act_min)), _mm256_set1_epi8((char)p->act_max));
                    _mm256_storeu_si256((__m256i *)(out + ch), m);
                }
#elif defined(INTQ_NEON)
                for (; ch + 16 <= c; ch += 16) {
                    int8x16_t m = vdupq_n_s8(-128);
                    for (int32_t iy = iy0; iy < iy1; ++iy)
                        for (int32_t ix = ix0; ix < ix1; ++ix) m = vmaxq_s8(m, vld1q_s8(xb + ((size_t)iy * p->in_w + ix) * c + ch));
                    vst1q_s8(out + ch, vminq_s8(vmaxq_s8(m, vdupq_n_s8((int8_t)p->act_min)), vdupq_n_s8((int8_t)p->act_max)));
                }
#endif
                for (; ch < c; ++ch) {
                    int32_t m = -128;
                    for (int32_t iy = iy0; iy < iy1; ++iy)
                        for (int32_t ix = ix0; ix < ix1; ++ix) {
                            const int32_t v = xb[((size_t)iy * p->in_w + ix) * c + ch];
                            m = v > m ? v : m;
                        }
                    m = m < p->act_min ? p->act_min : (m > p->act_max ? p->act_max : m);
                    out[ch] = (int8_t)m;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------------ TRANSPOSE */

/* TRANSPOSE of an int8 tensor of rank <= 4 (ranks below 4 padded with leading 1s): y[i0][i1][i2][i3]
 * = x at input strides in_stride[k] of the axis that output axis k reads (perm). */
typedef struct {
    int64_t out_dim[4];
    int64_t in_stride[4]; /* elements, input stride of the input axis perm[k] */
} intq_transpose_params;

void intq_transpose(const intq_transpose_params *p, const int8_t *x, int8_t *y) {
    const int64_t *d = p->out_dim, *s = p->in_stride;
#if defined(INTQ_AVX512) && defined(__AVX512VBMI__)
    __m512i idx[4];
    __mmask64 high[4];
    if (s[3] != 1 && s[2] == 1 && d[3] >= 2 && d[3] <= 4) { /* the permutes of the interleaving loop below */
        const int32_t g = (int32_t)d[3];
        for (int32_t k = 0; k < g; ++k) {
            uint8_t v[64];
            high[k] = 0;
            for (int32_t t = 0; t < 64; ++t) {
                const int32_t q = 64 * k + t, plane = q % g;
                v[t] = (uint8_t)(q / g + 64 * (plane & 1));
                if (plane >= 2) high[k] |= (__mmask64)1 << t;
            }
            idx[k] = _mm512_loadu_si512((const void *)v);
        }
    }
#endif
    for (int64_t i0 = 0; i0 < d[0]; ++i0)
        for (int64_t i1 = 0; i1 < d[1]; ++i1)
            for (int64_t i2 = 0; i2 < d[2]; ++i2) {
                const int8_t *src = x + i0 * s[0] + i1 * s[1] + i2 * s[2];
                if (s[3] != 1 && s[2] == 1) {
                    /* the input contiguous along output axis 2 (NCHW -> NHWC): the whole [d2][d3]
                     * block, reading each input run in order (i3 outer), the writes d3 apart */
                    int64_t j0 = 0;
#if defined(INTQ_AVX512) && defined(__AVX512VBMI__)
                    if (d[3] >= 2 && d[3] <= 4) {
                        /* 64 columns at a time: the d3 input runs in registers, each of the d3
                         * output vectors two two-register byte permutes (runs 0/1 and 2/3) blended;
                         * output byte q of the block is column q / d3 of run q % d3 */
                        const int32_t g = (int32_t)d[3];
                        for (; j0 + 64 <= d[2]; j0 += 64) {
                            const __m512i r0 = _mm512_loadu_si512((const void *)(src + j0)),
                                          r1 = _mm512_loadu_si512((const void *)(src + s[3] + j0)),
                                          r2 = g > 2 ? _mm512_loadu_si512((const void *)(src + 2 * s[3] + j0)) : r0,
                                          r3 = g > 3 ? _mm512_loadu_si512((const void *)(src + 3 * s[3] + j0)) : r2;
                            for (int32_t k = 0; k < g; ++k) {
                                const __m512i lo01 = _mm512_permutex2var_epi8(r0, idx[k], r1),
                                              hi23 = _mm512_permutex2var_epi8(r2, idx[k], r3);
                                _mm512_storeu_si512((void *)(y + j0 * g + 64 * k),
                                                    _mm512_mask_blend_epi8(high[k], lo01, hi23));
                            }
                        }
                    }
#endif
                    for (int64_t i3 = 0; i3 < d[3]; ++i3) {
                        const int8_t *run = src + i3 * s[3];
                        int8_t *dst = y + i3;
                        for (int64_t j = j0; j < d[2]; ++j) dst[j * d[3]] = run[j];
                    }
                    y += d[2] * d[3];
                    break;
                }
                if (s[3] == 1) {
                    memcpy(y, src, (size_t)d[3]);
                } else {
                    for (int64_t i3 = 0; i3 < d[3]; ++i3) y[i3] = src[i3 * s[3]];
                }
                y += d[3];
            }
}

/* ------------------------------------------------------------------------------ strided copies */

/* One piece of a data-movement op whose bytes go from one place to another unchanged (SPLIT's
 * output k, CONCATENATION's input k, GATHER at constant indices): the [d0][d1][d2][d3] block at
 * x + in_offset (input strides in_stride) written at y + out_offset (output strides out_stride),
 * each innermost run a memcpy where both strides are 1. Offsets and strides in elements. */
typedef struct {
    int64_t dim[4], in_stride[4], out_stride[4];
    int64_t in_offset, out_offset;
} intq_copy_params;

void intq_copy(const intq_copy_params *p, const int8_t *x, int8_t *y) {
    const int64_t *d = p->dim, *si = p->in_stride, *so = p->out_stride;
    x += p->in_offset;
    y += p->out_offset;
    for (int64_t i0 = 0; i0 < d[0]; ++i0)
        for (int64_t i1 = 0; i1 < d[1]; ++i1)
            for (int64_t i2 = 0; i2 < d[2]; ++i2) {
                const int8_t *src = x + i0 * si[0] + i1 * si[1] + i2 * si[2];
                int8_t *dst = y + i0 * so[0] + i1 * so[1] + i2 * so[2];
                if (si[3] == 1 && so[3] == 1) {
                    memcpy(dst, src, (size_t)d[3]);
                } else {
                    for (int64_t i3 = 0; i3 < d[3]; ++i3) dst[i3 * so[3]] = src[i3 * si[3]];
                }
            }
}

/* ------------------------------------------------------------------------------ PAD */

/* PAD / PADV2 of an int8 tensor of rank <= 4 (leading 1s), constant value: the output filled with
 * the value, then each innermost run of the input copied to its place. */
typedef struct {
    int64_t in_dim[4], out_dim[4], before[4];
    int32_t value;
} intq_pad_params;

void intq_pad(const intq_pad_params *p, const int8_t *x, int8_t *y) {
    const int64_t *d = p->in_dim, *o = p->out_dim, *b = p->before;
    memset(y, (int)(int8_t)p->value, (size_t)(o[0] * o[1] * o[2] * o[3]));
    if (o[3] == d[3]) { /* the innermost axis not padded: each [d2][d3] run is contiguous in both */
        for (int64_t i0 = 0; i0 < d[0]; ++i0)
            for (int64_t i1 = 0; i1 < d[1]; ++i1)
                memcpy(y + (((i0 + b[0]) * o[1] + (i1 + b[1])) * o[2] + b[2]) * o[3],
                       x + (i0 * d[1] + i1) * d[2] * d[3], (size_t)(d[2] * d[3]));
        return;
    }
    for (int64_t i0 = 0; i0 < d[0]; ++i0)
        for (int64_t i1 = 0; i1 < d[1]; ++i1)
            for (int64_t i2 = 0; i2 < d[2]; ++i2) {
                int8_t *dst = y + (((i0 + b[0]) * o[1] + (i1 + b[1])) * o[2] + (i2 + b[2])) * o[3] + b[3];
                memcpy(dst, x + ((i0 * d[1] + i1) * d[2] + i2) * d[3], (size_t)d[3]);
            }
}

/* ------------------------------------------------------------------------------ MEAN */

/* MEAN over a contiguous block of axes of an int8 tensor seen as [batch][pixels][c] (intq.kernels.mean,
 * the reference kernel: axes {1, 2} of NHWC, the spatial mean; the last axis, c = 1, LayerNorm's
 * mean and variance): y[n, c] = clamp(SRDHM(sum_p x[n,p,c] - offset, m) RDBPOT right + Z_y, -128,
 * 127), ties away from zero (after << left where the multiplier is 1 or more); |sum - offset| <= 255 *
 * pixels < 2^31 (the kernel's prepare), and the caller takes a left shift only where 255 * pixels << left
 * fits int32 (where the kernel's run cannot refuse an input). */
typedef struct {
    int32_t batch, pixels, c;
    int32_t offset, mult, right, out_zp, left; /* left: a multiplier of 1 or more (255 pixels << left < 2^31) */
    int32_t *acc; /* scratch [c] */
} intq_mean_params;

void intq_mean(const intq_mean_params *p, const int8_t *x, int8_t *y) {
    const int32_t c = p->c;
    int32_t *acc = p->acc;
    if (c == 1) { /* one sum per row: a reduction the compiler vectorizes */
        for (int32_t n = 0; n < p->batch; ++n) {
            const int8_t *xb = x + (size_t)n * p->pixels;
            int32_t sum = -p->offset;
            for (int32_t i = 0; i < p->pixels; ++i) sum += xb[i];
            y[n] = (int8_t)rq_shl_scalar(sum, p->left, p->mult, p->right, 1, p->out_zp, -128, 127);
        }
        return;
    }
    for (int32_t n = 0; n < p->batch; ++n) {
        for (int32_t q = 0; q < c; ++q) acc[q] = -p->offset;
        const int8_t *xb = x + (size_t)n * p->pixels * c;
        for (int32_t i = 0; i < p->pixels; ++i, xb += c)
            for (int32_t q = 0; q < c; ++q) acc[q] += xb[q];
        for (int32_t q = 0; q < c; ++q)
            y[(size_t)n * c + q] = (int8_t)rq_shl_scalar(acc[q], p->left, p->mult, p->right, 1, p->out_zp, -128, 127);
    }
}

/* ------------------------------------------------------------------------------ SOFTMAX */

/* gemmlowp's fixed-point steps on int32 raws held in int64 (intq.qmath.raw computes them the same
 * way: products and sums in 64 bits, no intermediate wrap). */

/*@rule fx_srdhm: SaturatingRoundingDoublingHighMul, floor((a b + 2^30) / 2^31), INT32_MIN^2 -> INT32_MAX */
static inline int64_t fx_srdhm(int64_t a, int64_t b) {
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    return (a * b + ((int64_t)1 << 30)) >> 31;
}

/*@rule fx_rdbp: RoundingDivideByPOT, ties away from zero, e in [0, 62] */
static inline int64_t fx_rdbp(int64_t x, int32_t e) {
    return (x + ((((int64_t)1) << e) >> 1) - (x < 0 && e > 0)) >> e;
}

/* SaturatingRoundingMultiplyByPOT<e> for e in [1, 30]: x << e saturated to int32. */
static inline int64_t fx_mul_by_pot(int64_t x, int32_t e) {
    const int64_t threshold = (((int64_t)1) << (31 - e)) - 1;
    return x > threshold ? INT32_MAX : (x < -threshold ? INT32_MIN : x * (((int64_t)1) << e));
}

/*@rule softmax_reciprocal: TFLite's GetReciprocal(sum, 12): 1 / sum in Q0.31 and num_bits_over_unit */
static inline int64_t softmax_reciprocal(int32_t sum, int32_t *bits_over_unit) {
    const uint32_t u = (uint32_t)sum;
    const int32_t h = u ? __builtin_clz(u) : 32; /* headroom plus one */
    *bits_over_unit = 12 - h;
    const int64_t a = (int64_t)(int32_t)((h >= 32 ? 0u : u << h) - 0x80000000u); /* in [0, 1): Q0.31 */
    /* one_over_one_plus_x_for_x_in_0_1(a): the half denominator (RoundingHalfSum(a, 1)), three
     * Newton-Raphson steps from 48/17 - 32/17 d in Q2.29, then back to Q0.31 */
    const int64_t s = a + INT32_MAX, t = s + (s >= 0 ? 1 : -1);
    const int64_t half = t >= 0 ? t >> 1 : -((-t) >> 1);
    int64_t x = 1515870810 + fx_srdhm(half, -1010580540);
    for (int32_t k = 0; k < 3; ++k) {
        const int64_t one_minus = ((int64_t)1 << 29) - fx_srdhm(half, x);
        x = x + fx_mul_by_pot(fx_srdhm(x, one_minus), 2);
    }
    return fx_mul_by_pot(x, 1);
}

/* SOFTMAX over the last axis (intq.kernels.softmax, the reference kernel: reference_ops::Softmax),
 * rows of depth int8 values, output (1/256, -128): per row, d = max - x in [0, 255]; the Q12.19
 * sum of exp_q12[d] in int32 (wrapping as C's); its reciprocal (softmax_reciprocal); y =
 * clamp(RDBPOT(SRDHM(1/sum, exp_q0[d]), bits_over_unit + 23) - 128) for d <= radius, -128 beyond.
 * The per-difference tables are the kernel's prepared ones. Returns 0, or 1 + the first row whose
 * shift leaves [0, 31] (a sum of exps >= 512: the runtimes abort, the kernel's run raises). */
typedef struct {
    int64_t rows;
    int32_t depth, radius;
    const int32_t *exp_q0, *exp_q12; /* [256] */
    int32_t masked; /* 1: exp_q0 is 0 past the radius (the vector path); 0: the radius is checked per element */
} intq_softmax_params;

int64_t intq_softmax(const intq_softmax_params *p, const int8_t *x, int8_t *y) {
    const int32_t depth = p->depth;
    for (int64_t r = 0; r < p->rows; ++r) {
        const int8_t *xr = x + r * depth;
        int8_t *yr = y + r * depth;
        int32_t top = -128;
        for (int32_t c = 0; c < depth; ++c) top = xr[c] > top ? xr[c] : top;
        uint32_t sum = 0;
        for (int32_t c = 0; c < depth; ++c) sum += (uint32_t)p->exp_q12[top - xr[c]];
        int32_t bits;
        const int64_t inverse = softmax_reciprocal((int32_t)sum, &bits);
        const int32_t e = bits + 31 - 8;
        if (e < 0 || e > 31) return r + 1;
#ifdef VL
        if (p->masked) {
            /* whole vectors: exp_q0[d] gathered (zero beyond the radius, so those lanes give -128),
             * then v_rq with the row's reciprocal as multiplier and e as exponent: on these
             * non-negative operands SRDHM and the away-from-zero RDBPOT are fx_srdhm and fx_rdbp */
            rq_vec v;
            rq_vec_set(&v, v_zero(), v_set1((int32_t)inverse), v_set1(e), v_set1(1));
            const vi32 zp = v_set1(-128), lo = v_set1(-128), hi = v_set1(127);
            int8_t dd[VL];
            for (int32_t c = 0; c < depth; c += VL) {
                const int32_t n = depth - c < VL ? depth - c : VL;
                for (int32_t j = 0; j < n; ++j) dd[j] = (int8_t)(uint8_t)(top - xr[c + j]);
                const vvalid k = v_valid(depth - c);
                v_store_i8n(yr + c, k, v_rq(v_gather(p->exp_q0, dd, k), &v, zp, lo, hi));
            }
            continue;
        }
#endif
        for (int32_t c = 0; c < depth; ++c) {
            const int32_t d = top - xr[c];
            int64_t v = -128;
            if (d <= p->radius) {
                v = fx_rdbp(fx_srdhm(inverse, p->exp_q0[d]), e) - 128;
                v = v < -128 ? -128 : (v > 127 ? 127 : v);
            }
            yr[c] = (int8_t)v;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------ BATCH_MATMUL */

/* BATCH_MATMUL (intq.kernels.batch_matmul, the reference kernel): for each batch b,
 * y[b, i, j] = clamp(SRDHM(sum_q (A[i, q] - Z_a)(B[q, j] - Z_b), m) RDBPOT right + Z_y), both
 * operands activations (or constants) read through strides: A[i, q] = a[b * a_step + i * a_row +
 * q * a_col] (adj_x swaps a_row and a_col), B[q, j] = b[b * b_step + q * b_row + j * b_col]
 * (adj_y), a_step / b_step 0 where that operand broadcasts over the batch. The differences are
 * made once per batch ([m][k] int16 in the scratch sa, [k][np] int32 in sb; np: n rounded up to
 * 32, the columns past n zero), each row of y sums (A[i, q] - Z_a) * (B[q, :] - Z_b) over q in
 * registers of int32 lanes, 4 vectors of columns at a time (scalar C: a row acc[n]), requantized by
 * rq_scalar's rule (v_rq, the last vector masked to the columns left). |acc| <= K * 255 * 255 < 2^31
 * (the kernel's prepare: K <= 33025), so every int32 partial sum is exact; no left shift (the
 * caller declines a real multiplier of 1 or more). */
typedef struct {
    int32_t batches, m, k, n;
    int64_t a_step, b_step;
    int32_t a_row, a_col, b_row, b_col;
    int32_t za, zb, mult, right, away, out_zp;
    int16_t *sa; /* scratch [m][k] */
    int32_t *sb; /* scratch [k][np]: rows of n padded with zeros to np = n rounded up to 32 */
    int32_t *acc; /* scratch [np] */
} intq_bmm_params;

void intq_batch_matmul(const intq_bmm_params *p, const int8_t *a, const int8_t *b, int8_t *y) {
    const int32_t m = p->m, k = p->k, n = p->n, np = (n + 31) / 32 * 32;
    int16_t *sa = p->sa;
    int32_t *sb = p->sb, *acc = p->acc;
#ifdef VL
    rq_vec v;
    rq_vec_set(&v, v_zero(), v_set1(p->mult), v_set1(p->right), v_set1(p->away));
    const vi32 zp = v_set1(p->out_zp), lo = v_set1(-128), hi = v_set1(127);
#endif
    for (int32_t t = 0; t < p->batches; ++t) {
        const int8_t *ab = a + t * p->a_step, *bb = b + t * p->b_step;
        if (t == 0 || p->a_step)
            for (int32_t i = 0; i < m; ++i)
                for (int32_t q = 0; q < k; ++q) sa[(size_t)i * k + q] = (int16_t)(ab[(size_t)i * p->a_row + (size_t)q * p->a_col] - p->za);
        if (t == 0 || p->b_step)
            for (int32_t q = 0; q < k; ++q)
                for (int32_t j = 0; j < n; ++j) sb[(size_t)q * np + j] = (int32_t)(bb[(size_t)q * p->b_row + (size_t)j * p->b_col] - p->zb);
        int8_t *yb = y + (size_t)t * m * n;
        for (int32_t i = 0; i < m; ++i) {
            const int16_t *ar = sa + (size_t)i * k;
            int8_t *yr = yb + (size_t)i * n;
#ifdef VL
            /* blocks of 4 vectors of columns, their sums in registers over q (the zero columns past
             * n add 0), requantized from the registers: the last vector masked to the columns left */
            for (int32_t j0 = 0; j0 < n; j0 += 4 * VL) {
                vi32 r0 = v_zero(), r1 = v_zero(), r2 = v_zero(), r3 = v_zero();
                const int32_t left = n - j0;
                for (int32_t q = 0; q < k; ++q) {
                    const vi32 s = v_set1(ar[q]);
                    const int32_t *br = sb + (size_t)q * np + j0;
                    r0 = v_add(r0, v_mullo(s, v_load(br)));
                    if (left > VL) r1 = v_add(r1, v_mullo(s, v_load(br + VL)));
                    if (left > 2 * VL) r2 = v_add(r2, v_mullo(s, v_load(br + 2 * VL)));
                    if (left > 3 * VL) r3 = v_add(r3, v_mullo(s, v_load(br + 3 * VL)));
                }
                const vi32 r[4] = {r0, r1, r2, r3};
                for (int32_t c = 0; c < 4 && c * VL < left; ++c)
                    v_store_i8n(yr + j0 + c * VL, v_valid(left - c * VL), v_rq(r[c], &v, zp, lo, hi));
            }
#else
            for (int32_t j = 0; j < n; ++j) acc[j] = 0;
            for (int32_t q = 0; q < k; ++q) {
                const int32_t s = ar[q];
                const int32_t *br = sb + (size_t)q * np;
                for (int32_t j = 0; j < n; ++j) acc[j] += s * br[j];
            }
            for (int32_t j = 0; j < n; ++j) yr[j] = (int8_t)rq_scalar(acc[j], p->mult, p->right, p->away, p->out_zp, -128, 127);
#endif
        }
    }
}

/* ------------------------------------------------------------------------------ array objects */

/* The same entry points taking numpy array objects (ctypes py_object: no per-call pointer
 * conversion in Python, which costs more than a small kernel). An ndarray's data pointer is the
 * first field after the object header (numpy's PyArrayObject_fields, read by its PyArray_DATA
 * macro); intq_data_offset is that header's size, set by intq.runtime.native after checking this
 * reading against numpy's own data pointers (it stays -1, and these are not used, otherwise). */
static int64_t intq_data_offset = -1;

void intq_set_data_offset(int64_t offset) { intq_data_offset = offset; }

void *intq_array_data(const void *obj) {
    return intq_data_offset < 0 ? (void *)0 : *(void *const *)((const char *)obj + intq_data_offset);
}

void intq_conv_obj(const intq_conv_params *p, const void *x, void *y) {
    intq_conv(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_depthwise_obj(const intq_dw_params *p, const void *x, void *y) {
    intq_depthwise(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_mul_obj(const intq_binary_params *p, const void *a, const void *b, void *y) {
    intq_mul(p, (const int8_t *)intq_array_data(a), (const int8_t *)intq_array_data(b), (int8_t *)intq_array_data(y));
}

void intq_add_obj(const intq_binary_params *p, const void *a, const void *b, void *y) {
    intq_add(p, (const int8_t *)intq_array_data(a), (const int8_t *)intq_array_data(b), (int8_t *)intq_array_data(y));
}

int64_t intq_softmax_obj(const intq_softmax_params *p, const void *x, void *y) {
    return intq_softmax(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_batch_matmul_obj(const intq_bmm_params *p, const void *a, const void *b, void *y) {
    intq_batch_matmul(p, (const int8_t *)intq_array_data(a), (const int8_t *)intq_array_data(b),
                      (int8_t *)intq_array_data(y));
}

/* ------------------------------------------------------------------------------ tables */

/* y[i] = table[(uint8_t)x[i]]: the int8 functions of one int8 input that intq's kernels tabulate at
 * prepare (HARD_SWISH, LEAKY_RELU, LOGISTIC, TANH, RELU, RELU6, RELU_N1_TO_1). AVX-512 VBMI: 64
 * lookups per step, two 128-entry permutes chosen by the index's top bit. AVX2: 32 lookups per step
 * in 16 byte shuffles of 16 entries each: in shuffle i the index minus 16 i, plus 0x70 with unsigned
 * saturation, keeps its low nibble with bit 7 clear exactly when it was in [0, 16) (bit 7 set:
 * VPSHUFB writes 0), so one shuffle per index contributes. NEON: four 64-entry TBL lookups of the
 * index minus 0, 64, 128, 192 (TBL writes 0 beyond its 64 entries). */
void intq_lut(const int8_t *table, int64_t n, const int8_t *x, int8_t *y) {
    int64_t i = 0;
#if defined(INTQ_AVX512) && defined(__AVX512VBMI__)
    const __m512i t0 = _mm512_loadu_si512((const void *)table), t1 = _mm512_loadu_si512((const void *)(table + 64)),
                  t2 = _mm512_loadu_si512((const void *)(table + 128)),
                  t3 = _mm512_loadu_si512((const void *)(table + 192));
    for (; i < n; i += 64) {
        const __mmask64 valid = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
        const __m512i v = _mm512_maskz_loadu_epi8(valid, x + i); /* uint8 bits: 0..127 then 128..255 */
        const __m512i low = _mm512_permutex2var_epi8(t0, v, t1), high = _mm512_permutex2var_epi8(t2, v, t3);
        _mm512_mask_storeu_epi8(y + i, valid, _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), low, high));
    }
#elif defined(INTQ_AVX2)
    __m256i t[16];
    for (int32_t k = 0; k < 16; ++k) t[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(table + 16 * k)));
    const __m256i bias = _mm256_set1_epi8(0x70), sixteen = _mm256_set1_epi8(16);
    for (; i + 32 <= n; i += 32) {
        __m256i s = _mm256_loadu_si256((const __m256i *)(x + i)), r = _mm256_setzero_si256();
        for (int32_t k = 0; k < 16; ++k, s = _mm256_sub_epi8(s, sixteen))
            r = _mm256_or_si256(r, _mm256_shuffle_epi8(t[k], _mm256_adds_epu8(s, bias)));
        _mm256_storeu_si256((__m256i *)(y + i), r);
    }
#elif defined(INTQ_NEON)
    const uint8x16x4_t t0 = vld1q_u8_x4((const uint8_t *)table), t1 = vld1q_u8_x4((const uint8_t *)table + 64),
                       t2 = vld1q_u8_x4((const uint8_t *)table + 128), t3 = vld1q_u8_x4((const uint8_t *)table + 192);
    const uint8x16_t q64 = vdupq_n_u8(64);
    for (; i + 16 <= n; i += 16) {
        const uint8x16_t v0 = vld1q_u8((const uint8_t *)x + i), v1 = vsubq_u8(v0, q64), v2 = vsubq_u8(v1, q64),
                         v3 = vsubq_u8(v2, q64);
        const uint8x16_t r = vorrq_u8(vorrq_u8(vqtbl4q_u8(t0, v0), vqtbl4q_u8(t1, v1)),
                                      vorrq_u8(vqtbl4q_u8(t2, v2), vqtbl4q_u8(t3, v3)));
        vst1q_u8((uint8_t *)y + i, r);
    }
#endif
    for (; i < n; ++i) y[i] = table[(uint8_t)x[i]];
}

/* y[r][c] = tables[c][(uint8_t)x[r][c]]: an int8 function per channel of one int8 input, each
 * tabulated at plan time from the kernel's own run (PRELU with a per-channel constant slope). */
void intq_lut_channels(const int8_t *tables, int64_t rows, int32_t cols, const int8_t *x, int8_t *y) {
    for (int64_t r = 0; r < rows; ++r, x += cols, y += cols)
        for (int32_t c = 0; c < cols; ++c) y[c] = tables[(size_t)c * 256 + (uint8_t)x[c]];
}

void intq_lut_obj(const int8_t *table, int64_t n, const void *x, void *y) {
    intq_lut(table, n, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_lut_channels_obj(const int8_t *tables, int64_t rows, int32_t cols, const void *x, void *y) {
    intq_lut_channels(tables, rows, cols, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}


void intq_max_pool_obj(const intq_pool_params *p, const void *x, void *y) {
    intq_max_pool(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_copy_obj(const intq_copy_params *p, const void *x, void *y) {
    intq_copy(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_transpose_obj(const intq_transpose_params *p, const void *x, void *y) {
    intq_transpose(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_pad_obj(const intq_pad_params *p, const void *x, void *y) {
    intq_pad(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_mean_obj(const intq_mean_params *p, const void *x, void *y) {
    intq_mean(p, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

/* A convolution followed by a table op on its output: y as intq_conv / intq_depthwise, and z =
 * table[uint8(y)] computed from each finished block while it is in cache (the plan's fused pair). */
void intq_conv_lut_obj(const intq_conv_params *p, const int8_t *table, const void *x, void *y, void *z) {
    intq_conv_params q = *p;
    q.lut = table;
    q.z = (int8_t *)intq_array_data(z);
    intq_conv(&q, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_depthwise_lut_obj(const intq_dw_params *p, const int8_t *table, const void *x, void *y, void *z) {
    intq_dw_params q = *p;
    q.lut = table;
    q.z = (int8_t *)intq_array_data(z);
    intq_depthwise(&q, (const int8_t *)intq_array_data(x), (int8_t *)intq_array_data(y));
}

void intq_binary16_obj(const intq_binary16_params *p, const void *a, const void *b, void *y) {
    intq_binary16(p, (const int16_t *)intq_array_data(a), (const int16_t *)intq_array_data(b),
                  (int16_t *)intq_array_data(y));
}

/* ------------------------------------------------------------------------------ 16x8 FULLY_CONNECTED sums */

/* The int64 sums of a 16x8 FULLY_CONNECTED (intq.kernels.fully_connected.int64_sums): acc[r][j] =
 * bias[j] + sum_q x[r][q] * w[j][q], x int16 [rows][k], w int16 [n][k] (the int8 weights widened),
 * bias int64 [n]. Exact: each block of 256 products sums in int32 (|x w| <= 2^15 * 2^7 = 2^22, 256 of
 * them <= 2^30), the blocks in int64. The kernel's own int64 requantization runs on acc (the caller). Tiles
 * of four rows by four output columns (fc16_rows4); the rows left over one at a time, four columns per load. */
typedef struct {
    int32_t rows, n, k;
    const int16_t *w;
    const int64_t *bias;
} intq_fc16_params;

#define FC16_BLOCK 256

/* Four rows by four columns: every load of x and w serves four products (the weights, read once
 * per four rows, are the traffic of a layer: a token block's rows share them). */
static void fc16_rows4(const intq_fc16_params *p, const int16_t *x, int64_t *acc, int32_t r) {
    const int32_t n = p->n, k = p->k;
    const int16_t *x0 = x + (size_t)r * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
    int64_t *a0 = acc + (size_t)r * n, *a1 = a0 + n, *a2 = a1 + n, *a3 = a2 + n;
    int32_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const int16_t *w0 = p->w + (size_t)j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
        int64_t s[4][4];
        for (int32_t i = 0; i < 4; ++i)
            for (int32_t c = 0; c < 4; ++c) s[i][c] = p->bias[j + c];
        for (int32_t q0 = 0; q0 < k; q0 += FC16_BLOCK) {
            const int32_t q1 = q0 + FC16_BLOCK < k ? q0 + FC16_BLOCK : k;
            int32_t t00 = 0, t01 = 0, t02 = 0, t03 = 0, t10 = 0, t11 = 0, t12 = 0, t13 = 0;
            int32_t t20 = 0, t21 = 0, t22 = 0, t23 = 0, t30 = 0, t31 = 0, t32 = 0, t33 = 0;
            for (int32_t q = q0; q < q1; ++q) {
                const int32_t u0 = w0[q], u1 = w1[q], u2 = w2[q], u3 = w3[q];
                const int32_t v0 = x0[q], v1 = x1[q], v2 = x2[q], v3 = x3[q];
                t00 += v0 * u0, t01 += v0 * u1, t02 += v0 * u2, t03 += v0 * u3;
                t10 += v1 * u0, t11 += v1 * u1, t12 += v1 * u2, t13 += v1 * u3;
                t20 += v2 * u0, t21 += v2 * u1, t22 += v2 * u2, t23 += v2 * u3;
                t30 += v3 * u0, t31 += v3 * u1, t32 += v3 * u2, t33 += v3 * u3;
            }
            s[0][0] += t00, s[0][1] += t01, s[0][2] += t02, s[0][3] += t03;
            s[1][0] += t10, s[1][1] += t11, s[1][2] += t12, s[1][3] += t13;
            s[2][0] += t20, s[2][1] += t21, s[2][2] += t22, s[2][3] += t23;
            s[3][0] += t30, s[3][1] += t31, s[3][2] += t32, s[3][3] += t33;
        }
        for (int32_t c = 0; c < 4; ++c)
            a0[j + c] = s[0][c], a1[j + c] = s[1][c], a2[j + c] = s[2][c], a3[j + c] = s[3][c];
    }
    for (; j < n; ++j) {
        const int16_t *wj = p->w + (size_t)j * k;
        int64_t s0 = p->bias[j], s1 = s0, s2 = s0, s3 = s0;
        for (int32_t q0 = 0; q0 < k; q0 += FC16_BLOCK) {
            const int32_t q1 = q0 + FC16_BLOCK < k ? q0 + FC16_BLOCK : k;
            int32_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
            for (int32_t q = q0; q < q1; ++q) {
                const int32_t u = wj[q];
                t0 += x0[q] * u, t1 += x1[q] * u, t2 += x2[q] * u, t3 += x3[q] * u;
            }
            s0 += t0, s1 += t1, s2 += t2, s3 += t3;
        }
        a0[j] = s0, a1[j] = s1, a2[j] = s2, a3[j] = s3;
    }
}

void intq_fc16_sums(const intq_fc16_params *p, const int16_t *x, int64_t *acc) {
    const int32_t n = p->n, k = p->k;
    int32_t r0 = 0;
    for (; r0 + 4 <= p->rows; r0 += 4) fc16_rows4(p, x, acc, r0);
    for (int32_t r = r0; r < p->rows; ++r) {
        const int16_t *xr = x + (size_t)r * k;
        int64_t *ar = acc + (size_t)r * n;
        int32_t j = 0;
        for (; j + 4 <= n; j += 4) {
            const int16_t *w0 = p->w + (size_t)j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            int64_t s0 = p->bias[j], s1 = p->bias[j + 1], s2 = p->bias[j + 2], s3 = p->bias[j + 3];
            for (int32_t q0 = 0; q0 < k; q0 += FC16_BLOCK) {
                const int32_t q1 = q0 + FC16_BLOCK < k ? q0 + FC16_BLOCK : k;
                int32_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
                for (int32_t q = q0; q < q1; ++q) {
                    const int32_t v = xr[q];
                    t0 += v * w0[q], t1 += v * w1[q], t2 += v * w2[q], t3 += v * w3[q];
                }
                s0 += t0, s1 += t1, s2 += t2, s3 += t3;
            }
            ar[j] = s0, ar[j + 1] = s1, ar[j + 2] = s2, ar[j + 3] = s3;
        }
        for (; j < n; ++j) {
            const int16_t *wj = p->w + (size_t)j * k;
            int64_t s = p->bias[j];
            for (int32_t q0 = 0; q0 < k; q0 += FC16_BLOCK) {
                const int32_t q1 = q0 + FC16_BLOCK < k ? q0 + FC16_BLOCK : k;
                int32_t t = 0;
                for (int32_t q = q0; q < q1; ++q) t += (int32_t)xr[q] * wj[q];
                s += t;
            }
            ar[j] = s;
        }
    }
}

void intq_fc16_sums_obj(const intq_fc16_params *p, const void *x, void *acc) {
    intq_fc16_sums(p, (const int16_t *)intq_array_data(x), (int64_t *)intq_array_data(acc));
}

/* ------------------------------------------------------------------------------ step programs */

/* A run of consecutive native steps of the execution plan in one call (intq.runtime.native.
 * accelerate.Program): each step is one of the entry points above, its operands addressed by a
 * code: >= 0 a byte offset in the run's arena (the outputs of the program's steps, one fresh
 * buffer per run), < 0 the entry -1 - code of ``ext`` (the program's inputs from outside it: the
 * first n_dyn read from the array objects given to the call, then constants fixed at plan time).
 * The same calls, in the same order, on the same bytes as the steps one by one. Returns 0, or 1 +
 * the index of a step that refused its input (SOFTMAX's row sum): the caller then runs the steps
 * one by one, and the kernel's own run reports it. */
enum {
    OP_CONV = 0, OP_DEPTHWISE = 1, OP_CONV_LUT = 2, OP_DEPTHWISE_LUT = 3, OP_MUL = 4, OP_ADD = 5, OP_LUT = 6,
    OP_MAX_POOL = 7, OP_TRANSPOSE = 8, OP_PAD = 9, OP_MEAN = 10, OP_LUT_CHANNELS = 11, OP_BATCH_MATMUL = 12,
    OP_COPY = 13, OP_SOFTMAX = 14
};

typedef struct {
    int32_t kind, cols; /* cols: OP_LUT_CHANNELS's channels */
    const void *params; /* the step's parameter structure (OP_LUT: the table; OP_LUT_CHANNELS: the tables) */
    const int8_t *table; /* OP_CONV_LUT, OP_DEPTHWISE_LUT: the fused table */
    int64_t n;           /* OP_LUT: elements; OP_LUT_CHANNELS: rows */
    int64_t in0, in1, out0, out1; /* operand codes (in1 / out1: -> unused where the op has none) */
} intq_step;

typedef struct {
    int32_t count, n_dyn;
    const intq_step *steps;
    const void **ext; /* [n_dyn + constants]: the first n_dyn set per call */
} intq_program;

static inline int8_t *step_ptr(int8_t *arena, const void **ext, int64_t code) {
    return code >= 0 ? arena + code : (int8_t *)ext[-1 - code];
}

int64_t intq_run_program(const intq_program *prog, void *arena_obj, void *x0, void *x1, void *x2, void *x3) {
    void *const objs[4] = {x0, x1, x2, x3};
    for (int32_t k = 0; k < prog->n_dyn && k < 4; ++k) prog->ext[k] = intq_array_data(objs[k]);
    int8_t *arena = (int8_t *)intq_array_data(arena_obj);
    for (int32_t i = 0; i < prog->count; ++i) {
        const intq_step *s = prog->steps + i;
        const int8_t *a = step_ptr(arena, prog->ext, s->in0);
        int8_t *y = step_ptr(arena, prog->ext, s->out0);
        switch (s->kind) {
        case OP_CONV: intq_conv((const intq_conv_params *)s->params, a, y); break;
        case OP_DEPTHWISE: intq_depthwise((const intq_dw_params *)s->params, a, y); break;
        case OP_CONV_LUT: {
            intq_conv_params q = *(const intq_conv_params *)s->params;
            q.lut = s->table;
            q.z = step_ptr(arena, prog->ext, s->out1);
            intq_conv(&q, a, y);
            break;
        }
        case OP_DEPTHWISE_LUT: {
            intq_dw_params q = *(const intq_dw_params *)s->params;
            q.lut = s->table;
            q.z = step_ptr(arena, prog->ext, s->out1);
            intq_depthwise(&q, a, y);
            break;
        }
        case OP_MUL: intq_mul((const intq_binary_params *)s->params, a, step_ptr(arena, prog->ext, s->in1), y); break;
        case OP_ADD: intq_add((const intq_binary_params *)s->params, a, step_ptr(arena, prog->ext, s->in1), y); break;
        case OP_LUT: intq_lut((const int8_t *)s->params, s->n, a, y); break;
        case OP_MAX_POOL: intq_max_pool((const intq_pool_params *)s->params, a, y); break;
        case OP_TRANSPOSE: intq_transpose((const intq_transpose_params *)s->params, a, y); break;
        case OP_PAD: intq_pad((const intq_pad_params *)s->params, a, y); break;
        case OP_MEAN: intq_mean((const intq_mean_params *)s->params, a, y); break;
        case OP_LUT_CHANNELS: intq_lut_channels((const int8_t *)s->params, s->n, s->cols, a, y); break;
        case OP_BATCH_MATMUL:
            intq_batch_matmul((const intq_bmm_params *)s->params, a, step_ptr(arena, prog->ext, s->in1), y);
            break;
        case OP_COPY: intq_copy((const intq_copy_params *)s->params, a, y); break;
        case OP_SOFTMAX:
            if (intq_softmax((const intq_softmax_params *)s->params, a, y)) return i + 1;
            break;
        default: break;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------ the rounding bodies on arrays */

/* The bodies marked "@rule" above, element by element on int64 operand arrays (their C arguments
 * converted as each says), for tests/runtime/test_native_rules.py: body `which` (RULE_*, the
 * order of intq.runtime.native.rules.NATIVE_RULES) on element i of a..d into y[i] (and y[n + i]).
 * The vector bodies run whole vectors of VL lanes and the scalar body on the last n % VL elements.
 * Returns the vector width used (lanes; 1: the scalar loop), -1 for an unknown body. */
enum {
    RULE_RQ_SCALAR = 0, RULE_V_RQ = 1, RULE_RQ_SHL_SCALAR = 2, RULE_V_RQ_SHL = 3, RULE_FX_SRDHM = 4, RULE_FX_RDBP = 5,
    RULE_SOFTMAX_RECIPROCAL = 6
};

int intq_rule(int32_t which, int32_t away, int64_t n, const int64_t *a, const int64_t *b, const int64_t *c,
              const int64_t *d, int64_t *y) {
    int64_t i = 0;
    int32_t lanes = 1;
    switch (which) {
    case RULE_V_RQ:
    case RULE_V_RQ_SHL:
#ifdef VL
        lanes = VL;
        for (; i + VL <= n; i += VL) { /* a: acc, b: m, c: e (v_rq) or the left shift (v_rq_shl), d: Z_y */
            int32_t t[4][VL];
            for (int32_t k = 0; k < VL; ++k)
                t[0][k] = (int32_t)a[i + k], t[1][k] = (int32_t)b[i + k], t[2][k] = (int32_t)c[i + k],
                t[3][k] = (int32_t)d[i + k];
            rq_vec v;
            const int shl = which == RULE_V_RQ_SHL;
            rq_vec_set(&v, v_zero(), v_load(t[1]), shl ? v_zero() : v_load(t[2]), v_set1(away));
            const vi32 lo = v_set1(-128), hi = v_set1(127);
            int32_t out[VL];
            v_store(out, shl ? v_rq_shl(v_load(t[0]), v_load(t[2]), &v, v_load(t[3]), lo, hi)
                             : v_rq(v_load(t[0]), &v, v_load(t[3]), lo, hi));
            for (int32_t k = 0; k < VL; ++k) y[i + k] = out[k];
        }
#endif
        for (; i < n; ++i)
            y[i] = which == RULE_V_RQ_SHL
                       ? rq_shl_scalar((int32_t)a[i], (int32_t)c[i], (int32_t)b[i], 0, away, (int32_t)d[i], -128, 127)
                       : rq_scalar((int32_t)a[i], (int32_t)b[i], (int32_t)c[i], away, (int32_t)d[i], -128, 127);
        return lanes;
    case RULE_RQ_SCALAR:
        for (; i < n; ++i) y[i] = rq_scalar((int32_t)a[i], (int32_t)b[i], (int32_t)c[i], away, (int32_t)d[i], -128, 127);
        return 1;
    case RULE_RQ_SHL_SCALAR:
        for (; i < n; ++i)
            y[i] = rq_shl_scalar((int32_t)a[i], (int32_t)c[i], (int32_t)b[i], 0, away, (int32_t)d[i], -128, 127);
        return 1;
    case RULE_FX_SRDHM: /* a, b: int32 raws */
        for (; i < n; ++i) y[i] = fx_srdhm(a[i], b[i]);
        return 1;
    case RULE_FX_RDBP: /* a: x, b: e */
        for (; i < n; ++i) y[i] = fx_rdbp(a[i], (int32_t)b[i]);
        return 1;
    case RULE_SOFTMAX_RECIPROCAL: /* a: the int32 sum; y: 1 / sum, then y[n + i]: bits over unit */
        for (; i < n; ++i) {
            int32_t bits;
            y[i] = softmax_reciprocal((int32_t)a[i], &bits);
            y[n + i] = bits;
        }
        return 1;
    default:
        return -1;
    }
}
