/* trit.h — the public API of libtrit. The server and the commands that load and run models (run,
 * chat, tokenize, inspect, logits, bench) use only this; quantize, synth and perplexity also use
 * trit_tools.h. cli/ and server/ are compiled against include/ alone, and libtrit.a exports trit_*
 * symbols only; the tests, fuzzers and kernel benchmarks, which reach internal functions, link the
 * library's objects instead.
 *
 * Data flows one way: file -> model (weights mapped, tokenizer) -> session (one sequence:
 * KV cache and scratch) -> logits -> sampler -> tokens -> text.
 * Functions that can fail take `char *err, size_t errlen` and fill it with one line. */
#ifndef TRIT_H
#define TRIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trit_model trit_model;
typedef struct trit_session trit_session;
typedef struct trit_sampler trit_sampler;
typedef struct trit_grammar trit_grammar;

/* ---- model ---- */
typedef struct {
    int use_mmap; /* default 1; 0 reads the file into memory (--no-mmap) */
    int n_gpu_layers; /* llama.cpp's -ngl: at least the model's layer count (or -1) runs the whole
                         model on the Vulkan device (TRIT_VK_DEVICE picks it), fewer the last ones
                         and the output head (the rest on the CPU), TRIT_GPU_LAYERS_AUTO as many
                         as its memory holds; 0 (default) the CPU. Where that cannot be (no
                         device, a build without Vulkan, not enough device memory) the CPU runs it
                         and trit_model_info.backend_note says why */
    int n_ctx; /* the positions -ngl auto keeps room for beside the layers (the sessions' context);
                  0 (default): min(training context, 4096) */
    int gpu_device; /* which Vulkan device (--device): -1 (default) TRIT_VK_DEVICE, else
                       GGML_VK_VISIBLE_DEVICES's first, else 0 */
    int repack; /* default 1: ternary matmul weights are re-laid for the kernels at load,
                         through the on-disk cache ($TRIT_CACHE_DIR, else $XDG_CACHE_HOME/trit,
                         else ~/.cache/trit); 0 uses the file's layout (--no-repack) */
    uint64_t repack_cache_min; /* default 16 MiB: repacked bytes from which the cache is used
                                  (smaller models repack in memory); 0 always, UINT64_MAX never */
    int check; /* default 1: every block scale and float value must be finite, else the file is
                  refused naming the tensor; 0 skips the pass over the weights (--no-check) */
} trit_model_params;

/* -ngl auto: the last layers that fit in the device's memory beside their output head and a
 * sequence of trit_model_params.n_ctx positions. */
#define TRIT_GPU_LAYERS_AUTO (-2)

trit_model_params trit_model_default_params(void);
/* The GPUs the Vulkan loader sees, one "N: name" line each, into buf (what --list-devices
 * prints). 0, or -1 with err (no loader, no device, or a build without Vulkan). */
int trit_gpu_list(char *buf, size_t n, char *err, size_t errlen);
trit_model *trit_model_load(const char *path, const trit_model_params *p, char *err, size_t errlen);
/* Waits for a repack cache file still being written (the first load of a model writes it). */
void trit_model_free(trit_model *m);

int trit_model_n_vocab(const trit_model *m);
int trit_model_n_ctx_train(const trit_model *m);
const char *trit_model_arch(const trit_model *m);
/* One line such as "llama, 5 layers, dim 64, 0.26M params, F32" for logs. */
const char *trit_model_desc(const trit_model *m);
/* One line into buf saying where the layers run: "all N layers on the CPU", or for -ngl which
 * layers are on the GPU, which one, and the GPU memory their weights take of what there is. */
void trit_model_placement(const trit_model *m, char *buf, size_t n);

typedef struct {
    const char *arch; /* "qwen35" */
    const char *ftype; /* type name of the bulk of the weights, e.g. "PTQ1_0" */
    uint64_t n_params; /* elements of every tensor */
    uint64_t n_bytes; /* bytes of every tensor */
    uint64_t n_bytes_token; /* bytes a decoded token reads: every tensor but an untied embedding table */
    int n_layer, n_embd, n_vocab;
    int rotated; /* the file declares a Hadamard rotation contract */
    const char *repack; /* where the weights came from: "built", "cache", "uploaded" (a device) or "none" */
    const char *backend; /* what runs the model: "cpu", "vulkan" or "split" (the first layers on the CPU) */
    const char *backend_note; /* one line: why the CPU runs a model the GPU was asked for ("" else) */
    int n_gpu_layers; /* layers on the GPU (the output head goes with them) */
    const char *gpu; /* the GPU's name, "" on the CPU */
    uint64_t gpu_weight_bytes; /* GPU memory the weights take */
    uint64_t gpu_memory_bytes; /* GPU memory trit may use (TRIT_VK_MEMORY MiB caps it) */
} trit_model_info;

