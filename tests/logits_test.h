/* Test helper: a model's logits over a fixed 8-token sequence, to compare two files. */
#ifndef TRIT_TEST_LOGITS_H
#define TRIT_TEST_LOGITS_H

#include "trit.h"

/* Logits of every position (8 × n_vocab) with an f32 KV cache, one thread; malloc'd, NULL after
 * a recorded failure. */
float *test_logits(const char *path, int *n_vocab);
/* The same with load parameters (NULL: the defaults); *repack (when not NULL) receives where the
 * model's repacked weights came from (trit_model_info.repack). */
float *test_logits_with(const char *path, const trit_model_params *p, int *n_vocab, const char **repack);
/* Largest |a - b| over those logits, relative to max(1, max |a|); -1 after a recorded failure
 * (either model fails, or the vocabularies differ). */
double test_logit_diff(const char *a, const char *b);

#endif
