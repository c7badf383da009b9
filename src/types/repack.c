/* repack: the file's ternary blocks -> the panel layout of repack.h, and its reference dot. */
#include "types/repack.h"

#include <math.h>
#include <string.h>

#include "types/quants.h"
#include "types/quants_impl.h"
#include "types/types.h"
#include "base/util.h"

/* The 7-bit number of a chunk byte's four codes (c_3 <= 2 here). */
static uint8_t q7_of(uint8_t b) {
    uint8_t t = 0;
    for (int j = 2; j >= 0; j--) t = (uint8_t)(3 * t + ((b >> (2 * j)) & 3));
    return (uint8_t)(t | (b >> 6) << 5);
}

/* Entry i: codes j = 0..2 = digit j of i mod 32 in base 3 at bits 2j; 0x15 (codes 1) for i mod 32 > 26. */
const uint8_t repack_q7_table[64] = {
    0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0a, 0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x18,
    0x19, 0x1a, 0x20, 0x21, 0x22, 0x24, 0x25, 0x26, 0x28, 0x29, 0x2a, 0x15, 0x15, 0x15, 0x15, 0x15,
    0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x08, 0x09, 0x0a, 0x10, 0x11, 0x12, 0x14, 0x15, 0x16, 0x18,
    0x19, 0x1a, 0x20, 0x21, 0x22, 0x24, 0x25, 0x26, 0x28, 0x29, 0x2a, 0x15, 0x15, 0x15, 0x15, 0x15,
};

int repack_type_ok(uint32_t type, int layout) {
    if (layout == RP_Q7) return type == TYPE_TQ1_0 || type == TYPE_PTQ1_0;
    return layout == RP_C2 && (type == TYPE_TQ1_0 || type == TYPE_TQ2_0 || type == TYPE_PQ2_0 || type == TYPE_PTQ1_0);
}

int repack_layout(uint32_t type, int preferred) { return repack_type_ok(type, preferred) ? preferred : RP_C2; }

uint64_t repack_panel_bytes(int64_t n_in, int layout) { return (uint64_t)(n_in / RP_K) * repack_group_bytes(layout); }

uint64_t repack_bytes(uint32_t type, int layout, int64_t n_in, int64_t n_out) {
    uint64_t bytes;
    if (!repack_type_ok(type, layout) || n_in <= 0 || n_in % RP_K || n_out <= 0) return 0;
    if (!mul_ok((uint64_t)((n_out + RP_ROWS - 1) / RP_ROWS), repack_panel_bytes(n_in, layout), &bytes)) return 0;
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

/* Bits 7n..7n+6 of a Q7 chunk: byte n's number. */
static unsigned q7_get(const uint8_t *chunk, int n) {
    const int bit = 7 * n;
    return (unsigned)((chunk[bit / 8] | (bit / 8 + 1 < RP_Q7_CHUNK ? chunk[bit / 8 + 1] << 8 : 0)) >> (bit % 8)) & 127;
}

/* Byte n of chunk c of the group at w as RP_C2 holds it, in either layout. */
static uint8_t chunk_byte(int layout, const uint8_t *w, int c, int n) {
    if (layout == RP_C2) return w[64 * c + n];
    const unsigned q = q7_get(w + RP_Q7_CHUNK * c, n);
    return (uint8_t)(repack_q7_table[q & 63] | q >> 5 << 6);
}

static void q7_put(uint8_t *chunk, int n, unsigned q) {
    const int bit = 7 * n;
    chunk[bit / 8] |= (uint8_t)(q << (bit % 8));
    if (bit % 8 > 1) chunk[bit / 8 + 1] |= (uint8_t)(q >> (8 - bit % 8));
}

int repack_panels(uint32_t type, int layout, const uint8_t *src, uint64_t row_bytes, int64_t n_in, int64_t n_out,
                  int64_t p0, int64_t p1, uint8_t *dst) {
    if (!repack_bytes(type, layout, n_in, n_out)) return -1;
    const uint64_t pb = repack_panel_bytes(n_in, layout), gb = repack_group_bytes(layout),
                   cb = repack_code_bytes(layout);
    uint8_t codes[RP_ROWS][RP_K], chunk[64];
    uint16_t d[RP_ROWS][2];
    for (int64_t p = p0; p < p1; p++)
        for (int64_t g = 0; g < n_in / RP_K; g++) {
            for (int r = 0; r < RP_ROWS; r++) {
                int64_t row = p * RP_ROWS + r;
                if (row < n_out) row_group(type, src + (uint64_t)row * row_bytes, g, codes[r], d[r]);
                else memset(codes[r], 1, RP_K), d[r][0] = d[r][1] = 0;
            }
            uint8_t *out = dst + (uint64_t)p * pb + (uint64_t)g * gb;
            /* Byte i of the 4 codes at 16c+4j.. holds element 16c+4j+i: shifted 2j and OR-ed, the
             * four steps fill dword r of chunk c (bytewise, so in either byte order). */
            for (int c = 0; c < RP_K / 16; c++) {
                for (int r = 0; r < RP_ROWS; r++) {
                    uint32_t dw = 0;
                    for (int j = 0; j < 4; j++) dw |= (rd_u32(&codes[r][16 * c + 4 * j]) & 0x03030303u) << (2 * j);
                    memcpy(chunk + 4 * r, &dw, 4);
                }
                if (layout == RP_C2) memcpy(out + 64 * c, chunk, 64);
                else {
                    uint8_t *q = out + RP_Q7_CHUNK * c;
                    memset(q, 0, RP_Q7_CHUNK);
                    for (int n = 0; n < 64; n++) q7_put(q, n, q7_of(chunk[n]));
                }
            }
            for (int h = 0; h < 2; h++)
                for (int r = 0; r < RP_ROWS; r++) memcpy(out + cb + 2 * (RP_ROWS * h + r), &d[r][h], 2);
        }
    return 0;
}

float repack_vec_dot(int layout, int64_t n, const uint8_t *w, int r, const void *act) {
    const block_q8_K *y = act;
    const uint64_t gb = repack_group_bytes(layout), cb = repack_code_bytes(layout);
    float s = 0.0f;
    for (int64_t g = 0; g < n / RP_K; g++, w += gb)
        for (int h = 0; h < 2; h++) {
            int isum = 0;
            for (int e = h * RP_K / 2; e < (h + 1) * RP_K / 2; e++) {
                const uint8_t b = chunk_byte(layout, w, e / 16, 4 * r + e % 4);
                isum += (((b >> (2 * (e % 16 / 4))) & 3) - 1) * y[g].qs[e];
            }
            s = fmaf((float)isum, f16_to_f32(rd_u16(w + cb + 2 * (RP_ROWS * h + r))) * y[g].d, s);
        }
    return s;
}