trit_model_info trit_model_get_info(const trit_model *m);
/* Physical cores of this machine: the default thread count. */
int trit_physical_cores(void);
/* The CPU kernel variant in use ("amx", "avx512", "avx2", "neon" or "scalar"). */
const char *trit_cpu_variant(void);

/* ---- tokenizer ---- */
int32_t trit_token_bos(const trit_model *m); /* -1 when the vocabulary has none */
int32_t trit_token_eos(const trit_model *m);
int trit_token_is_eog(const trit_model *m, int32_t tok); /* end of generation (EOS, EOT, ...) */
int trit_add_bos(const trit_model *m); /* whether prompts start with BOS */
/* Tokenizes text; returns the token count, -(needed count) when max_tokens is too small, or
 * INT_MIN on invalid input (NULL text, absurd length, out of memory). len + 8 tokens suffice for
 * byte-level BPE; SentencePiece may need up to 3 a byte (a space becomes U+2581's three bytes,
 * which a malformed UTF-8 character before it can turn into three byte tokens). */
int trit_tokenize(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                  int32_t *tokens, int max_tokens);
/* The same into a malloc'd array of the right size (*tokens; free() it): the count, or INT_MIN on
 * invalid input or out of memory (*tokens NULL). */
int trit_tokenize_alloc(const trit_model *m, const char *text, size_t len, int add_special, int parse_special,
                        int32_t **tokens);
/* A lower bound on the tokens of any len bytes of text (len over the longest token's bytes), so
 * that a text far too long for a context is refused before it is tokenized. */
int64_t trit_tokens_at_least(const trit_model *m, size_t len);
/* Bytes of one token's text (byte tokens decoded, SPM's U+2581 turned into spaces); with
 * special = 0, control tokens render as nothing. Returns the length, -(needed length) when size is
 * too small, or INT_MIN for an id outside the vocabulary. */
int trit_token_to_piece(const trit_model *m, int32_t tok, char *buf, int size, int special);

/* ---- session: one sequence over a loaded model ---- */
/* A KV cache element type, as llama.cpp's -ctk/-ctv: f16 (the default) keeps llama.cpp's
 * flash-attention arithmetic bit for bit; f32, q8_0 and q4_0 (blocks of 32 values with an f16
 * scale: 8.5 and 4.5 bits a value) take f32 arithmetic over the values as stored. */
typedef enum { TRIT_KV_F16 = 0, TRIT_KV_F32, TRIT_KV_Q8_0, TRIT_KV_Q4_0 } trit_kv_type;
/* "f16", "f32", "q8_0", "q4_0" (any case), or -1. */
int trit_kv_type_from_name(const char *name);
const char *trit_kv_type_name(trit_kv_type t);

typedef struct {
    int n_ctx; /* context length (KV cache size); 0 = the model's training context */
    int n_threads; /* 0 = physical cores; a model's sessions share one set of threads, so evaluate
                      them from one thread at a time (a later count applies once none is alive) */
    trit_kv_type type_k, type_v; /* the KV cache's key and value types (default f16); quantized
                                    ones need rows (n_head_kv x head_dim) of whole blocks */
} trit_session_params;

trit_session_params trit_session_default_params(void);

/* What a model and one session of p take, before the session exists. trit_session_new refuses a
 * session whose host state is larger than `available` (TRIT_HOST_MEMORY=MiB caps it). */
