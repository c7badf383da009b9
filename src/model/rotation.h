/* rotation: the prism.hadamard.* contract (bonsai2-contract.md §3).
 * A folded weight W' was stored as rows H_b(s ⊙ w): the runtime feeds it x' = H_b(s ⊙ x), with
 * H_b the normalized Sylvester Walsh–Hadamard matrix applied blockwise (block b from the file)
 * and s the file's ±1 vector of the input's width. A rotated embedding row z becomes s ⊙ H_b(z). */
#ifndef TRIT_ROTATION_H
#define TRIT_ROTATION_H

#include <stdint.h>

#include "base/util.h"
#include "gguf/gguf.h"

typedef struct {
    int block; /* transform block size (a power of two) */
    int width; /* input width this rotation serves */
    const float *signs; /* [width] ±1, or NULL (identity sign mode) */
} rotation;

typedef struct {
    int present; /* the file declares a contract */
    int block;
    int explicit_signs;
    int n_rot;
    rotation *rots; /* explicit mode: one per declared width */
    float *signs; /* all sign vectors, concatenated */
    char **names; /* weight_names */
    int n_names;
    int inverse_embd; /* token_embd.weight is stored rotated */
    int gdn_v_grouped;
} rot_contract;

/* Reads and validates the prism.hadamard.* keys of f (any integer element types); arch is the
 * file's architecture, which must be one that may carry a contract when f declares one.
 * Absent contract: present = 0. Unknown or inconsistent keys are refused, naming the key.
 * c->names point into f, which must outlive c. */
int rot_contract_load(rot_contract *c, const gguf_file *f, const char *arch, trit_err *err);
void rot_contract_free(rot_contract *c);
/* Fills *r for a weight with input width ne0; -1 with err when the file gives no signs for it. */
int rot_for_width(const rot_contract *c, int64_t ne0, const char *name, rotation *r, trit_err *err);
/* Whether the contract lists this tensor name in weight_names. */
int rot_lists(const rot_contract *c, const char *name);

/* Whether a tensor name may appear in weight_names: "output.weight" or "blk.<n>.<kind>.weight"
 * with a kind the fork folds (a matmul reading the residual stream, FFN hidden or mixer output). */
int rot_foldable_name(const char *name);
/* Whether an architecture may carry a contract. */
int rot_arch_ok(const char *arch);

/* x[0..width) <- H_b(s ⊙ x): the input a folded weight expects. */
void rot_forward(const rotation *r, float *x);
/* x[0..width) <- s ⊙ H_b(x): an embedding row back from the rotated basis. */
void rot_inverse(const rotation *r, float *x);

#endif
