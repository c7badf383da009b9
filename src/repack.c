/* repack: the file's ternary blocks -> the panel layout of repack.h, and its reference dot. */
#include "repack.h"

#include <math.h>
#include <string.h>

#include "quants.h"
#include "quants_impl.h"
#include "types.h"
#include "util.h"

int repack_type_ok(uint32_t type) {
    return type == TYPE_TQ1_0 || type == TYPE_TQ2_0 || type == TYPE_PQ2_0 || type == TYPE_PTQ1_0;
}

uint64_t repack_panel_bytes(int64_t n_in) { return (uint64_t)(n_in / RP_K) * RP_GROUP_BYTES; }

uint64_t repack_bytes(uint32_t type, int64_t n_in, int64_t n_out) {
    uint64_t bytes;
    if (!repack_type_ok(type) || n_in <= 0 || n_in % RP_K || n_out <= 0) return 0;
    if (!mul_ok((uint64_t)((n_out + RP_ROWS - 1) / RP_ROWS), repack_panel_bytes(n_in), &bytes)) return 0;
    return bytes;
}

/* One group (RP_K elements) of one row: codes and the two half scales. */
static void row_group(uint32_t type, const uint8_t *row, int64_t g, uint8_t *codes, uint16_t d[2]) {
    const type_traits *t = type_get(type);
    float f;
    for (int64_t e = 0; e < RP_K; e += t->blck) {
        const uint8_t *blk = row + (uint64_t)((g * RP_K + e) / t->blck) * t->size;
        type_block_codes(type, blk, codes + e, &f);
        /* The f16 scale is the block's own bits: the conversion round-trips. */
        uint16_t h = f32_to_f16(f);
        if (t->blck == RP_K) d[0] = d[1] = h;
        else d[e / (RP_K / 2)] = h;
    }
}

int repack_panels(uint32_t type, const uint8_t *src, uint64_t row_bytes, int64_t n_in, int64_t n_out, int64_t p0,
                  int64_t p1, uint8_t *dst) {
    if (!repack_bytes(type, n_in, n_out)) return -1;
    const uint64_t pb = repack_panel_bytes(n_in);
    uint8_t codes[RP_ROWS][RP_K];
    uint16_t d[RP_ROWS][2];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t g = 0; g < n_in / RP_K; g++) {
            for (int r = 0; r < RP_ROWS; r++) {
                int64_t row = p * RP_ROWS + r;
                if (row < n_out) row_group(type, src + (uint64_t)row * row_bytes, g, codes[r], d[r]);
                else memset(codes[r], 1, RP_K), d[r][0] = d[r][1] = 0;
            }
            uint8_t *out = dst + (uint64_t)p * pb + (uint64_t)g * RP_GROUP_BYTES;
            /* Byte i of the 4 codes at 16c+4j.. holds element 16c+4j+i: shifted 2j and OR-ed, the
             * four steps fill dword r of chunk c (bytewise, so in either byte order). */
            for (int c = 0; c < RP_K / 16; c++)
                for (int r = 0; r < RP_ROWS; r++) {
                    uint32_t dw = 0;
                    for (int j = 0; j < 4; j++) dw |= (rd_u32(&codes[r][16 * c + 4 * j]) & 0x03030303u) << (2 * j);
                    memcpy(out + 64 * c + 4 * r, &dw, 4);
                }
            for (int h = 0; h < 2; h++)
                for (int r = 0; r < RP_ROWS; r++) memcpy(out + RP_CODE_BYTES + 2 * (RP_ROWS * h + r), &d[r][h], 2);
        }
    return 0;
}

float repack_vec_dot(int64_t n, const uint8_t *w, int r, const void *act) {
    const block_q8_K *y = act;
    float s = 0.0f;
    for (int64_t g = 0; g < n / RP_K; g++, w += RP_GROUP_BYTES)
        for (int h = 0; h < 2; h++) {
            int isum = 0;
            for (int e = h * RP_K / 2; e < (h + 1) * RP_K / 2; e++) {
                int code = (w[64 * (e / 16) + 4 * r + e % 4] >> (2 * (e % 16 / 4))) & 3;
                isum += (code - 1) * y[g].qs[e];
            }
            s = fmaf((float)isum, f16_to_f32(rd_u16(w + RP_CODE_BYTES + 2 * (RP_ROWS * h + r))) * y[g].d, s);
        }
    return s;
}