typedef struct {
    uint64_t weights; /* the file's tensors: mapped (page cache, shared) or read into memory */
    int weights_mapped;
    uint64_t packed; /* repacked weights held beside them (built in memory, or the repack cache mapped) */
    uint64_t gpu_weights; /* weights on the GPU */
    uint64_t kv_per_token; /* every attention layer's key and value rows, host and GPU */
    uint64_t kv, recurrent, work; /* host memory of one session of n_ctx positions */
    uint64_t gpu_kv, gpu_recurrent, gpu_work; /* GPU memory of it */
    uint64_t available; /* host memory available now (0: unknown) */
    int n_ctx; /* the context planned for (0 resolved to the training context) */
    int max_ctx; /* the largest context up to n_ctx whose host state fits in available */
} trit_memory_plan;
void trit_memory_plan_get(const trit_model *m, const trit_session_params *p, trit_memory_plan *out);
/* The largest context up to p's whose host state fits in `have` bytes (have / n for n sessions). */
int trit_memory_max_ctx(const trit_model *m, const trit_session_params *p, uint64_t have);
/* The plan for n_seq sessions as text: one line ("memory: ..."), or with block = 1 a table of
 * every part, one per line (each line ends in a newline). */
void trit_memory_plan_text(const trit_memory_plan *p, int n_seq, int block, char *buf, size_t n);
trit_session *trit_session_new(trit_model *m, const trit_session_params *p, char *err, size_t errlen);
void trit_session_free(trit_session *s);
int trit_session_n_past(const trit_session *s);
int trit_session_n_ctx(const trit_session *s);
/* Forgets all tokens (the cache is reused). */
void trit_session_reset(trit_session *s);
/* Makes dst continue exactly where src stands (KV cache and recurrent state); both sessions must
 * belong to the same model and cache type, and dst's context must hold src's tokens. */
int trit_session_copy(trit_session *dst, const trit_session *src, char *err, size_t errlen);
/* Rewinding. Attention layers reach any earlier position (their KV rows past it are simply
 * dropped); a model with recurrent layers (qwen35's Gated DeltaNet) carries its past in a state
 * that cannot run backwards, so it reaches only the positions it holds a checkpoint of (and 0).
 * trit_session_checkpoint snapshots that state at the current position (a no-op without recurrent
 * layers); a session keeps the newest TRIT_SESSION_CHECKPOINTS, and reset, copy and load drop them. */
#define TRIT_SESSION_CHECKPOINTS 8
int trit_session_checkpoint(trit_session *s, char *err, size_t errlen);
/* Rewinds to position n (clamped to [0, n_past]), or the nearest reachable position below it, and
 * returns the position reached: the caller evaluates its tokens from there again. */
int trit_session_truncate(trit_session *s, int n);
/* Whether context shift applies: attention layers only (llama, qwen3). */
int trit_session_can_shift(const trit_session *s);
/* Context shift (llama-server's): keeps the first n_keep positions, drops the n_discard after
 * them, and moves the rest down, their keys rotated back n_discard positions by RoPE as llama.cpp
 * does it (so they match a fresh evaluation at the new positions to rounding, not bit for bit).
 * Refused (-1) for recurrent models, whose state cannot forget tokens. */
int trit_session_shift(trit_session *s, int n_keep, int n_discard, char *err, size_t errlen);
/* Saves the whole state (position, KV rows, recurrent state) to path, with n_words int32 words the
 * caller keeps with it (its tokens) ahead of it. The format is versioned and checksummed. Returns
 * the bytes written, or -1. */
long long trit_session_save_file(trit_session *s, const char *path, const int32_t *words, int n_words, char *err,
                                 size_t errlen);
/* Loads a state saved by trit_session_save_file into s: the file must come from the same model,
 * cache type and a context that s can hold (else -1 with the reason, s unchanged). Up to max_words
 * words go to words, their count to *n_words. Returns the bytes read, or -1; a file corrupt past
 * those checks leaves s reset. */
long long trit_session_load_file(trit_session *s, const char *path, int32_t *words, int max_words, int *n_words,
                                 char *err, size_t errlen);
/* Appends n tokens and evaluates them. logits (may be NULL) receives n_vocab floats for each
 * token when all_logits != 0, otherwise for the last token only. Returns 0 or -1. */
int trit_session_eval(trit_session *s, const int32_t *tokens, int n, float *logits, int all_logits, char *err,
                      size_t errlen);

/* Several sessions of one model advance together (a server's continuous batching): item i
 * appends n tokens to session s, logits as trit_session_eval; their tokens share forward passes
 * (each weight is read once for all of them). Every item is checked first: on error (-1) no
 * session has moved. A session may appear once per call; evaluate batches from one thread. */
