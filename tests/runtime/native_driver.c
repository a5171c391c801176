/* A driver running native.c's entry points on cases written by tests/runtime/test_native_arm64.py,
 * for a CPU this machine's Python cannot run on (ARM64 under qemu-aarch64): compiled together with
 * intq/runtime/native/native.c by a cross compiler.
 *
 *   native_driver CASES OUT
 *
 * CASES (little-endian, written by the test): "INTQCASE", u32 count, then per case:
 *   i32 path                         the matrix-product path to run (native.c PATH_*)
 *   u32 n_blobs, per blob: u64 size, u8 has_data, [size bytes]
 *                                    the byte buffers of the call: parameter structures (the bytes
 *                                    ctypes laid out on x86-64: the same LP64 layout here), the
 *                                    arrays they point to, inputs, outputs (no data: zeroed)
 *   u32 n_relocs, per reloc: u32 blob, u64 offset, i32 target (-1: NULL), u64 target_offset
 *                                    the pointer fields: blob + offset holds target + target_offset
 *   u32 kind, 5 x (u8 is_blob, i64 value)
 *                                    the call and its arguments (a blob's address, or an integer)
 *   u32 n_out, u32 blob per output   the buffers written to OUT after the call
 * OUT: per case, i32 the path native.c took, then each output's bytes.
 *
 * Nothing is interpreted here: the test prepares every structure with intq's own binding code
 * (intq.runtime.native.accelerate) and compares OUT with the kernels' own run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int intq_native_init(int force);
void intq_conv(const void *p, const int8_t *x, int8_t *y);
void intq_depthwise(const void *p, const int8_t *x, int8_t *y);
void intq_max_pool(const void *p, const int8_t *x, int8_t *y);
void intq_transpose(const void *p, const int8_t *x, int8_t *y);
void intq_pad(const void *p, const int8_t *x, int8_t *y);
void intq_mean(const void *p, const int8_t *x, int8_t *y);
void intq_mul(const void *p, const int8_t *a, const int8_t *b, int8_t *y);
void intq_add(const void *p, const int8_t *a, const int8_t *b, int8_t *y);
void intq_lut(const int8_t *table, int64_t n, const int8_t *x, int8_t *y);
void intq_lut_channels(const int8_t *tables, int64_t rows, int32_t cols, const int8_t *x, int8_t *y);
void intq_batch_matmul(const void *p, const int8_t *a, const int8_t *b, int8_t *y);
int64_t intq_softmax(const void *p, const int8_t *x, int8_t *y);
void intq_binary16(const void *p, const int16_t *a, const int16_t *b, int16_t *y);

enum {
    K_CONV, K_DEPTHWISE, K_MAX_POOL, K_TRANSPOSE, K_PAD, K_MEAN, K_MUL, K_ADD, K_LUT, K_LUT_CHANNELS, K_BATCH_MATMUL,
    K_SOFTMAX, K_BINARY16
};

static FILE *in;

static void fail(const char *what) {
    fprintf(stderr, "native_driver: %s\n", what);
    exit(2);
}

static void get(void *dst, size_t n) {
    if (fread(dst, 1, n, in) != n) fail("truncated case file");
}

static uint32_t u32(void) {
    uint32_t v;
    get(&v, 4);
    return v;
}

static uint64_t u64(void) {
    uint64_t v;
    get(&v, 8);
    return v;
}

int main(int argc, char **argv) {
    if (argc != 3) fail("usage: native_driver CASES OUT");
    in = fopen(argv[1], "rb");
    FILE *out = fopen(argv[2], "wb");
    if (!in || !out) fail("cannot open the files");
    char magic[8];
    get(magic, 8);
    if (memcmp(magic, "INTQCASE", 8) != 0) fail("not a case file");
    const uint32_t count = u32();
    for (uint32_t c = 0; c < count; ++c) {
        int32_t path;
        get(&path, 4);
        const uint32_t n_blobs = u32();
        uint8_t **blob = calloc(n_blobs, sizeof *blob);
        uint64_t *size = calloc(n_blobs, sizeof *size);
        for (uint32_t b = 0; b < n_blobs; ++b) {
            size[b] = u64();
            uint8_t has;
            get(&has, 1);
            blob[b] = calloc(1, size[b] + 64); /* zeroed: scratch buffers and outputs start at 0 */
            if (has) get(blob[b], size[b]);
        }
        const uint32_t n_relocs = u32();
        for (uint32_t r = 0; r < n_relocs; ++r) {
            const uint32_t b = u32();
            const uint64_t offset = u64();
            int32_t target;
            get(&target, 4);
            const uint64_t toff = u64();
            if (b >= n_blobs || offset + sizeof(void *) > size[b]) fail("relocation outside its blob");
            void *value = target < 0 ? (void *)0 : (void *)(blob[target] + toff);
            memcpy(blob[b] + offset, &value, sizeof value);
        }
        const uint32_t kind = u32();
        void *ptr[5];
        int64_t num[5];
        for (int k = 0; k < 5; ++k) {
            uint8_t is_blob;
            get(&is_blob, 1);
            get(&num[k], 8);
            ptr[k] = is_blob ? (void *)blob[num[k]] : (void *)0;
        }
        const int taken = intq_native_init(path);
        switch (kind) {
        case K_CONV: intq_conv(ptr[0], ptr[1], ptr[2]); break;
        case K_DEPTHWISE: intq_depthwise(ptr[0], ptr[1], ptr[2]); break;
        case K_MAX_POOL: intq_max_pool(ptr[0], ptr[1], ptr[2]); break;
        case K_TRANSPOSE: intq_transpose(ptr[0], ptr[1], ptr[2]); break;
        case K_PAD: intq_pad(ptr[0], ptr[1], ptr[2]); break;
        case K_MEAN: intq_mean(ptr[0], ptr[1], ptr[2]); break;
        case K_MUL: intq_mul(ptr[0], ptr[1], ptr[2], ptr[3]); break;
        case K_ADD: intq_add(ptr[0], ptr[1], ptr[2], ptr[3]); break;
        case K_LUT: intq_lut(ptr[0], num[1], ptr[2], ptr[3]); break;
        case K_LUT_CHANNELS: intq_lut_channels(ptr[0], num[1], (int32_t)num[2], ptr[3], ptr[4]); break;
        case K_BATCH_MATMUL: intq_batch_matmul(ptr[0], ptr[1], ptr[2], ptr[3]); break;
        case K_SOFTMAX:
            if (intq_softmax(ptr[0], ptr[1], ptr[2]) != 0) fail("softmax refused a row of a case the kernel takes");
            break;
        case K_BINARY16: intq_binary16(ptr[0], ptr[1], ptr[2], ptr[3]); break;
        default: fail("unknown kind");
        }
        fwrite(&taken, 4, 1, out);
        const uint32_t n_out = u32();
        for (uint32_t o = 0; o < n_out; ++o) {
            const uint32_t b = u32();
            fwrite(blob[b], 1, size[b], out);
        }
        for (uint32_t b = 0; b < n_blobs; ++b) free(blob[b]);
        free(blob);
        free(size);
    }
    fclose(out);
    return 0;
}
