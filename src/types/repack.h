/* repack: ternary weights (TQ1_0, TQ2_0, PQ2_0, PTQ1_0) re-laid for the kernels, once at load.
 * Rows go in panels of RP_ROWS; a panel is the whole row length as groups of RP_K elements
 * (one Q8_K activation block), each group:
 *   codes[1024]: 16 chunks of 64 bytes; chunk c covers elements 16c..16c+15 of the group. Byte
 *                4r+i of chunk c holds, in bits 2j..2j+1, the 2-bit code (value/scale + 1, so 0..2,
 *                3 only where the source had it) of panel row r at element 16c+4j+i.
 *                So (chunk >> 2j) & 3 per byte is one "step": row r's 4 codes of elements
 *                16c+4j..+3 in dword r, which is the row of an AMX B tile and the operand of
 *                vpdpbusd against 4 broadcast activations.
 *   scales[2][16]: f16 scale of row r for elements 0..127 (scales[0][r]) and 128..255 (scales[1][r]);
 *                TQ1_0/TQ2_0 (one scale per 256) store theirs twice.
 * Rows past the end of the tensor are code 1 (zero) with scale 0.
 * That is layout RP_C2 (1088-byte groups). Types whose codes never reach 3 (TQ1_0, PTQ1_0) may take
 * RP_Q7 instead, the same chunks in 7/8 of the bytes: each chunk byte's four codes c_0..c_3 as one
 * 7-bit number, c_0 + 3 c_1 + 9 c_2 (0..26) in bits 0-4 and c_3 in bits 5-6, byte n of chunk c at
 * bits 7n..7n+6 (least significant first) of the 56 bytes at 56c; the scales follow at 896
 * (960-byte groups: 1.875 bits a weight against 2.125; the file's PTQ1_0 has 1.75). A kernel gets
 * c_0..c_2 back with one 64-entry byte lookup (repack_q7_table) and c_3 with a mask. Every group
 * starts 64-byte aligned when the panel does (1088 = 17 x 64, 960 = 15 x 64).
 * The dot product of row r with a Q8_K activation row a is, per half h of each group,
 *   fma((float)sum_i (code_i - 1) * a.qs_i, f16(scales[h][r]) * a.d, acc)
 * in element order: for PQ2_0 and PTQ1_0 exactly their reference vec_dot; for TQ1_0/TQ2_0 the
 * same integer sums, combined per half instead of per 256 (last-bit differences). */
#ifndef TRIT_REPACK_H
#define TRIT_REPACK_H

#include <stdint.h>

enum { RP_ROWS = 16, RP_K = 256, RP_SCALE_BYTES = 2 * RP_ROWS * 2 };
enum { RP_C2, RP_Q7, RP_LAYOUTS }; /* the layouts above */
enum { RP_Q7_CHUNK = 56 };

/* A layout's short name ("c2", "q7"), as benchmarks and test messages print it. */
static inline const char *repack_layout_name(int layout) { return layout == RP_Q7 ? "q7" : "c2"; }

/* Bytes of a group's codes in a layout; its scales start there. */
static inline uint64_t repack_code_bytes(int layout) { return layout == RP_Q7 ? 16 * RP_Q7_CHUNK : 16 * 64; }
static inline uint64_t repack_group_bytes(int layout) { return repack_code_bytes(layout) + RP_SCALE_BYTES; }

/* Codes c_0..c_2 at bits 0-5 of an RP_Q7 number's low 6 bits (bit 5, c_3's low bit, does not
 * matter; bits 0-4 over 26, which repack never writes, read as codes 1: zero weights). Code c_3 is
 * bits 5-6 of the number (3, never written, reads as +2 as in RP_C2). */
extern const uint8_t repack_q7_table[64];

/* 1 when weights of this type can be repacked in the layout. */
int repack_type_ok(uint32_t type, int layout);

/* The layout a type is packed in where a kernel set prefers `preferred` (kernel_set.trit_layout):
 * that one when the type takes it, else RP_C2. */
int repack_layout(uint32_t type, int preferred);

/* Bytes of one panel of rows of n_in elements (n_in % RP_K == 0). */
uint64_t repack_panel_bytes(int64_t n_in, int layout);

/* Bytes of a repacked tensor of n_out rows; 0 on overflow or a bad shape, type or layout (rows of
 * n_in elements need n_in % RP_K == 0). */
uint64_t repack_bytes(uint32_t type, int layout, int64_t n_in, int64_t n_out);

/* Panels [p0, p1) of the tensor of n_out rows at src (row_bytes apart, the file's layout) into
 * dst (the repacked tensor's start). Returns -1 for a type, layout or shape repack_bytes refuses. */
int repack_panels(uint32_t type, int layout, const uint8_t *src, uint64_t row_bytes, int64_t n_in, int64_t n_out,
                  int64_t p0, int64_t p1, uint8_t *dst);

/* The reference dot of panel row r (0..15) of the panel at w with one Q8_K activation row. */
float repack_vec_dot(int layout, int64_t n, const uint8_t *w, int r, const void *act);

#endif