typedef struct {
    trit_session *s;
    const int32_t *tokens;
    int n;
    float *logits;
    int all_logits;
} trit_batch_item;

int trit_eval_batch(trit_batch_item *items, int n_items, char *err, size_t errlen);

/* ---- sampling (llama.cpp's names, defaults and order) ----
 * The chain, as llama.cpp's common sampler runs it: logit biases (and ignore_eos's bans) ->
 * penalties (repeat, frequency, presence) -> top-k -> top-p -> min-p -> temperature -> a seeded
 * draw from the softmax. Its arithmetic and random numbers too: a seed gives llama.cpp's tokens
 * (std::mt19937 seeded with the seed's low 32 bits, one uniform double per sampled token, the
 * candidates in the order libstdc++'s sorts leave them), and temp <= 0 runs the same chain and
 * keeps only the best candidate. */

/* Added to a token's logit first; -INFINITY bans the token. */
typedef struct {
    int32_t token;
    float bias;
} trit_logit_bias;

typedef struct {
    float temp; /* 0.8; <= 0 means greedy */
    int top_k; /* 40; <= 0 disables */
    float top_p; /* 0.95; 1 disables */
    float min_p; /* 0.05; 0 disables */
    float repeat_penalty; /* 1.0 = off; divides a positive logit, multiplies one <= 0 */
    int repeat_last_n; /* 64: the window of all three penalties (llama.cpp's penalty_last_n),
                                tokens given to trit_sampler_accept; -1 = whole history, 0 = none */
    float presence_penalty; /* 0 = off; subtracted once from a token in the window */
    float frequency_penalty; /* 0 = off; subtracted once per occurrence in the window */
    const trit_logit_bias *logit_bias; /* n_logit_bias entries, copied by the constructor; a token
                                          with several has them all added; ids outside the
                                          vocabulary are ignored. NaN and +INFINITY are refused */
    int n_logit_bias; /* 0 */
    int ignore_eos; /* 0; 1 bans the end-of-generation tokens (needs trit_sampler_new_model) */
    uint64_t seed; /* its low 32 bits seed the generator (llama.cpp's seed is 32 bits); those of
                      TRIT_DEFAULT_SEED (all ones, llama.cpp's LLAMA_DEFAULT_SEED) pick a random one */
} trit_sampler_params;

#define TRIT_DEFAULT_SEED 0xFFFFFFFFu

trit_sampler_params trit_sampler_default_params(void);
/* 0 when trit_sampler_new takes p, else -1 with err saying which parameter is out of range (so
 * that a NULL from trit_sampler_new means out of memory). */
int trit_sampler_params_check(const trit_sampler_params *p, char *err, size_t errlen);
/* A sampler over n_vocab tokens (p NULL: the defaults); NULL on invalid parameters (ignore_eos
 * among them: it needs the model) or out of memory. */
trit_sampler *trit_sampler_new(const trit_sampler_params *p, int n_vocab);
/* A sampler over m's vocabulary; ignore_eos bans m's end-of-generation tokens (a -INFINITY
 * logit bias each, as llama.cpp does it). NULL as trit_sampler_new. */
trit_sampler *trit_sampler_new_model(const trit_model *m, const trit_sampler_params *p);
void trit_sampler_free(trit_sampler *s);
/* Picks the next token from n_vocab logits (the array is not modified). A token whose adjusted
 * logit is -INFINITY (banned) or NaN is never picked while another's is not. */
int32_t trit_sampler_sample(trit_sampler *s, const float *logits);
/* Writes the n_vocab logits the truncation stages start from: the logits with the biases and the
 * penalties of the current history applied (out may be logits). For log-probabilities. */
void trit_sampler_adjust_logits(const trit_sampler *s, const float *logits, float *out);
/* Records a token (prompt or generated) in the penalties' history. */
void trit_sampler_accept(trit_sampler *s, int32_t tok);
/* Forgets the history and replays the random sequence from the seed (the biases stay). */
void trit_sampler_reset(trit_sampler *s);
/* The candidates the last trit_sampler_sample drew from, most probable first, with their
 * probabilities after the whole chain (llama-server's post_sampling_probs; they sum to 1, and
 * llama-server leaves out those of probability 0): writes up to max ids and probs (either may be
 * NULL) and returns how many candidates there are (0 before the first sample or after a reset). */
