/* chat_builtin: llama.cpp's built-in chat templates (what llama-server renders with --no-jinja),
 * selected by name or recognised in a Jinja source by its markers, as llama.cpp's
 * llm_chat_detect_template does. Most are a wrapper per role; the few with state between turns
 * have their own function. */
#include "text/chat.h"

#include <ctype.h>
#include <string.h>

#include "trit_strbuf.h"

/* In a wrapper: R is the role's name, U the name with a capital first letter, H the name in
 * capitals with "user" spelled HUMAN (Bailing). */
#define R "\x01"
#define U "\x02"
#define H "\x03"

typedef struct {
    const char *pre, *suf; /* pre NULL: the message is left out */
} wrap;

enum { W_SYS, W_USER, W_ASST, W_TOOL, W_OTHER };
enum { T_SYS = 1, T_USER = 2, T_ASST = 4, T_REST = 8, T_ALL = 15 }; /* contents trimmed */

typedef void (*custom_fn)(strbuf *b, const trit_chat_message *m, int n, int add_ass, int variant);

typedef struct {
    const char *name; /* NULL: reached by detection only */
    wrap w[5]; /* system, user, assistant, tool, any other role */
    const char *gen, *start; /* generation prompt; text before the first message */
    unsigned trim;
    custom_fn fn; /* set: renders instead of the wrappers */
    int variant;
} builtin;

static void put(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void put_trimmed(strbuf *b, const char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && isspace((unsigned char)s[n - 1])) n--;
    sb_add(b, s, n);
}

static void put_content(strbuf *b, const char *s, int trim) { trim ? put_trimmed(b, s) : put(b, s); }

static const char *content_of(const trit_chat_message *m) { return m->content ? m->content : ""; }

static int role_is(const trit_chat_message *m, const char *r) { return !strcmp(m->role, r); }

/* A wrapper's text with its role markers filled in. */
static void put_wrap(strbuf *b, const char *w, const char *role) {
    for (; *w; w++) {
        if (*w == *R) put(b, role);
        else if (*w == *U || *w == *H) {
            if (*w == *H && !strcmp(role, "user")) {
                put(b, "HUMAN");
                continue;
            }
            for (size_t i = 0; role[i]; i++) {
                char c = *w == *H || i == 0 ? (char)toupper((unsigned char)role[i]) : role[i];
                sb_add(b, &c, 1);
            }
        } else sb_add(b, w, 1);
    }
}

static int wrap_of(const char *role) {
    return !strcmp(role, "system")   ? W_SYS
        : !strcmp(role, "user")      ? W_USER
        : !strcmp(role, "assistant") ? W_ASST
        : !strcmp(role, "tool")      ? W_TOOL
                                     : W_OTHER;
}

static void render_table(strbuf *b, const builtin *t, const trit_chat_message *m, int n, int add_ass) {
    if (t->start) put(b, t->start);
    for (int i = 0; i < n; i++) {
        int k = wrap_of(m[i].role);
        const wrap *w = &t->w[k];
        if (!w->pre) continue;
        unsigned bit = k == W_SYS ? T_SYS : k == W_USER ? T_USER : k == W_ASST ? T_ASST : T_REST;
        put_wrap(b, w->pre, m[i].role);
        put_content(b, content_of(&m[i]), (t->trim & bit) != 0);
        put_wrap(b, w->suf, m[i].role);
    }
    if (add_ass && t->gen) put(b, t->gen);
}

/* ---- the templates with state between turns ---- */
enum { V1, V3, V3_TEKKEN };

static void mistral(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    const char *lead = v == V1 ? " " : "", *trail = v == V3_TEKKEN ? "" : " ";
    int inside = 0;
    for (int i = 0; i < n; i++) {
        if (!inside) put(b, lead), put(b, "[INST]"), put(b, trail), inside = 1;
        if (role_is(&m[i], "system")) put(b, content_of(&m[i])), put(b, "\n\n");
        else if (role_is(&m[i], "user")) put(b, content_of(&m[i])), put(b, lead), put(b, "[/INST]");
        else {
            put(b, trail);
            put_content(b, content_of(&m[i]), v == V3);
            put(b, "</s>");
            inside = 0;
        }
    }
}

