/* kernels_kind: the weight kinds of the SIMD kernel files (a weight type with its activation
 * family) and their block geometry; included by each after it defines INLINE. */
#ifndef TRIT_KERNELS_KIND_H
#define TRIT_KERNELS_KIND_H

enum { K_PTQ1, K_Q1, K_Q2, K_Q8, K_TQ1, K_TQ2, K_PQ2 };

/* Elements and bytes of one block, and where its f16 scale sits (0: first). */
typedef struct {
    int nb, bytes, d_off;
} kind_info;

INLINE kind_info info(int k) {
    switch (k) {
    case K_PTQ1: return (kind_info){QK_PTQ1_0, sizeof(block_ptq1_0), 26};
    case K_Q1: return (kind_info){QK1_0, sizeof(block_q1_0), 0};
    case K_Q2: return (kind_info){QK2_0, sizeof(block_q2_0), 0};
    case K_Q8: return (kind_info){QK8_0, sizeof(block_q8_0), 0};
    case K_TQ1: return (kind_info){QK_K, sizeof(block_tq1_0), 52};
    case K_TQ2: return (kind_info){QK_K, sizeof(block_tq2_0), 64};
    default: return (kind_info){QK_PQ2_0, sizeof(block_pq2_0), 0};
    }
}

#endif
