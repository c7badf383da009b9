/* chat: conversations into prompt text (Jinja templates with a built-in ChatML fallback) and
 * generated text into reasoning and content. The public side is trit_chat_* in trit.h. */
#ifndef TRIT_CHAT_H
#define TRIT_CHAT_H

#include "trit.h"

/* The built-in ChatML renderer, following Qwen3's template without tools: reasoning is dropped
 * from assistant turns before the last user message, and enable_thinking = 0 closes an empty
 * <think> block in the generation prompt. Returns a malloc'd string, or NULL when out of memory. */
char *chat_render_chatml(const trit_chat_message *msgs, int n, int add_generation_prompt, int enable_thinking);

/* trit_chat_render with the template variables bos_token / eos_token defined when they are given
 * (NULL: left undefined). */
char *chat_render(const char *tmpl, const char *bos, const char *eos, const trit_chat_message *msgs, int n_msgs,
                  int add_generation_prompt, int enable_thinking, char *err, size_t errlen);

#endif