enum { L2, L2_SYS, L2_SYS_BOS, L2_SYS_STRIP };

static void llama2(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    int inside = 1; /* the first [INST] goes without BOS */
    put(b, "[INST] ");
    for (int i = 0; i < n; i++) {
        if (!inside) put(b, v == L2_SYS_BOS ? "<s>[INST] " : "[INST] "), inside = 1;
        const int strip = v == L2_SYS_STRIP;
        if (role_is(&m[i], "system")) {
            put(b, v == L2 ? "" : "<<SYS>>\n");
            put_content(b, content_of(&m[i]), strip);
            put(b, v == L2 ? "\n" : "\n<</SYS>>\n\n");
        } else if (role_is(&m[i], "user")) {
            put_content(b, content_of(&m[i]), strip);
            put(b, " [/INST]");
        } else {
            put_content(b, content_of(&m[i]), strip);
            put(b, "</s>");
            inside = 0;
        }
    }
}

/* Gemma and Orion have no system turn: the system text joins the next user message. */
static void gemma(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    strbuf sys = {0};
    sb_add(&sys, "", 0);
    for (int i = 0; i < n; i++) {
        if (role_is(&m[i], "system")) {
            put_trimmed(&sys, content_of(&m[i]));
            continue;
        }
        const int model = role_is(&m[i], "assistant");
        put(b, "<start_of_turn>"), put(b, model ? "model" : m[i].role), put(b, "\n");
        if (sys.len && !model) put(b, sys.s), put(b, "\n\n"), sys.len = 0;
        put_trimmed(b, content_of(&m[i]));
        put(b, "<end_of_turn>\n");
    }
    if (add_ass) put(b, "<start_of_turn>model\n");
    if (sys.oom) b->oom = 1;
    sb_free(&sys);
}

static void orion(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    strbuf sys = {0};
    sb_add(&sys, "", 0);
    for (int i = 0; i < n; i++) {
        if (role_is(&m[i], "system")) {
            put(&sys, content_of(&m[i]));
        } else if (role_is(&m[i], "user")) {
            put(b, "Human: ");
            if (sys.len) put(b, sys.s), put(b, "\n\n"), sys.len = 0;
            put(b, content_of(&m[i])), put(b, "\n\nAssistant: </s>");
        } else {
            put(b, content_of(&m[i])), put(b, "</s>");
        }
    }
    if (sys.oom) b->oom = 1;
    sb_free(&sys);
}

static void monarch(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    for (int i = 0; i < n; i++) {
        if (i) put(b, "<s>");
        put(b, m[i].role), put(b, "\n"), put(b, content_of(&m[i])), put(b, "</s>\n");
    }
    if (add_ass) put(b, "<s>assistant\n");
}

/* RWKV World: the reply starts after a final user message, whatever add_ass says. */
static void rwkv(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    static const char *const tags[] = {"System: ", "User: ", "Assistant: "};
    for (int i = 0; i < n; i++) {
        int k = wrap_of(m[i].role);
        if (k > W_ASST) continue;
        put(b, tags[k]), put_trimmed(b, content_of(&m[i])), put(b, "\n\n");
        if (k == W_USER && i == n - 1) put(b, "Assistant:");
    }
}

