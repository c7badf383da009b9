/* cand: libstdc++'s heap, introsort and partial sort over candidates, and llama.cpp's buckets. */
#include "engine/cand.h"

#include <string.h>

/* The comparator of llama.cpp's sorts: a goes first. */
static int before(const cand *a, const cand *b) { return a->logit > b->logit; }

static void swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Moves v up from hole toward top while its parent goes after it. */
static void push_heap(cand *c, int hole, int top, cand v) {
    int parent = (hole - 1) / 2;
    while (hole > top && before(&c[parent], &v)) {
        c[hole] = c[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    c[hole] = v;
}

/* Sinks the hole at `hole` to a leaf along the children that go after, then pushes v up from
 * there: libstdc++'s two-phase sift, whose moves decide the order of equal logits. */
static void adjust_heap(cand *c, int hole, int n, cand v) {
    const int top = hole;
    int child = hole;
    while (child < (n - 1) / 2) {
        child = 2 * (child + 1);
        if (before(&c[child], &c[child - 1])) child--;
        c[hole] = c[child];
        hole = child;
    }
    if ((n & 1) == 0 && child == (n - 2) / 2) {
        child = 2 * (child + 1);
        c[hole] = c[child - 1];
        hole = child - 1;
    }
    push_heap(c, hole, top, v);
}

void cand_make_heap(cand *c, int n) {
    if (n < 2) return;
    for (int parent = (n - 2) / 2;; parent--) {
        adjust_heap(c, parent, n, c[parent]);
        if (parent == 0) return;
    }
}

void cand_heap_replace_top(cand *c, int n, cand v) { adjust_heap(c, 0, n, v); }

void cand_sort_heap(cand *c, int n) {
    for (int last = n - 1; last > 0; last--) {
        cand v = c[last];
        c[last] = c[0];
        adjust_heap(c, 0, last, v);
    }
}

void cand_partial_sort(cand *c, int mid, int n) {
    if (mid <= 0) return;
    cand_make_heap(c, mid);
    for (int i = mid; i < n; i++)
        if (before(&c[i], &c[0])) {
            cand v = c[i];
            c[i] = c[0];
            adjust_heap(c, 0, mid, v);
        }
    cand_sort_heap(c, mid);
}

/* ---- std::sort: introsort down to runs of 16, then one insertion sort ---- */

enum { RUN = 16 };

/* Puts the median of a, b and m at *r. */
static void median_to_first(cand *r, cand *a, cand *b, cand *m) {
    if (before(a, b)) {
        if (before(b, m)) swap(r, b);
        else if (before(a, m)) swap(r, m);
        else swap(r, a);
    } else if (before(a, m)) swap(r, a);
    else if (before(b, m)) swap(r, m);
    else swap(r, b);
}

/* Hoare partition of [lo, hi) around *pivot; the median above keeps both scans in bounds. */
static cand *partition(cand *lo, cand *hi, const cand *pivot) {
    for (;;) {
        while (before(lo, pivot)) lo++;
        hi--;
        while (before(pivot, hi)) hi--;
        if (!(lo < hi)) return lo;
        swap(lo, hi);
        lo++;
    }
}

static void introsort(cand *first, cand *last, int depth) {
    while (last - first > RUN) {
        if (depth == 0) {
            int n = (int)(last - first);
            cand_partial_sort(first, n, n);
            return;
        }
        depth--;
        median_to_first(first, first + 1, first + (last - first) / 2, last - 1);
        cand *cut = partition(first + 1, last, first);
        introsort(cut, last, depth);
        last = cut;
    }
}

/* Inserts *p into the sorted run before it; something before p stops the scan. */
static void linear_insert(cand *p) {
    cand v = *p;
    cand *prev = p - 1;
    while (before(&v, prev)) {
        *p = *prev;
        p = prev--;
    }
    *p = v;
}

static void insertion_sort(cand *c, int n) {
    for (int i = 1; i < n; i++) {
        if (before(&c[i], &c[0])) {
            cand v = c[i];
            memmove(c + 1, c, (size_t)i * sizeof *c);
            c[0] = v;
        } else linear_insert(&c[i]);
    }
}

void cand_sort(cand *c, int n) {
    if (n < 2) return;
    int lg = 0;
    while ((n >> (lg + 1)) > 0) lg++;
    introsort(c, c + n, 2 * lg);
    if (n > RUN) {
        insertion_sort(c, RUN);
        for (int i = RUN; i < n; i++) linear_insert(&c[i]); /* the first run bounds every scan */
    } else insertion_sort(c, n);
}

/* ---- llama.cpp's bucket partial sort ---- */

/* The bucket of a logit: 128 even steps over [-10, 10], the ends open. The product and the sum
 * round separately, as llama.cpp's compiled expression does. llama.cpp converts the float to int
 * unchecked, which on x86 gives INT_MIN, so bucket 0, for 2^31 and above (logits from about
 * 3.4e8 up, +INFINITY, NaN); here that is decided before a conversion that would overflow. */
static int bucket_of(float logit) {
    const float scale = (float)CAND_BUCKETS / 20.0f, inter = 10.0f * scale;
    float x = scale * logit;
    x += inter;
    if (!(x >= 1.0f) || x >= 2147483648.0f) return 0;
    return x >= (float)(CAND_BUCKETS - 1) ? CAND_BUCKETS - 1 : (int)x;
}

int cand_bucket_sort(const cand *src, int n, int npartial, cand *dst, int *bucket) {
    int histo[CAND_BUCKETS] = {0};
    for (int i = 0; i < n; i++) histo[bucket[i] = bucket_of(src[i].logit)]++;
    int have = 0, low = CAND_BUCKETS - 1;
    for (; low > 0; low--) {
        have += histo[low];
        if (have >= npartial) break;
    }
    if (low == 0) have += histo[0];
    int start[CAND_BUCKETS]; /* where each kept bucket begins in dst, the best bucket first */
    for (int j = CAND_BUCKETS - 1, at = 0; j >= low; j--) start[j] = at, at += histo[j];
    for (int i = 0; i < n; i++)
        if (bucket[i] >= low) dst[start[bucket[i]]++] = src[i];
    cand *p = dst;
    int done = 0;
    for (int j = CAND_BUCKETS - 1; j > low; j--) {
        cand_sort(p, histo[j]);
        p += histo[j];
        done += histo[j];
    }
    cand_partial_sort(p, npartial - done, histo[low]);
    return have;
}