int trit_sampler_candidates(trit_sampler *s, int32_t *ids, float *probs, int max);

/* ---- grammar: GBNF, llama.cpp's format and matching ----
 * Rules `name ::= alternatives`, groups, `* + ? {m} {m,} {m,n}`, "literals", [classes] with ranges
 * and ^ negation, `.`, escapes \x \u \U \t \n \r \\ \" \[ \] \-, # comments, tokens <[id]>,
 * <text> and their negation !<...>. A grammar attached to a sampler constrains it as llama.cpp's
 * common sampler does: the chain samples freely first; when the token it picks does not fit the
 * grammar, the whole chain runs again (a second random draw) with every token that does not fit
 * banned, so a seed gives llama.cpp's text. End-of-generation tokens fit only where the grammar
 * may end. */

/* Compiles gbnf with start rule root (NULL: "root") against m's vocabulary. NULL with one line
 * in err (the problem and line:column) for an invalid grammar, left recursion, an undefined or
 * missing rule, or a grammar past the size limits. A grammar is immutable: share it freely. */
trit_grammar *trit_grammar_new(const trit_model *m, const char *gbnf, const char *root, char *err, size_t errlen);
void trit_grammar_free(trit_grammar *g); /* samplers using it keep their own reference */
/* Constrains s by g (NULL removes the grammar); s keeps its own reference and state, starting at
 * the grammar's start (trit_sampler_reset returns there). -1 when g is of another vocabulary size
 * or out of memory. */
int trit_sampler_set_grammar(trit_sampler *s, const trit_grammar *g);
/* trit_sampler_accept for a generated token: also advances the grammar. Returns -1 when the
 * grammar refuses the token (only possible when no token fitted), else 0. */
int trit_sampler_accept_generated(trit_sampler *s, int32_t tok);

/* ---- chat ---- */
typedef struct {
    const char *role; /* "system", "user", "assistant" or "tool" */
    const char *content; /* NULL reads as "" */
    const char *reasoning_content; /* NULL: not given (templates split <think>...</think> out of content) */
    const char *tool_calls; /* JSON text of the message's tool_calls array, or NULL (rendering only) */
    const char *name, *tool_call_id; /* a tool message's fields, or NULL */
} trit_chat_message;

/* The model's Jinja chat template (GGUF tokenizer.chat_template), or NULL when it has none. */
const char *trit_model_chat_template(const trit_model *m);

/* Renders a conversation into prompt text. tmpl is a Jinja chat template (such as
 * trit_model_chat_template's) or a built-in template's name ("chatml"); NULL means "chatml".
 * enable_thinking = 0 asks a thinking model to answer without reasoning. Returns a malloc'd
 * string (free() it), or NULL with err set. A ChatML-family template (one that mentions
 * <|im_start|>) that the Jinja subset cannot render falls back to the built-in chatml: the
 * result is returned and the reason left in err; otherwise err is "" on success. */
char *trit_chat_render(const char *tmpl, const trit_chat_message *msgs, int n_msgs, int add_generation_prompt,
                       int enable_thinking, char *err, size_t errlen);

/* trit_chat_render with the model's template when tmpl is NULL (chatml when it has none) and the
 * template variables bos_token / eos_token set to the model's special tokens' text. */
char *trit_model_chat_render(const trit_model *m, const char *tmpl, const trit_chat_message *msgs, int n_msgs,
                             int add_generation_prompt, int enable_thinking, char *err, size_t errlen);

/* How llama-server renders a conversation (trit_model_chat_apply). */
typedef struct {
    const char *tmpl; /* NULL: the model's template (with jinja, llama.cpp's ChatML when it has none) */
    int jinja; /* 1 (--jinja): tmpl is Jinja text, "chatml" naming llama.cpp's ChatML; 0 (--no-jinja):
                  one of llama.cpp's built-in templates, by name ("llama3", "command-r", ...) or
                  recognised in a Jinja text by its markers */
    int add_generation_prompt, enable_thinking;
    int continue_final; /* 1: the last message is continued (a prefill): with jinja, the others are
                           rendered, then the generation prompt, then its text (after its reasoning
                           in <think></think> when the template has those tags); without, it is
                           rendered as a whole message. 2: its reasoning is continued (<think> and
                           the reasoning, left open) */
    const char *tools; /* JSON array text given to the template as `tools` (when not empty), or NULL */
    const char *vars; /* JSON object text of more template variables (chat_template_kwargs), or NULL */
} trit_chat_opts;

