/* types: the traits table (codecs live in quants.c and quants_ternary.c), plus the views that
 * work on whole blocks: ternary codes and lossless PQ2_0 <-> PTQ1_0 transcoding. */
#include "types/types.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "types/quants.h"
#include "types/quants_impl.h"
#include "base/util.h"

static const type_traits traits[TYPE_COUNT] = {
    [TYPE_F32] = {"F32", 1, 4, 0, 1, TYPE_F32, QUANT_FNS(f32), -1},
    [TYPE_F16] = {"F16", 1, 2, 0, 1, TYPE_F16, QUANT_FNS(f16), -1},
    [TYPE_BF16] = {"BF16", 1, 2, 0, 1, TYPE_BF16, QUANT_FNS(bf16), -1},
    [TYPE_Q8_0] = {"Q8_0", 32, 34, 0, 1, TYPE_Q8_0, QUANT_FNS(q8_0), offsetof(block_q8_0, d)},
    [TYPE_Q4_0] = {"Q4_0", 32, 18, 0, 0, TYPE_Q8_0, q4_0_to_float, q4_0_quantize, q4_0_quantize, NULL,
                   offsetof(block_q4_0, d)}, /* KV cache only */
    [TYPE_Q8_K] = {"Q8_K", 256, 292, 0, 0, TYPE_Q8_K, QUANT_FNS(q8_K), -1}, /* activations: an f32 scale */
    [TYPE_TQ1_0] = {"TQ1_0", 256, 54, 1, 1, TYPE_Q8_K, QUANT_FNS(tq1_0), offsetof(block_tq1_0, d)},
    [TYPE_TQ2_0] = {"TQ2_0", 256, 66, 1, 1, TYPE_Q8_K, QUANT_FNS(tq2_0), offsetof(block_tq2_0, d)},
    [TYPE_Q1_0] = {"Q1_0", 128, 18, 0, 1, TYPE_Q8_0, QUANT_FNS(q1_0), offsetof(block_q1_0, d)},
    [TYPE_Q2_0] = {"Q2_0", 64, 18, 0, 1, TYPE_Q8_0, QUANT_FNS(q2_0), offsetof(block_q2_0, d)},
    [TYPE_PQ2_0] = {"PQ2_0", 128, 34, 1, 1, TYPE_Q8_K, QUANT_FNS(pq2_0), offsetof(block_pq2_0, d)},
    [TYPE_PTQ1_0] = {"PTQ1_0", 128, 28, 1, 1, TYPE_Q8_K, QUANT_FNS(ptq1_0), offsetof(block_ptq1_0, d)},
};

int64_t type_first_nonfinite(uint32_t id, const void *data, int64_t n) {
    const type_traits *t = type_get(id);
    const uint8_t *p = data;
    if (!t) return -1;
    if (t->scale_at >= 0) { /* the blocks' f16 scales: exponent all ones is Inf or NaN */
        for (int64_t b = 0; b < n / t->blck; b++) {
            uint16_t d;
            memcpy(&d, p + (size_t)b * t->size + (size_t)t->scale_at, 2);
            if ((d & 0x7c00) == 0x7c00) return b * t->blck;
        }
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = 0;
        if (id == TYPE_F32) {
            memcpy(&v, p + 4 * i, 4);
            if ((v & 0x7f800000u) == 0x7f800000u) return i;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            if ((h & (id == TYPE_F16 ? 0x7c00 : 0x7f80)) == (id == TYPE_F16 ? 0x7c00 : 0x7f80)) return i;
        }
    }
    return -1;
}

/* Every id GGML ever assigned, for messages about files trit cannot run. */
static const char *const ggml_names[] = {
    "F32",        "F16",        "Q4_0",       "Q4_1",  "Q4_2",     "Q4_3",     "Q5_0",     "Q5_1",    "Q8_0",
    "Q8_1",       "Q2_K",       "Q3_K",       "Q4_K",  "Q5_K",     "Q6_K",     "Q8_K",     "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS",    "IQ1_S",      "IQ4_NL",     "IQ3_S", "IQ2_S",    "IQ4_XS",   "I8",       "I16",     "I32",
    "I64",        "F64",        "IQ1_M",      "BF16",  "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0",
    "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4", NULL,       "Q1_0",     "Q2_0",
};

