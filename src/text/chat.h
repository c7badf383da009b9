/* chat: conversations into prompt text (Jinja templates with a built-in ChatML fallback) and
 * generated text into reasoning and content. The public side is trit_chat_* in trit.h. */
#ifndef TRIT_CHAT_H
#define TRIT_CHAT_H

#include "trit.h"

/* The built-in ChatML renderer, following Qwen3's template without tools: reasoning is dropped
 * from assistant turns before the last user message, and enable_thinking = 0 closes an empty
 * <think> block in the generation prompt. Returns a malloc'd string, or NULL when out of memory. */
char *chat_render_chatml(const trit_chat_message *msgs, int n, int add_generation_prompt, int enable_thinking);

/* trit_chat_render with the template variables bos_token / eos_token set to these texts (NULL:
 * empty). Its Jinja path is trit_model_chat_apply's, with trit's ChatML for NULL and "chatml". */
char *chat_render(const char *tmpl, const char *bos, const char *eos, const trit_chat_message *msgs, int n_msgs,
                  int add_generation_prompt, int enable_thinking, char *err, size_t errlen);

/* trit_model_chat_apply over a template text (model_tmpl: the model's own, or NULL) and the special
 * tokens' texts. */
char *chat_apply(const trit_chat_opts *o, const char *model_tmpl, const char *bos, const char *eos,
                 const trit_chat_message *msgs, int n, char *err, size_t errlen);

/* chat_builtin.c: llama.cpp's built-in templates. The index of the one a name selects, or that a
 * template text's markers select; -1 for none. */
int chat_builtin_find(const char *tmpl);
/* Renders with template id; NULL when out of memory. */
char *chat_builtin_render(int id, const trit_chat_message *msgs, int n, int add_generation_prompt);

#endif
