/* types: every tensor type trit knows, as one traits table indexed by the GGML type id.
 * Block layouts and reference codecs follow ../shared/docs/bonsai2-contract.md §1 bit for bit.
 * quant_ref-style functions here are the truth every faster kernel is tested against. */
#ifndef TRIT_TYPES_H
#define TRIT_TYPES_H

#include <stdint.h>
#include <stddef.h>

enum type_id {
    TYPE_F32 = 0,
    TYPE_F16 = 1,
    TYPE_Q4_0 = 2, /* KV cache only */
    TYPE_Q8_0 = 8,
    TYPE_Q8_K = 15, /* activations only: f32 d, 256 int8, 16 int16 sums */
    TYPE_BF16 = 30,
    TYPE_TQ1_0 = 34,
    TYPE_TQ2_0 = 35,
    TYPE_Q1_0 = 41,
    TYPE_Q2_0 = 42,
    TYPE_PQ2_0 = 142,
    TYPE_PTQ1_0 = 143,
    TYPE_COUNT = 144,
};

typedef struct {
    const char *name; /* "PTQ1_0" */
    int64_t blck; /* elements per block */
    size_t size; /* bytes per block */
    int ternary; /* 1 when every value is one of {-d, 0, +d} (per group) */
    int weight; /* 1 when tensors of this type may appear in a model file */
    int vec_dot_type; /* activation type the reference dot product consumes */
    /* Decode n values (n a multiple of blck). */
    void (*to_float)(const void *src, float *dst, int64_t n);
    /* Reference quantizer, what a file writer uses (ggml's from_float_ref). */
    void (*quantize)(const float *src, void *dst, int64_t n);
    /* Activation quantizer as ggml's CPU backend applies it to the vec_dot input
     * (may round differently from quantize, e.g. Q8_0 rounds ties to even there). */
    void (*quantize_act)(const float *src, void *dst, int64_t n);
    /* Reference dot product of n weights (this type) with n activations (vec_dot_type). */
    float (*vec_dot)(int64_t n, const void *w, const void *act);
    int scale_at; /* byte offset of each block's f16 scale; -1: the type stores plain floats */
} type_traits;

/* Traits of a supported type, or NULL (unknown or unsupported id). */
const type_traits *type_get(uint32_t id);
/* Name of any GGML type id (also ones trit cannot run), or NULL when the id was never assigned. */
const char *type_name(uint32_t id);
/* Type id for a name such as "ptq1_0" (case-insensitive), or -1. */
int type_from_name(const char *name);
/* general.file_type (llama_ftype) of a model whose matmul weights are mostly `id` (0 = F32). */
uint32_t type_file_type(uint32_t id);
/* Bytes of n elements; 0 when n is not a multiple of the block or on overflow. */
uint64_t type_row_bytes(uint32_t id, int64_t n);

/* The first of n elements (a multiple of the block) of type id whose value is not finite: a
 * float that is NaN or infinite, or an element of a block whose scale is; -1 when all are. */
int64_t type_first_nonfinite(uint32_t id, const void *data, int64_t n);

/* Lossless PQ2_0 <-> PTQ1_0 (same trits, same f16 scale) over n elements.
 * Returns -1 when src holds a value the destination cannot store (PQ2_0 code 3 = +2d). */
int type_transcode(uint32_t dst_type, void *dst, uint32_t src_type, const void *src, int64_t n);

/* Trits of one ternary block (PQ2_0, PTQ1_0, TQ1_0, TQ2_0, Q2_0): codes in {0,1,2,(3)} = value/d + 1.
 * Returns the number of elements written (the type's block size) and the scale in *d. */
int type_block_codes(uint32_t type, const void *block, uint8_t *codes, float *d);

#endif