const type_traits *type_get(uint32_t id) {
    if (id >= TYPE_COUNT || !traits[id].name) return NULL;
    return &traits[id];
}

const char *type_name(uint32_t id) {
    if (id < TYPE_COUNT && traits[id].name) return traits[id].name;
    if (id < sizeof ggml_names / sizeof ggml_names[0]) return ggml_names[id];
    return NULL;
}

int type_from_name(const char *name) {
    for (int i = 0; i < TYPE_COUNT; i++)
        if (traits[i].name && traits[i].weight && !strcasecmp(traits[i].name, name)) return i;
    return -1;
}

uint64_t type_row_bytes(uint32_t id, int64_t n) {
    const type_traits *t = type_get(id);
    uint64_t bytes;
    if (!t || n < 0 || n % t->blck) return 0;
    if (!mul_ok((uint64_t)(n / t->blck), t->size, &bytes)) return 0;
    return bytes;
}

/* PQ2_0 -> PTQ1_0 block by block; -1 on code 3 (+2d), which has no trit. */
static int pq2_0_to_ptq1_0(block_ptq1_0 *dst, const block_pq2_0 *src, int64_t nb) {
    uint8_t codes[QK_PQ2_0];
    for (int64_t i = 0; i < nb; i++) {
        codec_pq2_0.codes(&src[i], codes);
        for (int j = 0; j < QK_PQ2_0; j++)
            if (codes[j] > 2) return -1;
        codec_ptq1_0.pack(codes, src[i].d, &dst[i]);
    }
    return 0;
}

static void ptq1_0_to_pq2_0(block_pq2_0 *dst, const block_ptq1_0 *src, int64_t nb) {
    uint8_t codes[QK_PTQ1_0];
    for (int64_t i = 0; i < nb; i++) {
        codec_ptq1_0.codes(&src[i], codes);
        codec_pq2_0.pack(codes, src[i].d, &dst[i]);
    }
}

int type_transcode(uint32_t dst_type, void *dst, uint32_t src_type, const void *src, int64_t n) {
    _Static_assert(QK_PQ2_0 == QK_PTQ1_0, "PQ2_0 and PTQ1_0 share the group");
    if (n < 0 || n % QK_PTQ1_0) return -1;
    if (src_type == TYPE_PQ2_0 && dst_type == TYPE_PTQ1_0) return pq2_0_to_ptq1_0(dst, src, n / QK_PQ2_0);
    if (src_type == TYPE_PTQ1_0 && dst_type == TYPE_PQ2_0) {
        ptq1_0_to_pq2_0(dst, src, n / QK_PTQ1_0);
        return 0;
    }
    return -1;
}

int type_block_codes(uint32_t type, const void *block, uint8_t *codes, float *d) {
    const ternary_codec *c = type == TYPE_PQ2_0 ? &codec_pq2_0
        : type == TYPE_PTQ1_0                   ? &codec_ptq1_0
        : type == TYPE_TQ1_0                    ? &codec_tq1_0
        : type == TYPE_TQ2_0                    ? &codec_tq2_0
        : type == TYPE_Q2_0                     ? &codec_q2_0
                                                : NULL;
    if (!c) return -1;
    c->codes(block, codes);
    *d = codec_scale(c, block);
    return c->qk;
}

uint32_t type_file_type(uint32_t id) {
    switch (id) {
    case TYPE_F16: return 1;
    case TYPE_Q8_0: return 7;
    case TYPE_BF16: return 32;
    case TYPE_TQ1_0: return 36;
    case TYPE_TQ2_0: return 37;
    case TYPE_Q1_0: return 40;
    case TYPE_Q2_0: return 41;
    case TYPE_PQ2_0: return 141;
    case TYPE_PTQ1_0: return 143;
    default: return 0;
    }
}
