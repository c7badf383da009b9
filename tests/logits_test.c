#include "logits_test.h"

#include <math.h>
#include <stdlib.h>

#include "test.h"
#include "trit.h"

float *test_logits(const char *path, int *n_vocab) { return test_logits_with(path, NULL, n_vocab, NULL); }

float *test_logits_with(const char *path, const trit_model_params *p, int *n_vocab, const char **repack) {
    static const int32_t seq[] = {1, 15, 27, 300, 42, 7, 99, 100};
    char err[512];
    trit_model *m = trit_model_load(path, p, err, sizeof err);
    if (!m) return test_failed(__FILE__, __LINE__, "%s: %s", path, err), NULL;
    if (repack) *repack = trit_model_get_info(m).repack;
    trit_session_params sp = {.n_ctx = 16, .n_threads = 1, .type_k = TRIT_KV_F32, .type_v = TRIT_KV_F32};
    trit_session *s = trit_session_new(m, &sp, err, sizeof err);
    *n_vocab = trit_model_n_vocab(m);
    float *l = malloc(8 * (size_t)*n_vocab * sizeof *l);
    if (!s || !l || trit_session_eval(s, seq, 8, l, 1, err, sizeof err)) {
        test_failed(__FILE__, __LINE__, "%s: %s", path, s && l ? err : "out of memory");
        free(l);
        l = NULL;
    }
    trit_session_free(s);
    trit_model_free(m);
    return l;
}

double test_logit_diff(const char *a, const char *b) {
    int na = 0, nb = 0;
    float *x = test_logits(a, &na), *y = test_logits(b, &nb);
    double md = -1, mx = 1;
    if (x && y && na == nb) {
        md = 0;
        for (int i = 0; i < 8 * na; i++) md = fmax(md, fabs(x[i] - y[i])), mx = fmax(mx, fabs(x[i]));
        md /= mx;
    } else if (x && y) {
        test_failed(__FILE__, __LINE__, "%s has %d tokens, %s %d", a, na, b, nb);
    }
    free(x), free(y);
    return md;
}
