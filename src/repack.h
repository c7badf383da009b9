/* repack: ternary weights (TQ1_0, TQ2_0, PQ2_0, PTQ1_0) re-laid for the kernels, once at load.
 * Rows go in panels of RP_ROWS; a panel is the whole row length as groups of RP_K elements
 * (one Q8_K activation block), each group RP_GROUP_BYTES:
 *   codes[1024]: 16 chunks of 64 bytes; chunk c covers elements 16c..16c+15 of the group. Byte
 *                4r+i of chunk c holds, in bits 2j..2j+1, the 2-bit code (value/scale + 1, so 0..2,
 *                3 only where the source had it) of panel row r at element 16c+4j+i.
 *                So (chunk >> 2j) & 3 per byte is one "step": row r's 4 codes of elements
 *                16c+4j..+3 in dword r, which is the row of an AMX B tile and the operand of
 *                vpdpbusd against 4 broadcast activations.
 *   scales[2][16]: f16 scale of row r for elements 0..127 (scales[0][r]) and 128..255 (scales[1][r]);
 *                TQ1_0/TQ2_0 (one scale per 256) store theirs twice.
 * Rows past the end of the tensor are code 1 (zero) with scale 0. Every group starts 64-byte
 * aligned when the panel does (1088 = 17 x 64).
 * The dot product of row r with a Q8_K activation row a is, per half h of each group,
 *   fma((float)sum_i (code_i - 1) * a.qs_i, f16(scales[h][r]) * a.d, acc)
 * in element order: for PQ2_0 and PTQ1_0 exactly their reference vec_dot; for TQ1_0/TQ2_0 the
 * same integer sums, combined per half instead of per 256 (last-bit differences). */
#ifndef TRIT_REPACK_H
#define TRIT_REPACK_H

#include <stdint.h>

enum { RP_ROWS = 16, RP_K = 256, RP_CODE_BYTES = 1024, RP_GROUP_BYTES = RP_CODE_BYTES + 2 * RP_ROWS * 2 };

/* 1 when weights of this type can be repacked (rows of n_in elements need n_in % RP_K == 0). */
int repack_type_ok(uint32_t type);

/* Bytes of one panel of rows of n_in elements (n_in % RP_K == 0). */
uint64_t repack_panel_bytes(int64_t n_in);

/* Bytes of a repacked tensor of n_out rows; 0 on overflow or a bad shape/type. */
uint64_t repack_bytes(uint32_t type, int64_t n_in, int64_t n_out);

/* Panels [p0, p1) of the tensor of n_out rows at src (row_bytes apart, the file's layout) into
 * dst (the repacked tensor's start). Returns -1 for a type or shape repack_bytes refuses. */
int repack_panels(uint32_t type, const uint8_t *src, uint64_t row_bytes, int64_t n_in, int64_t n_out, int64_t p0,
                  int64_t p1, uint8_t *dst);

/* The reference dot of panel row r (0..15) of the panel at w with one Q8_K activation row. */
float repack_vec_dot(int64_t n, const uint8_t *w, int r, const void *act);

#endif