/* Renders msgs as llama-server does: with jinja, the variables it sets (bos_token, eos_token,
 * enable_thinking, add_generation_prompt, tools, date_string, datetime, then o->vars), and a
 * leading BOS text dropped when the model's tokenizer adds BOS itself. m may be NULL (no
 * template of its own, empty special tokens: what a startup check of o needs). Returns a
 * malloc'd string, or NULL with err set ("" on success, or the reason a ChatML-family template
 * fell back to the built-in chatml as in trit_chat_render). */
char *trit_model_chat_apply(const trit_model *m, const trit_chat_opts *o, const trit_chat_message *msgs, int n_msgs,
                            char *err, size_t errlen);

/* Whether rendered prompt text ends inside an open <think> block (the model's reply then starts
 * with reasoning). */
int trit_chat_opens_think(const char *prompt);

/* Splits generated text into reasoning (inside <think>...</think>) and content while it streams:
 * feed pieces as tokens arrive; a tag split across pieces is held back until it is decided.
 * Newlines that only frame the tags are dropped, as the chat templates drop them. */
typedef struct {
    int state;
    char held[32]; /* undecided bytes: framing newlines and a partial tag */
    size_t n_held;
} trit_think_split;

/* Receives one run of text: reasoning != 0 for the inside of <think>...</think>. */
typedef void (*trit_think_fn)(void *user, int reasoning, const char *text, size_t len);

/* in_think != 0 when the prompt already opened <think> (see trit_chat_opens_think). */
void trit_think_init(trit_think_split *t, int in_think);
void trit_think_feed(trit_think_split *t, const char *text, size_t len, trit_think_fn fn, void *user);
/* Passes on whatever is still held back (at the end of generation). */
void trit_think_flush(trit_think_split *t, trit_think_fn fn, void *user);

/* ---- JSON Schema -> grammar ---- */
/* Converts a JSON Schema (JSON text) into a GBNF grammar as llama.cpp's json_schema_to_grammar
 * does (the same rules, rule names and text): types, properties / required /
 * additionalProperties, enum, const, items / prefixItems / minItems / maxItems, minLength /
 * maxLength, pattern (llama.cpp's regex subset; others accept any string), integer bounds,
 * formats date, time, date-time and uuid, local $ref with $defs / definitions, anyOf / oneOf /
 * allOf. Returns malloc'd text (free() it), or NULL with one line in err for a schema outside
 * that subset. llama-server's response_format json_object is the schema {"type": "object"}. */
char *trit_json_schema_to_grammar(const char *schema_json, char *err, size_t errlen);

/* ---- tool calls ---- */
/* The form in which a model writes a tool call, recognised from its chat template's markers. */
typedef enum {
    TRIT_TOOLS_GENERIC, /* no markers: {"tool_calls": [{"name", "arguments"}]} or {"tool_call": {...}} */
    TRIT_TOOLS_HERMES, /* <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen2.5, Qwen3, Hermes) */
    TRIT_TOOLS_QWEN_XML, /* <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>
                            (Qwen3-Coder, Qwen3.5) */
    TRIT_TOOLS_LLAMA3, /* {"name": ..., "parameters": {...}}, maybe after <|python_tag|> (Llama 3.x) */
    TRIT_TOOLS_MISTRAL, /* [TOOL_CALLS][{"name", "arguments"}, ...] or [TOOL_CALLS]NAME[ARGS]{...} */
    TRIT_TOOLS_DEEPSEEK, /* DeepSeek's tool-call-begin / tool-sep / tool-call-end markers (R1, V3.1) */
} trit_tool_style;

trit_tool_style trit_tool_style_of(const char *tmpl); /* NULL: generic */
const char *trit_tool_style_name(trit_tool_style s);
int trit_tool_style_from_name(const char *name); /* -1 when unknown */
/* Whether a special token's text is one of the style's call markers (the server keeps those in
 * the text it parses, as llama-server keeps its preserved tokens). */
