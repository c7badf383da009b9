/* jinja: a strict subset of Jinja2, enough for the chat templates stored in GGUF files.
 *
 * Rendering follows Hugging Face's apply_chat_template environment: trim_blocks, lstrip_blocks,
 * loop controls (break/continue), raise_exception(), strftime_now() and a tojson like
 * json.dumps(ensure_ascii=False).
 * Supported: text, {{ }}, {# #}, whitespace control (-), if/elif/else, for (with else, an `if`
 * filter and tuple targets), set (names, namespace attributes and {% set x %} blocks), filter
 * blocks, macro, generation blocks;
 * literals, lists, tuples, dicts, arithmetic, ~, comparisons, in, and/or/not, conditional
 * expressions, attributes, subscripts, slices, the filters, tests, string and dict methods listed
 * in jinja.c.
 * Anything else is an error, never a guess.
 *
 * Templates are untrusted input: source size, nesting depth, evaluation steps, memory and output
 * size are all bounded, and every failure is an error message, never a crash. */
#ifndef TRIT_JINJA_H
#define TRIT_JINJA_H

#include <jansson.h>
#include <stddef.h>

#include "base/util.h"

typedef enum {
    JINJA_OK = 0,
    JINJA_UNSUPPORTED, /* syntax or feature outside the subset, or a type error */
    JINJA_LIMIT, /* a safety bound was hit */
    JINJA_RAISED, /* the template called raise_exception() */
} jinja_status;

/* Renders src (len bytes) with the variables of the JSON object ctx. Returns a malloc'd
 * NUL-terminated string (its length in *out_len when not NULL), or NULL with *status and err
 * set. */
char *jinja_render(const char *src, size_t len, const json_t *ctx, size_t *out_len, jinja_status *status,
                   trit_err *err);

#endif
