/* cand: the sampler's candidate tokens and the orders llama.cpp puts them in. Its samplers sort
 * with libstdc++'s std::sort and std::partial_sort (comparing logits only, so equal logits keep
 * whatever order those algorithms leave), and sort large arrays through 128 logit buckets; the
 * same seed only gives the same token when the candidates stand in the same order, so these
 * follow those algorithms step for step. Order: higher logit first; logits are never NaN. */
#ifndef TRIT_CAND_H
#define TRIT_CAND_H

#include <stdint.h>

typedef struct {
    int32_t id;
    float logit;
    float p;
} cand;

/* Partial sorts from this size up go through the buckets (llama.cpp's threshold). */
#define CAND_BUCKET_MIN 129
#define CAND_BUCKETS 128

/* std::make_heap over c[0..n): the root is the lowest logit. */
void cand_make_heap(cand *c, int n);
/* Puts v in place of the root of the heap c[0..n) (std::pop_heap with v as the displaced value). */
void cand_heap_replace_top(cand *c, int n, cand v);
/* std::sort_heap: the heap c[0..n) becomes sorted. */
void cand_sort_heap(cand *c, int n);
/* std::partial_sort(c, c + mid, c + n): the mid best, sorted, in c[0..mid). */
void cand_partial_sort(cand *c, int mid, int n);
/* std::sort(c, c + n). */
void cand_sort(cand *c, int n);
/* llama.cpp's bucket partial sort: copies to dst every candidate of src[0..n) in the buckets that
 * hold the npartial best (0 < npartial <= n), sorts dst's first npartial, and returns how many it
 * copied. bucket holds n ints of scratch. */
int cand_bucket_sort(const cand *src, int n, int npartial, cand *dst, int *bucket);

#endif
