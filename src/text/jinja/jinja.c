/* jinja: entry point of the Jinja2-subset interpreter. jinja_render normalises the source, lexes
 * it (lexer.c), parses it (parser.c) and runs the tree (eval.c, filters.c) over values (value.c,
 * pystr.c); jinja_int.h declares what those files share.
 *
 * Everything a render allocates lives in one arena, freed at the end; errors longjmp back to
 * jinja_render, so no path can leak or continue in a half-built state. Values are immutable
 * except namespace() objects and the loop variable, as in Jinja.
 *
 * Filters: length count trim string tojson(indent=, ensure_ascii=) lower upper first last join
 *          items list default d reverse int safe replace selectattr rejectattr.  Tests: defined
 *          undefined none string number integer float boolean true false mapping iterable
 *          sequence.  Functions: namespace raise_exception range strftime_now.  String methods:
 *          startswith endswith split strip lstrip rstrip lower upper replace.  Dict methods: items
 *          keys values get.  Loop: index index0 revindex revindex0 first last length. */
#include "text/jinja/jinja_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- entry ---- */
/* As Jinja: \r\n and \r become \n, and one trailing newline is dropped. */
static void normalize(J *j, const char *src, size_t len) {
    char *d = jinja_alloc(j, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            d[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            d[n++] = src[i];
        }
    }
    if (n && d[n - 1] == '\n') n--;
    j->src = d, j->end = d + n;
}

static void release(J *j) {
    while (j->chunks) {
        chunk *c = j->chunks;
        j->chunks = c->next;
        free(c);
    }
    free(j->toks);
}

char *jinja_render(const char *src, size_t len, const json_t *ctx, size_t *out_len, jinja_status *status,
                   trit_err *err) {
    J *j = calloc(1, sizeof *j);
    if (!j) {
        fail(err, "out of memory");
        if (status) *status = JINJA_LIMIT;
        return NULL;
    }
    j->err = err;
    if (setjmp(j->jb)) {
        if (status) *status = j->st;
        free(j->out);
        release(j);
        free(j);
        return NULL;
    }
    if (!src || len > MAX_SRC) jinja_die(j, JINJA_LIMIT, 0, "template larger than %u KiB", MAX_SRC >> 10);
    if (!json_is_object(ctx)) jinja_die(j, JINJA_UNSUPPORTED, 0, "the variables must be a JSON object");
    normalize(j, src, len);
    jinja_lex(j);
    node *prog = jinja_parse(j);
    j->root = jinja_scope_new(j, NULL);
    static const char *fns[] = {"namespace", "raise_exception", "range", "strftime_now"};
    for (int k = 0; k < 4; k++)
        jinja_dict_set(j, &j->root->vars, (str){fns[k], strlen(fns[k])}, (val){.k = V_FUNC, .u.fn = k});
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ctx, key, v)
        jinja_dict_set(j, &j->root->vars, jinja_mkstr(j, key, strlen(key)), jinja_from_json(j, v, 0));
    jinja_exec(j, prog, j->root);
    jinja_emit(j, "", 0, 0);
    j->out[j->out_n] = 0;
    char *out = j->out;
    if (out_len) *out_len = j->out_n;
    if (status) *status = JINJA_OK;
    release(j);
    free(j);
    return out;
}