static void gigachat(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    const int sys = n > 0 && role_is(&m[0], "system");
    put(b, "<s>");
    if (sys) put(b, content_of(&m[0])), put(b, "<|message_sep|>");
    for (int i = sys; i < n; i++) {
        if (role_is(&m[i], "user"))
            put(b, "user<|role_sep|>"), put(b, content_of(&m[i])),
                put(b, "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
        else if (role_is(&m[i], "assistant"))
            put(b, "assistant<|role_sep|>"), put(b, content_of(&m[i])), put(b, "<|message_sep|>");
    }
    if (add_ass) put(b, "assistant<|role_sep|>");
}

/* Hunyuan: only a first system message counts; v = 1 is the VL / OCR variant. */
static void hunyuan(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    if (v) put(b, "<｜hy_begin▁of▁sentence｜>");
    for (int i = 0; i < n; i++) {
        if (i == 0 && role_is(&m[i], "system")) {
            put(b, content_of(&m[i])), put(b, "<｜hy_place▁holder▁no▁3｜>");
            if (v) continue;
        }
        if (role_is(&m[i], "assistant")) {
            if (!v) put(b, "<｜hy_Assistant｜>");
            put(b, content_of(&m[i])), put(b, v ? "<｜hy_Assistant｜>" : "<｜hy_place▁holder▁no▁2｜>");
        } else if (role_is(&m[i], "user")) {
            if (!v) put(b, "<｜hy_User｜>");
            put(b, content_of(&m[i])), put(b, v ? "<｜hy_User｜>" : "<｜hy_Assistant｜>");
        }
    }
}

/* Templates that open with a system turn of their own when the conversation has none. */
static void default_system(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v);

#define SKIP \
    { NULL, NULL }
#define ALL(p, s)                                \
    {                                            \
        {p, s}, {p, s}, {p, s}, {p, s}, { p, s } \
    }

static const builtin builtins[] = {
    {"chatml", .w = ALL("<|im_start|>" R "\n", "<|im_end|>\n"), .gen = "<|im_start|>assistant\n"},
    {"llama2", .fn = llama2, .variant = L2},
    {"llama2-sys", .fn = llama2, .variant = L2_SYS},
    {"llama2-sys-bos", .fn = llama2, .variant = L2_SYS_BOS},
    {"llama2-sys-strip", .fn = llama2, .variant = L2_SYS_STRIP},
    {"mistral-v1", .fn = mistral, .variant = V1},
    {"mistral-v3", .fn = mistral, .variant = V3},
    {"mistral-v3-tekken", .fn = mistral, .variant = V3_TEKKEN},
    {"mistral-v7",
     .w = {{"[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]"},
           {"[INST] ", "[/INST]"},
           {" ", "</s>"},
           {" ", "</s>"},
           {" ", "</s>"}}},
    {"mistral-v7-tekken",
     .w = {{"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"}, {"[INST]", "[/INST]"}, {"", "</s>"}, {"", "</s>"}, {"", "</s>"}}},
    {"phi3", .w = ALL("<|" R "|>\n", "<|end|>\n"), .gen = "<|assistant|>\n"},
    {"phi4", .w = ALL("<|im_start|>" R "<|im_sep|>", "<|im_end|>"), .gen = "<|im_start|>assistant<|im_sep|>"},
    {"falcon3", .w = ALL("<|" R "|>\n", "\n"), .gen = "<|assistant|>\n"},
    {"zephyr", .w = ALL("<|" R "|>\n", "<|endoftext|>\n"), .gen = "<|assistant|>\n"},
    {"monarch", .fn = monarch},
    {"gemma", .fn = gemma},
    {"orion", .fn = orion},
    {"openchat",
     .w = {{"", "<|end_of_turn|>"},
           {"GPT4 Correct " U ": ", "<|end_of_turn|>"},
           {"GPT4 Correct " U ": ", "<|end_of_turn|>"},
           {"GPT4 Correct " U ": ", "<|end_of_turn|>"},
           {"GPT4 Correct " U ": ", "<|end_of_turn|>"}},
     .gen = "GPT4 Correct Assistant:"},
    {"vicuna", .w = {{"", "\n\n"}, {"USER: ", "\n"}, {"ASSISTANT: ", "</s>\n"}, SKIP, SKIP}, .gen = "ASSISTANT:"},
    {"vicuna-orca", .w = {{"SYSTEM: ", "\n"}, {"USER: ", "\n"}, {"ASSISTANT: ", "</s>\n"}, SKIP, SKIP},
     .gen = "ASSISTANT:"},
    {"deepseek", .w = {{"", ""}, {"### Instruction:\n", "\n"}, {"### Response:\n", "\n<|EOT|>\n"}, SKIP, SKIP},
     .gen = "### Response:\n"},
    {"deepseek2", .w = {{"", "\n\n"}, {"User: ", "\n\n"}, {"Assistant: ", "<｜end▁of▁sentence｜>"}, SKIP, SKIP},
     .gen = "Assistant:"},
    {"deepseek3", .w = {{"", "\n\n"}, {"<｜User｜>", ""}, {"<｜Assistant｜>", "<｜end▁of▁sentence｜>"}, SKIP, SKIP},
     .gen = "<｜Assistant｜>"},
    {"deepseek-ocr", .w = ALL("", "")},
    {"command-r",
     .w = {{"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
           {"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
           {"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"},
           SKIP,
           SKIP},
     .gen = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", .trim = T_ALL},
    {"llama3", .w = ALL("<|start_header_id|>" R "<|end_header_id|>\n\n", "<|eot_id|>"),
     .gen = "<|start_header_id|>assistant<|end_header_id|>\n\n", .trim = T_ALL},
    {"chatglm3", .w = ALL("<|" R "|>\n ", ""), .gen = "<|assistant|>", .start = "[gMASK]sop"},
    {"chatglm4", .w = ALL("<|" R "|>\n", ""), .gen = "<|assistant|>\n", .start = "[gMASK]<sop>"},
    {"glmedge", .w = ALL("<|" R "|>\n", ""), .gen = "<|assistant|>"},
    {"minicpm", .w = {{"", ""}, {"<用户>", "<AI>"}, {"", ""}, {"", ""}, {"", ""}}, .trim = T_ALL},
    {"exaone3",
     .w = {{"[|system|]", "[|endofturn|]\n"}, {"[|user|]", "\n"}, {"[|assistant|]", "[|endofturn|]\n"}, SKIP, SKIP},
     .gen = "[|assistant|]", .trim = T_ALL},
    {"exaone4",
     .w = {{"[|system|]", "[|endofturn|]\n"},
           {"[|user|]", "\n"},
           {"[|assistant|]", "[|endofturn|]\n"},
           {"[|tool|]", "[|endofturn|]\n"},
           SKIP},
     .gen = "[|assistant|]", .trim = T_ALL},
    {"exaone-moe",
     .w = {{"<|system|>\n", "<|endofturn|>\n"},
           {"<|user|>\n", "<|endofturn|>\n"},
           {"<|assistant|>\n", "<|endofturn|>\n"},
           {"<|tool|>\n", "<|endofturn|>\n"},
           SKIP},
     .gen = "<|assistant|>\n", .trim = T_ALL},
    {"rwkv-world", .fn = rwkv},
    {"granite", .w = ALL("<|start_of_role|>" R "<|end_of_role|>", "<|end_of_text|>\n"),
     .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.0", .w = ALL("<|start_of_role|>" R "<|end_of_role|>", "<|end_of_text|>\n"),
     .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    {"granite-4.1", .w = ALL("<|start_of_role|>" R "<|end_of_role|>", "<|end_of_text|>\n"),
     .gen = "<|start_of_role|>assistant<|end_of_role|>"},
    {"gigachat", .fn = gigachat},
    {"megrez", .w = ALL("<|role_start|>" R "<|role_end|>", "<|turn_end|>"),
     .gen = "<|role_start|>assistant<|role_end|>"},
    {"yandex", .w = {SKIP, {" Пользователь: ", "\n\n"}, {" Ассистент: ", "\n\n"}, SKIP, SKIP},
     .gen = " Ассистент:[SEP]"},
    {"bailing", .w = ALL("<role>" H "</role>", ""), .gen = "<role>ASSISTANT</role>"},
    {"bailing-think", .w = ALL("<role>" H "</role>", ""), .gen = "<role>ASSISTANT</role><think>"},
    {"bailing2", .fn = default_system, .variant = 0},
    {"llama4", .w = ALL("<|header_start|>" R "<|header_end|>\n\n", "<|eot|>"),
     .gen = "<|header_start|>assistant<|header_end|>\n\n", .trim = T_ALL},
    {"smolvlm",
     .w = {{"", "\n\n"},
           {"User: ", "<end_of_utterance>\n"},
           {"Assistant: ", "<end_of_utterance>\n"},
           {"Assistant: ", "<end_of_utterance>\n"},
           {"Assistant: ", "<end_of_utterance>\n"}},
     .gen = "Assistant:", .start = "<|im_start|>"},
    {"hunyuan-moe",
     .w = {{"<|startoftext|>", "<|extra_4|>"},
           {"<|startoftext|>", "<|extra_0|>"},
           {"", "<|eos|>"},
           {"<|startoftext|>", "<|extra_0|>"},
           {"<|startoftext|>", "<|extra_0|>"}}},
    {"gpt-oss",
     .w = {{"<|start|>" R "<|message|>", "<|end|>"},
           {"<|start|>" R "<|message|>", "<|end|>"},
           {"<|start|>" R "<|message|>", "<|return|>"},
           {"<|start|>" R "<|message|>", "<|end|>"},
           {"<|start|>" R "<|message|>", "<|end|>"}},
     .gen = "<|start|>assistant"},
    {"hunyuan-dense", .fn = hunyuan, .variant = 0},
    {"hunyuan-vl", .fn = hunyuan, .variant = 1},
    {"kimi-k2",
     .w = {{"<|im_system|>system<|im_middle|>", "<|im_end|>"},
           {"<|im_user|>user<|im_middle|>", "<|im_end|>"},
           {"<|im_assistant|>assistant<|im_middle|>", "<|im_end|>"},
           {"<|im_system|>tool<|im_middle|>", "<|im_end|>"},
           {"", "<|im_end|>"}},
     .gen = "<|im_assistant|>assistant<|im_middle|>"},
    {"seed_oss", .w = ALL("<seed:bos>" R "\n", "<seed:eos>"), .gen = "<seed:bos>assistant\n", .trim = T_ASST},
    {"grok-2",
     .w = {{"System: ", "<|separator|>\n\n"},
           {"Human: ", "<|separator|>\n\n"},
           {"Assistant: ", "<|separator|>\n\n"},
           SKIP,
           SKIP},
     .gen = "Assistant:", .trim = T_SYS | T_USER},
    {"pangu-embedded", .fn = default_system, .variant = 1},
    {"solar-open", .w = ALL("<|begin|>" R "<|content|>", "<|end|>"), .gen = "<|begin|>assistant"},
    {NULL, /* dots1: detected, not named */
     {{"<|system|>", "<|endofsystem|>"},
      {"<|userprompt|>", "<|endofuserprompt|>"},
      {"<|response|>", "<|endofresponse|>"},
      {"<|response|>", "<|endofresponse|>"},
      {"<|response|>", "<|endofresponse|>"}},
     .gen = "<|response|>"},
};
#define N_BUILTINS (int)(sizeof builtins / sizeof builtins[0])

/* Bailing2 (v 0) and Pangu (v 1) render their wrappers after a default system turn. */
static const builtin with_default[2] = {
    {NULL, .w = ALL("<role>" H "</role>", "<|role_end|>"), .gen = "<role>ASSISTANT</role>"},
    {NULL,
     .w = {{"[unused9]系统：", "[unused10]"},
           {"[unused9]用户：", "[unused10]"},
           {"[unused9]助手：", "[unused10]"},
           {"[unused9]工具：", "[unused10]"},
           SKIP},
     .gen = "[unused9]助手："},
};

static void default_system(strbuf *b, const trit_chat_message *m, int n, int add_ass, int v) {
    if (v == 0 && !(n > 0 && role_is(&m[0], "system"))) put(b, "<role>SYSTEM</role>detailed thinking off<|role_end|>");
    if (v == 1 && n > 0 && !role_is(&m[0], "system")) put(b, "[unused9]系统：[unused10]");
    render_table(b, &with_default[v], m, n, add_ass);
}

static int by_name(const char *name) {
    for (int i = 0; i < N_BUILTINS; i++)
        if (builtins[i].name && !strcmp(builtins[i].name, name)) return i;
    return -1;
}

/* ---- detection (llama.cpp's order: the first rule that matches wins) ---- */
static int has(const char *t, const char *s) { return strstr(t, s) != NULL; }

static int detect_inst(const char *t) {
    if (has(t, "[SYSTEM_PROMPT]")) return by_name("mistral-v7");
    if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]"))
        return by_name(has(t, " [INST]") ? "mistral-v1" : has(t, "\"[INST]\"") ? "mistral-v3-tekken" : "mistral-v3");
    if (has(t, "content.strip()")) return by_name("llama2-sys-strip");
    if (has(t, "bos_token + '[INST]")) return by_name("llama2-sys-bos");
    return by_name(has(t, "<<SYS>>") ? "llama2-sys" : "llama2");
}

static int detect_role_markers(const char *t) {
    if (has(t, "<|start_of_role|>")) {
        if (has(t, "<tool_call>") || has(t, "<tools>"))
            return by_name(has(t, "g4_default_system_message") ? "granite-4.0" : "granite-4.1");
        return by_name("granite");
    }
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"))
        return by_name("gigachat");
    if (has(t, "<|role_start|>")) return by_name("megrez");
    if (has(t, " Ассистент:")) return by_name("yandex");
    if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'")) return by_name("bailing");
    if (has(t, "<role>ASSISTANT</role>") && has(t, "\"HUMAN\"") && has(t, "<think>")) return by_name("bailing-think");
    if (has(t, "<role>ASSISTANT</role>") && has(t, "<role>HUMAN</role>") && has(t, "<|role_end|>"))
        return by_name("bailing2");
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return by_name("llama4");
    if (has(t, "<|endofuserprompt|>")) return N_BUILTINS - 1;
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return by_name("hunyuan-moe");
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return by_name("gpt-oss");
    if (has(t, "<｜hy_Assistant｜>") && has(t, "<｜hy_begin▁of▁sentence｜>")) return by_name("hunyuan-vl");
    if (has(t, "<｜hy_Assistant｜>") && has(t, "<｜hy_place▁holder▁no▁3｜>")) return by_name("hunyuan-dense");
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return by_name("kimi-k2");
    if (has(t, "<seed:bos>")) return by_name("seed_oss");
    if (has(t, "'Assistant: '  + message['content'] + '<|separator|>")) return by_name("grok-2");
    if (has(t, "[unused9]系统：[unused10]")) return by_name("pangu-embedded");
    if (has(t, "<|begin|>") && has(t, "<|end|>") && has(t, "<|content|>")) return by_name("solar-open");
    return -1;
}

static int detect(const char *t) {
    if (has(t, "<|im_start|>"))
        return by_name(has(t, "<|im_sep|>") ? "phi4" : has(t, "<end_of_utterance>") ? "smolvlm" : "chatml");
    if (!strncmp(t, "mistral", 7) || has(t, "[INST]")) return detect_inst(t);
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return by_name("phi3");
    if (has(t, "[gMASK]<sop>")) return by_name("chatglm4");
    if (has(t, "<|assistant|>") && has(t, "<|user|>"))
        return by_name(has(t, "<|tool_declare|>") ? "exaone-moe" : has(t, "</s>") ? "falcon3" : "glmedge");
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return by_name("glmedge");
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return by_name("zephyr");
    if (has(t, "bos_token + message['role']")) return by_name("monarch");
    if (has(t, "<start_of_turn>")) return by_name("gemma");
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return by_name("orion");
    if (has(t, "GPT4 Correct ")) return by_name("openchat");
    if (has(t, "USER: ") && has(t, "ASSISTANT: ")) return by_name(has(t, "SYSTEM: ") ? "vicuna-orca" : "vicuna");
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return by_name("deepseek");
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return by_name("command-r");
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return by_name("llama3");
    if (has(t, "[gMASK]sop")) return by_name("chatglm3");
    if (has(t, "<用户>")) return by_name("minicpm");
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return by_name("deepseek2");
    if (has(t, "<｜Assistant｜>") && has(t, "<｜User｜>") && has(t, "<｜end▁of▁sentence｜>"))
        return by_name("deepseek3");
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return by_name(has(t, "[|tool|]") ? "exaone4" : "exaone3");
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return by_name("rwkv-world");
    return detect_role_markers(t);
}

int chat_builtin_find(const char *tmpl) {
    int i = by_name(tmpl);
    return i >= 0 ? i : detect(tmpl);
}

char *chat_builtin_render(int id, const trit_chat_message *msgs, int n, int add_ass) {
    if (id < 0 || id >= N_BUILTINS) return NULL;
    const builtin *t = &builtins[id];
    strbuf b = {0};
    sb_add(&b, "", 0);
    if (t->fn) t->fn(&b, msgs, n, add_ass, t->variant);
    else render_table(&b, t, msgs, n, add_ass);
    if (b.oom) sb_free(&b);
    return b.s;
}
