/* trit: the public API (include/trit.h) over the internal modules. */
#include "trit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "session.h"

struct trit_model {
    model *m;
};

struct trit_session {
    session *s;
};

static void copy_err(const trit_err *e, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", e->msg);
}

trit_model_params trit_model_default_params(void) {
    trit_model_params p = {.use_mmap = 1, .n_gpu_layers = 0};
    return p;
}

trit_model *trit_model_load(const char *path, const trit_model_params *p, char *err, size_t errlen) {
    trit_model_params def = trit_model_default_params();
    if (!p) p = &def;
    trit_err e = {{0}};
    trit_model *tm = malloc(sizeof *tm);
    if (!tm) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    tm->m = model_load(path, p->use_mmap, &e);
    if (!tm->m) {
        copy_err(&e, err, errlen);
        free(tm);
        return NULL;
    }
    return tm;
}

void trit_model_free(trit_model *m) {
    if (!m) return;
    model_free(m->m);
    free(m);
}

int trit_model_n_vocab(const trit_model *m) {
    return model_has_weights(m->m) ? m->m->hp.n_vocab : vocab_n_tokens(m->m->vocab);
}
int trit_model_n_ctx_train(const trit_model *m) { return m->m->hp.n_ctx_train; }
const char *trit_model_arch(const trit_model *m) { return m->m->arch; }
const char *trit_model_desc(const trit_model *m) { return m->m->desc; }

int32_t trit_token_bos(const trit_model *m) { return vocab_bos(m->m->vocab); }
int32_t trit_token_eos(const trit_model *m) { return vocab_eos(m->m->vocab); }
int trit_token_is_eog(const trit_model *m, int32_t tok) { return vocab_is_eog(m->m->vocab, tok); }
int trit_add_bos(const trit_model *m) { return vocab_add_bos(m->m->vocab); }

int trit_tokenize(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                  int32_t *tokens, int max_tokens) {
    return vocab_tokenize(m->m->vocab, text, len, add_special, parse_special, tokens, max_tokens);
}

int trit_token_to_piece(const trit_model *m, int32_t tok, char *buf, int size, int special) {
    return vocab_token_to_piece(m->m->vocab, tok, buf, size, special);
}

trit_session_params trit_session_default_params(void) {
    trit_session_params p = {.n_ctx = 0, .n_threads = 0, .kv_f32 = 0};
    return p;
}

trit_session *trit_session_new(trit_model *m, const trit_session_params *p, char *err, size_t errlen) {
    trit_session_params def = trit_session_default_params();
    if (!p) p = &def;
    trit_err e = {{0}};
    trit_session *ts = malloc(sizeof *ts);
    if (!ts) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ts->s = session_new(m->m, p->n_ctx, p->n_threads, !p->kv_f32, &e);
    if (!ts->s) {
        copy_err(&e, err, errlen);
        free(ts);
        return NULL;
    }
    return ts;
}

void trit_session_free(trit_session *s) {
    if (!s) return;
    session_free(s->s);
    free(s);
}

int trit_session_n_past(const trit_session *s) { return s->s->n_past; }
int trit_session_n_ctx(const trit_session *s) { return s->s->n_ctx; }
void trit_session_reset(trit_session *s) { s->s->n_past = 0; }

int trit_session_eval(trit_session *s, const int32_t *tokens, int n, float *logits, int all_logits, char *err,
                      size_t errlen) {
    trit_err e = {{0}};
    if (session_eval(s->s, tokens, n, logits, all_logits, &e)) {
        copy_err(&e, err, errlen);
        return -1;
    }
    return 0;
}

const char *trit_model_chat_template(const trit_model *m) {
    const char *t = NULL;
    return gguf_get_str(m->m->file, "tokenizer.chat_template", &t, NULL) == 1 ? t : NULL;
}