int trit_tool_marker(trit_tool_style s, const char *piece, size_t n);
/* Where in text (a reply's content so far) a tool call may begin: the offset of its opening
 * marker, or len when there is none; *hold is the length of a suffix that may still become one
 * (keep it back). at_start: text is the reply's beginning (the JSON forms open with "{"). */
size_t trit_tool_scan(trit_tool_style s, const char *text, size_t len, int at_start, size_t *hold);

typedef struct {
    char *name, *arguments; /* arguments: JSON text of an object */
} trit_tool_call;
typedef struct {
    trit_tool_call *calls;
    int n;
} trit_tool_calls;
/* Parses whole calls from the start of text (which begins at a call's marker) into out; *used
 * is the length they span. final: the text is complete (a call may then lack its closing
 * marker). tools_json (the request's tools, or NULL) tells which XML values are strings. Returns
 * the number of calls added (0 when none is whole yet; -1 when out of memory). */
int trit_tool_parse(trit_tool_style s, const char *tools_json, const char *text, size_t len, int final,
                    trit_tool_calls *out, size_t *used);
void trit_tool_calls_free(trit_tool_calls *c);
/* GBNF that makes the reply a call in style s to one of the tools (JSON array text of OpenAI
 * tools), or to `only` when not NULL; parallel allows several calls. malloc'd, or NULL with err. */
char *trit_tool_grammar(trit_tool_style s, const char *tools_json, const char *only, int parallel, char *err,
                        size_t errlen);

/* ---- files ---- */
/* Prints a GGUF file's metadata (long arrays summarised), tensor table, totals and, for every
 * ternary tensor, the fraction of zero trits per tensor and per layer; json != 0 prints one JSON
 * object instead. Returns 0, or -1 with err set when the file is not a valid GGUF. */
int trit_inspect(const char *path, int use_mmap, int json, void *out_FILE, char *err, size_t errlen);

/* ---- models from the Hugging Face Hub ---- */
/* A reference is ORG/NAME[:QUANT]. Files live in huggingface_hub's cache ($HF_HUB_CACHE, else
 * $HF_HOME/hub, else ~/.cache/huggingface/hub), so either tool reuses what the other fetched. */
typedef struct {
    const char *endpoint; /* NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token; /* NULL: $HF_TOKEN (else $HUGGING_FACE_HUB_TOKEN) */
    const char *cache; /* NULL: the cache above */
    const char *revision; /* NULL: "main" */
    const char *file; /* the repo path of the GGUF to take (-hff), instead of picking by quant */
    int offline; /* the cache alone (also $HF_HUB_OFFLINE=1) */
    int refresh; /* ask the hub even when the cache holds the model (trit pull) */
    int retries; /* default 5: tries of a broken download that gained no bytes */
    int retry_ms; /* default 1000: the first wait before a retry (doubled each time) */
    int stall_s; /* default 30: a download with no byte for this long is dropped and retried */
    /* what happens, for the terminal: notes (one line each: the quant chosen, a retry, a wait for
       another process) and a file's progress (bytes so far out of its size) */
    void (*note)(void *user, const char *line);
    void (*progress)(void *user, const char *file, uint64_t done, uint64_t total);
    void *user;
} trit_hub_params;

trit_hub_params trit_hub_default_params(void);
/* Makes ref's model local: the GGUF whose name carries QUANT (without one trit's ternary-first
 * order, PTQ1_0, PQ2_0, TQ1_0, TQ2_0, Q2_0, Q1_0, Q8_0; split models all their parts), from the
 * cache when it holds it, else downloaded and verified. Writes the path of its (first) file into
 * path. 0, or -1 with err (one line). */
int trit_hub_fetch(const char *ref, const trit_hub_params *p, char *path, size_t n, char *err, size_t errlen);
/* Prints the cached models (repo, quant, size, path), one line each, to out_FILE. */
int trit_hub_list(const trit_hub_params *p, void *out_FILE, char *err, size_t errlen);
/* Removes ref's files of QUANT (without one: the whole repo) from the cache, and the blobs no
 * snapshot uses any more; says what it freed on out_FILE. */
int trit_hub_remove(const char *ref, const trit_hub_params *p, void *out_FILE, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
