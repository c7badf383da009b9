/* grammar: GBNF grammars (llama.cpp's format and matching rules) over a vocabulary.
 * grammar_new parses and compiles the text once (immutable, shared by reference); a
 * grammar_state is one generation's position in it: llama.cpp's set of pushdown stacks over
 * code points plus the partial UTF-8 sequence a token left open. grammar_state_mask says which
 * tokens may come next by walking the vocabulary's pieces, sorted, as a trie against the stacks. */
#ifndef TRIT_GRAMMAR_H
#define TRIT_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "text/tokenizer.h"

/* The public trit_grammar (include/trit.h) is this compiled grammar. */
typedef struct trit_grammar grammar;
typedef struct grammar_state grammar_state;

/* Parses src[0..len) (NUL bytes end it, as in llama.cpp) with start rule root (NULL: "root").
 * v (may be NULL) gives the token pieces the mask needs and resolves <token> elements. NULL
 * with one line in err: the problem and its line:column. */
grammar *grammar_new(const char *src, size_t len, const char *root, const vocab *v, trit_err *err);
/* The vocabulary's pieces, sorted, as the mask walks them: built once (a 151k-token vocabulary
 * takes some 40 ms) and shared by reference between the grammars of a model. NULL on out of
 * memory. */
typedef struct grammar_vocab grammar_vocab;
grammar_vocab *grammar_vocab_new(const vocab *v);
void grammar_vocab_free(grammar_vocab *gv);
/* grammar_new with the pieces of gv (which must be v's; it takes a reference), NULL: its own. */
grammar *grammar_new_shared(const char *src, size_t len, const char *root, const vocab *v, grammar_vocab *gv,
                            trit_err *err);
grammar *grammar_ref(grammar *g); /* another reference */
void grammar_free(grammar *g); /* drops a reference */
int grammar_n_vocab(const grammar *g); /* 0 without a vocabulary */

/* A state at the grammar's start; NULL on out of memory. */
grammar_state *grammar_state_new(grammar *g);
void grammar_state_free(grammar_state *st);
/* Back to the start. */
void grammar_state_reset(grammar_state *st);
/* Whether the text so far is a complete sentence (end of generation allowed). */
int grammar_state_can_end(const grammar_state *st);
/* Whether token tok may come next (llama.cpp's test of a single candidate). */
int grammar_state_allows(grammar_state *st, int32_t tok);
/* allowed[t] = whether token t may come next, for the vocabulary's n tokens. -1 on out of memory. */
int grammar_state_mask(grammar_state *st, uint8_t *allowed);
/* Advances by token tok (its piece; an end-of-generation token leaves the state). -1 when the
 * grammar refuses it (the state is then unchanged) or on out of memory. */
int grammar_state_accept(grammar_state *st, int32_t tok);
/* Advances by raw text bytes (no vocabulary needed): 0, or -1 when refused (state unchanged). */
int grammar_state_accept_bytes(grammar_state *st, const char *s, size_t n);

#endif
