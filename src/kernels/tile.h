/* kernels_tile: the tiling every SIMD kernel file shares, included by each after it defines
 * INLINE, UNROLL, its tile sizes (DEC_R rows per decode tile, PP_R x PP_T rows x tokens per
 * prompt tile, MAX_R >= both row counts, PP_T <= 4) and
 *   tile(kind, R, T, n, w[R], a[T], res[R*T]): the R x T dot products of one tile.
 * Rows and tokens past the end repeat the last one (computed, not stored). A file that defines
 * GEMM_MIN_T also defines gemm(kind, mm_args *) after this header: its path for n_tok >= GEMM_MIN_T,
 * which unpacks each weight block once for many tokens (0; -1 leaves the work to the tiles). */
#ifndef TRIT_KERNELS_TILE_H
#define TRIT_KERNELS_TILE_H

typedef struct {
    int64_t n;
    const uint8_t *w;
    size_t w_stride;
    int64_t n_rows;
    const uint8_t *act;
    size_t act_stride;
    int64_t n_tok;
    float *out;
    size_t out_stride;
} mm_args;

INLINE void tile_at(int k, int R, int T, const mm_args *m, int64_t r0, int64_t t0) {
    const uint8_t *w[MAX_R], *a[4];
    float res[MAX_R * 4];
    UNROLL for (int r = 0; r < R; r++) w[r] =
        m->w + (size_t)(r0 + r < m->n_rows ? r0 + r : m->n_rows - 1) * m->w_stride;
    UNROLL for (int t = 0; t < T; t++) a[t] =
        m->act + (size_t)(t0 + t < m->n_tok ? t0 + t : m->n_tok - 1) * m->act_stride;
    tile(k, R, T, m->n, w, a, res);
    for (int t = 0; t < T && t0 + t < m->n_tok; t++)
        for (int r = 0; r < R && r0 + r < m->n_rows; r++)
            m->out[(size_t)(t0 + t) * m->out_stride + (size_t)(r0 + r)] = res[r * T + t];
}

#ifdef GEMM_MIN_T
INLINE int gemm(int k, const mm_args *m);
#endif

INLINE void run(int k, const mm_args *m) {
    int64_t t0 = 0;
#ifdef GEMM_MIN_T
    if (m->n_tok >= GEMM_MIN_T && gemm(k, m) == 0) return;
#endif
    for (; m->n_tok - t0 >= 2; t0 += PP_T)
        for (int64_t r0 = 0; r0 < m->n_rows; r0 += PP_R) tile_at(k, PP_R, PP_T, m, r0, t0);
    for (; t0 < m->n_tok; t0++)
        for (int64_t r0 = 0; r0 < m->n_rows; r0 += DEC_R) tile_at(k, DEC_R, 1, m, r0, t0);
}

#define MATMUL(name, kind)                                                                                          \
    static void name(int64_t n, const void *w, size_t w_stride, int64_t n_rows, const void *act, size_t act_stride, \
                     int64_t n_tok, float *out, size_t out_stride) {                                                \
        const mm_args m = {n, w, w_stride, n_rows, act, act_stride, n_tok, out, out_stride};                        \
        if (n_rows > 0 && n_tok > 0) run(kind, &m);                                                                 \
    }

#endif
