/* serve_flags: every flag llama-server takes (llama.cpp v0.5.0, common/arg.cpp: the options of
 * the server example, in its order), so that a drop-in command line never fails on a flag. One row
 * a flag; a row without a setter is accepted and has no effect on trit (docs/server.md lists
 * them). Values are checked by the setters; a wrong one is one line on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "args.h"
#include "serve.h"

#define C "serve"

/* Booleans as llama.cpp reads them: true/1/on/enabled, false/0/off/disabled. */
static int parse_bool(const char *f, const char *v, int *out) {
    const char *yes[] = {"true", "1", "on", "enabled"}, *no[] = {"false", "0", "off", "disabled"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) return *out = 1, 0;
        if (!strcasecmp(v, no[i])) return *out = 0, 0;
    }
    fprintf(stderr, "trit serve: %s expects true or false, got '%s'\n", f, v);
    return -1;
}

static int set_help(serve_opts *o, const char *f, const char *v) { return o->help = 1, 0; }
static int set_version(serve_opts *o, const char *f, const char *v) { return o->version = 1, 0; }
static int set_model(serve_opts *o, const char *f, const char *v) { return o->c.model_path = v, 0; }
static int set_host(serve_opts *o, const char *f, const char *v) { return o->c.host = v, 0; }
static int set_alias(serve_opts *o, const char *f, const char *v) { return o->c.alias = v, 0; }
static int set_tags(serve_opts *o, const char *f, const char *v) { return o->c.tags = v, 0; }
static int set_keys(serve_opts *o, const char *f, const char *v) { return o->keys = v, 0; }
static int set_key_file(serve_opts *o, const char *f, const char *v) { return o->key_file = v, 0; }
static int set_cors(serve_opts *o, const char *f, const char *v) {
    return o->c.cors_origins = v, o->cors_explicit = 1, 0;
}
static int set_cors_methods(serve_opts *o, const char *f, const char *v) { return o->c.cors_methods = v, 0; }
static int set_cors_headers(serve_opts *o, const char *f, const char *v) { return o->c.cors_headers = v, 0; }
static int set_tools(serve_opts *o, const char *f, const char *v) { return o->tools = *v != 0, 0; }
static int set_models_dir(serve_opts *o, const char *f, const char *v) { return o->c.models_dir = v, 0; }
static int set_port(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, 1, 65535, &o->c.port); }
static int set_ctx(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, 0, 1 << 22, &o->c.n_ctx); }
static int set_threads(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1024, &o->c.n_threads);
}
static int set_header_timeout(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 20, &o->c.header_timeout_s);
}
static int set_max_conns(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 1, 1 << 20, &o->c.max_connections);
}
static int set_max_conns_ip(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 20, &o->c.max_connections_per_ip);
}
static int set_timeout(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 30, &o->c.timeout_s);
}
static int set_models_max(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 16, &o->c.models_max);
}
static int set_batch(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 1, 1 << 20, &o->c.n_batch);
}
static int set_npredict(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1 << 30, &o->c.n_predict);
}
/* -1 is llama-server's "auto": the default single slot */
static int set_np(serve_opts *o, const char *f, const char *v) {
    if (!strcmp(v, "-1")) return o->c.n_parallel = 1, 0;
    return arg_int(C, f, v, 1, 256, &o->c.n_parallel);
}
static int set_ping(serve_opts *o, const char *f, const char *v) {
    int sec;
    if (arg_int(C, f, v, 1, 3600, &sec)) return -1;
    return o->c.ping_ms = sec * 1000, 0;
}
/* -1 disables; 0 is refused, as llama-server refuses it */
static int set_sleep(serve_opts *o, const char *f, const char *v) {
    if (!strcmp(v, "-1")) return o->c.sleep_idle_s = -1, 0;
    return arg_int(C, f, v, 1, 1 << 30, &o->c.sleep_idle_s);
}
static int set_temp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 100, &o->c.sp.temp); }
static int set_topk(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, 0, 1 << 30, &o->c.sp.top_k);
}
static int set_topp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 1, &o->c.sp.top_p); }
static int set_minp(serve_opts *o, const char *f, const char *v) { return arg_float(C, f, v, 0, 1, &o->c.sp.min_p); }
static int set_rp(serve_opts *o, const char *f, const char *v) {
    return arg_float(C, f, v, 0, 100, &o->c.sp.repeat_penalty);
}
static int set_pp(serve_opts *o, const char *f, const char *v) {
    return arg_float(C, f, v, -100, 100, &o->c.sp.presence_penalty);
}
static int set_fp(serve_opts *o, const char *f, const char *v) {
    return arg_float(C, f, v, -100, 100, &o->c.sp.frequency_penalty);
}
static int set_rln(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1 << 30, &o->c.sp.repeat_last_n);
}
static int set_seed(serve_opts *o, const char *f, const char *v) {
    if (!strcmp(v, "-1")) return o->c.sp.seed = TRIT_DEFAULT_SEED, 0;
    return arg_u64(C, f, v, &o->c.sp.seed);
}
static int set_ctk(serve_opts *o, const char *f, const char *v) { return arg_cache_type(C, f, v, &o->c.type_k); }
static int set_ctv(serve_opts *o, const char *f, const char *v) { return arg_cache_type(C, f, v, &o->c.type_v); }
static int set_metrics(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.metrics); }
static int set_slots(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.slots); }
static int set_repack(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.repack); }
static int set_no_check(serve_opts *o, const char *f, const char *v) { return o->c.no_check = 1, 0; }
/* llama-server's --device: N or VulkanN picks the GPU, none keeps the model on the CPU */
static int set_device(serve_opts *o, const char *f, const char *v) {
    if (!strcmp(v, "none")) return o->c.n_gpu_layers = 0, 0;
    return arg_int(C, f, strncmp(v, "Vulkan", 6) ? v : v + 6, 0, 64, &o->c.gpu_device);
}
/* llama-server's -ngl: a count, "all", or "auto" (what the GPU's memory holds) */
static int set_ngl(serve_opts *o, const char *f, const char *v) { return arg_ngl(C, f, v, &o->c.n_gpu_layers); }
static int set_verbose(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.verbose); }
static int set_mcp_proxy(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.ui_mcp_proxy); }
static int set_models_autoload(serve_opts *o, const char *f, const char *v) {
    return parse_bool(f, v, &o->c.models_autoload);
}
static int set_cors_credentials(serve_opts *o, const char *f, const char *v) {
    return parse_bool(f, v, &o->c.cors_credentials);
}

/* The prompt cache and slot flags (sched.c). */
static int set_ctx_shift(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.context_shift); }
static int set_kv_unified(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.kv_unified); }
static int set_keep(serve_opts *o, const char *f, const char *v) { return arg_int(C, f, v, -1, 1 << 22, &o->c.n_keep); }
static int set_slot_save_path(serve_opts *o, const char *f, const char *v) {
    struct stat st;
    if (stat(v, &st) || !S_ISDIR(st.st_mode)) return fprintf(stderr, "trit serve: %s: not a directory: %s\n", f, v), -1;
    return o->c.slot_save_path = v, 0;
}

/* ---- chat templates ---- */
static int set_jinja(serve_opts *o, const char *f, const char *v) { return parse_bool(f, v, &o->c.jinja); }
static int set_prefill(serve_opts *o, const char *f, const char *v) {
    return parse_bool(f, v, &o->c.prefill_assistant);
}
static int set_chat_template(serve_opts *o, const char *f, const char *v) { return o->c.chat_template = v, 0; }
static int set_chat_template_file(serve_opts *o, const char *f, const char *v) {
    char *t = arg_read_file(C, v, 1 << 20, NULL); /* the Jinja interpreter's own bound */
    if (!t) return -1;
    free(o->tmpl_text);
    return o->c.chat_template = o->tmpl_text = t, 0;
}
static int set_grammar(serve_opts *o, const char *f, const char *v) { return o->c.grammar = *v ? v : NULL, 0; }
static int set_grammar_file(serve_opts *o, const char *f, const char *v) {
    char *t = arg_read_file(C, v, 16 << 20, NULL); /* a request body's bound */
    if (!t) return -1;
    free(o->grammar_text);
    return o->c.grammar = o->grammar_text = t, 0;
}
static int set_reasoning_budget(serve_opts *o, const char *f, const char *v) {
    return arg_int(C, f, v, -1, 1 << 30, &o->c.reasoning_budget);
}
static int set_reasoning_format(serve_opts *o, const char *f, const char *v) {
    int k = reasoning_format_from_name(v);
    if (k < 0)
        return fprintf(stderr, "trit serve: %s: unknown format '%s' (none, auto, deepseek, deepseek-legacy)\n", f, v),
               -1;
    return o->c.reasoning_format = k, 0;
}
/* on / off / auto, with llama.cpp's spellings of each. */
static int set_reasoning(serve_opts *o, const char *f, const char *v) {
    const char *on[] = {"on", "enabled", "true", "1"}, *off[] = {"off", "disabled", "false", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(v, on[i])) return o->c.reasoning = 1, 0;
        if (!strcasecmp(v, off[i])) return o->c.reasoning = 0, 0;
    }
    if (!strcasecmp(v, "auto") || !strcmp(v, "-1")) return o->c.reasoning = -1, 0;
    return fprintf(stderr, "trit serve: %s: unknown value '%s' (on, off or auto)\n", f, v), -1;
}

/* As llama-server, a template that cannot render one user message stops the server at start. */
static int check_template(const serve_opts *o) {
    if (!o->c.chat_template) return 0;
    trit_chat_message m = {.role = "user", .content = "test"};
    trit_chat_opts t = {.tmpl = o->c.chat_template, .jinja = o->c.jinja, .add_generation_prompt = 1};
    char err[256];
    char *out = trit_model_chat_apply(NULL, &t, &m, 1, err, sizeof err);
    if (!out) return fprintf(stderr, "trit serve: the supplied chat template is not supported: %s\n", err), -1;
    free(out);
    return 0;
}

/* The template flags (--jinja, --chat-template*, --reasoning*) and the session flags
 * (--context-shift, --slot-save-path, -kvu) have their rows below, in llama.cpp's order. */
const serve_flag serve_flags[] = {
    {"-h|--help|--usage", NULL, NULL, F_SWITCH, set_help},
    {"--version", NULL, NULL, F_SWITCH, set_version},
    {"-cl|--cache-list", NULL, NULL, F_SWITCH, NULL},
    {"--completion-bash", NULL, NULL, F_SWITCH, NULL},
    {"-t|--threads", NULL, "LLAMA_ARG_THREADS", F_VALUE, set_threads},
    {"-tb|--threads-batch", NULL, NULL, F_VALUE, NULL},
    {"-C|--cpu-mask", NULL, NULL, F_VALUE, NULL},
    {"-Cr|--cpu-range", NULL, NULL, F_VALUE, NULL},
    {"--cpu-strict", NULL, NULL, F_VALUE, NULL},
    {"--prio", NULL, NULL, F_VALUE, NULL},
    {"--poll", NULL, NULL, F_VALUE, NULL},
    {"-Cb|--cpu-mask-batch", NULL, NULL, F_VALUE, NULL},
    {"-Crb|--cpu-range-batch", NULL, NULL, F_VALUE, NULL},
    {"--cpu-strict-batch", NULL, NULL, F_VALUE, NULL},
    {"--prio-batch", NULL, NULL, F_VALUE, NULL},
    {"--poll-batch", NULL, NULL, F_VALUE, NULL},
    {"-lcs|--lookup-cache-static", NULL, NULL, F_VALUE, NULL},
    {"-lcd|--lookup-cache-dynamic", NULL, NULL, F_VALUE, NULL},
    {"-c|--ctx-size", NULL, "LLAMA_ARG_CTX_SIZE", F_VALUE, set_ctx},
    {"--kv-unified-per-slot", NULL, "LLAMA_ARG_KV_UNIFIED_PER_SLOT", F_VALUE, NULL},
    {"-n|--predict|--n-predict", NULL, "LLAMA_ARG_N_PREDICT", F_VALUE, set_npredict},
    {"-b|--batch-size", NULL, "LLAMA_ARG_BATCH", F_VALUE, set_batch},
    {"-ub|--ubatch-size", NULL, "LLAMA_ARG_UBATCH", F_VALUE, NULL},
    {"--keep", NULL, NULL, F_VALUE, set_keep},
    {"--swa-full", NULL, "LLAMA_ARG_SWA_FULL", F_SWITCH, NULL},
    {"-ctxcp|--ctx-checkpoints|--swa-checkpoints", NULL, "LLAMA_ARG_CTX_CHECKPOINTS", F_VALUE, NULL},
    {"-cms|--checkpoint-min-step", NULL, "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT", F_VALUE, NULL},
    {"-cram|--cache-ram", NULL, "LLAMA_ARG_CACHE_RAM", F_VALUE, NULL},
    {"-kvu|--kv-unified", "-no-kvu|--no-kv-unified", "LLAMA_ARG_KV_UNIFIED", F_BOOL, set_kv_unified},
    {"--cache-idle-slots", "--no-cache-idle-slots", "LLAMA_ARG_CACHE_IDLE_SLOTS", F_BOOL, NULL},
    {"--context-shift", "--no-context-shift", "LLAMA_ARG_CONTEXT_SHIFT", F_BOOL, set_ctx_shift},
    {"-fa|--flash-attn", NULL, "LLAMA_ARG_FLASH_ATTN", F_VALUE, NULL},
    {"--perf", "--no-perf", "LLAMA_ARG_PERF", F_BOOL, NULL},
    {"-e|--escape", "--no-escape", NULL, F_BOOL, NULL},
    {"-r|--reverse-prompt", NULL, NULL, F_VALUE, NULL},
    {"-sp|--special", NULL, NULL, F_SWITCH, NULL},
    {"--warmup", "--no-warmup", NULL, F_BOOL, NULL},
    {"--spm-infill", NULL, NULL, F_SWITCH, NULL},
    {"--samplers", NULL, NULL, F_VALUE, NULL},
    {"-s|--seed", NULL, NULL, F_VALUE, set_seed},
    {"--sampler-seq|--sampling-seq", NULL, NULL, F_VALUE, NULL},
    {"--ignore-eos", NULL, NULL, F_SWITCH, NULL},
    {"--temp|--temperature", NULL, "LLAMA_ARG_TEMPERATURE", F_VALUE, set_temp},
    {"--top-k", NULL, "LLAMA_ARG_TOP_K", F_VALUE, set_topk},
    {"--top-p", NULL, "LLAMA_ARG_TOP_P", F_VALUE, set_topp},
    {"--min-p", NULL, "LLAMA_ARG_MIN_P", F_VALUE, set_minp},
    {"--top-nsigma|--top-n-sigma", NULL, NULL, F_VALUE, NULL},
    {"--xtc-probability", NULL, NULL, F_VALUE, NULL},
    {"--xtc-threshold", NULL, NULL, F_VALUE, NULL},
    {"--typical|--typical-p", NULL, NULL, F_VALUE, NULL},
    {"--repeat-last-n", NULL, NULL, F_VALUE, set_rln},
    {"--repeat-penalty", NULL, "LLAMA_ARG_REPEAT_PENALTY", F_VALUE, set_rp},
    {"--presence-penalty", NULL, "LLAMA_ARG_PRESENCE_PENALTY", F_VALUE, set_pp},
    {"--frequency-penalty", NULL, "LLAMA_ARG_FREQUENCY_PENALTY", F_VALUE, set_fp},
    {"--dry-multiplier", NULL, NULL, F_VALUE, NULL},
    {"--dry-base", NULL, NULL, F_VALUE, NULL},
    {"--dry-allowed-length", NULL, NULL, F_VALUE, NULL},
    {"--dry-penalty-last-n", NULL, NULL, F_VALUE, NULL},
    {"--dry-sequence-breaker", NULL, NULL, F_VALUE, NULL},
    {"--adaptive-target", NULL, NULL, F_VALUE, NULL},
    {"--adaptive-decay", NULL, NULL, F_VALUE, NULL},
    {"--dynatemp-range", NULL, NULL, F_VALUE, NULL},
    {"--dynatemp-exp", NULL, NULL, F_VALUE, NULL},
    {"--mirostat", NULL, NULL, F_VALUE, NULL},
    {"--mirostat-lr", NULL, NULL, F_VALUE, NULL},
    {"--mirostat-ent", NULL, NULL, F_VALUE, NULL},
    {"-l|--logit-bias", NULL, NULL, F_VALUE, NULL},
    {"--grammar", NULL, NULL, F_VALUE, set_grammar},
    {"--grammar-file", NULL, NULL, F_VALUE, set_grammar_file},
    {"-j|--json-schema", NULL, NULL, F_VALUE, NULL},
    {"-jf|--json-schema-file", NULL, NULL, F_VALUE, NULL},
    {"-bs|--backend-sampling", NULL, "LLAMA_ARG_BACKEND_SAMPLING", F_SWITCH, NULL},
    {"--pooling", NULL, "LLAMA_ARG_POOLING", F_VALUE, NULL},
    {"--rope-scaling", NULL, "LLAMA_ARG_ROPE_SCALING_TYPE", F_VALUE, NULL},
    {"--rope-scale", NULL, "LLAMA_ARG_ROPE_SCALE", F_VALUE, NULL},
    {"--rope-freq-base", NULL, "LLAMA_ARG_ROPE_FREQ_BASE", F_VALUE, NULL},
    {"--rope-freq-scale", NULL, "LLAMA_ARG_ROPE_FREQ_SCALE", F_VALUE, NULL},
    {"--yarn-orig-ctx", NULL, "LLAMA_ARG_YARN_ORIG_CTX", F_VALUE, NULL},
    {"--yarn-ext-factor", NULL, "LLAMA_ARG_YARN_EXT_FACTOR", F_VALUE, NULL},
    {"--yarn-attn-factor", NULL, "LLAMA_ARG_YARN_ATTN_FACTOR", F_VALUE, NULL},
    {"--yarn-beta-slow", NULL, "LLAMA_ARG_YARN_BETA_SLOW", F_VALUE, NULL},
    {"--yarn-beta-fast", NULL, "LLAMA_ARG_YARN_BETA_FAST", F_VALUE, NULL},
    {"-kvo|--kv-offload", "-nkvo|--no-kv-offload", "LLAMA_ARG_KV_OFFLOAD", F_BOOL, NULL},
    {"--repack", "-nr|--no-repack", "LLAMA_ARG_REPACK", F_BOOL, set_repack},
    {"--no-check", NULL, "TRIT_NO_CHECK", F_SWITCH, set_no_check},
    {"--no-host", NULL, "LLAMA_ARG_NO_HOST", F_SWITCH, NULL},
    {"-ctk|--cache-type-k", NULL, "LLAMA_ARG_CACHE_TYPE_K", F_VALUE, set_ctk},
    {"-ctv|--cache-type-v", NULL, "LLAMA_ARG_CACHE_TYPE_V", F_VALUE, set_ctv},
    {"-dt|--defrag-thold", NULL, "LLAMA_ARG_DEFRAG_THOLD", F_VALUE, NULL},
    {"-np|--parallel", NULL, "LLAMA_ARG_N_PARALLEL", F_VALUE, set_np},
    {"-cb|--cont-batching", "-nocb|--no-cont-batching", "LLAMA_ARG_CONT_BATCHING", F_BOOL, NULL},
    {"-mm|--mmproj", NULL, "LLAMA_ARG_MMPROJ", F_VALUE, NULL},
    {"-mmu|--mmproj-url", NULL, "LLAMA_ARG_MMPROJ_URL", F_VALUE, NULL},
    {"--mmproj-auto", "--no-mmproj|--no-mmproj-auto", "LLAMA_ARG_MMPROJ_AUTO", F_BOOL, NULL},
    {"--mmproj-offload", "--no-mmproj-offload", "LLAMA_ARG_MMPROJ_OFFLOAD", F_BOOL, NULL},
    {"-mmdev|--mmproj-device", NULL, "MTMD_BACKEND_DEVICE", F_VALUE, NULL},
    {"--image-min-tokens", NULL, "LLAMA_ARG_IMAGE_MIN_TOKENS", F_VALUE, NULL},
    {"--image-max-tokens", NULL, "LLAMA_ARG_IMAGE_MAX_TOKENS", F_VALUE, NULL},
    {"--mtmd-batch-max-tokens", NULL, "LLAMA_ARG_MTMD_BATCH_MAX_TOKENS", F_VALUE, NULL},
    {"--video-fps", NULL, "LLAMA_ARG_VIDEO_FPS", F_VALUE, NULL},
    {"--video-timestamp-interval", NULL, "LLAMA_ARG_VIDEO_TIMESTAMP_INTERVAL", F_VALUE, NULL},
    {"--video-ffmpeg-dir", NULL, "LLAMA_ARG_VIDEO_FFMPEG_DIR", F_VALUE, NULL},
    {"--rpc", NULL, "LLAMA_ARG_RPC", F_VALUE, NULL},
    {"-lm|--load-mode", NULL, "LLAMA_ARG_LOAD_MODE", F_VALUE, NULL},
    {"-lzm|--lazy-mode", NULL, "LLAMA_ARG_LAZY_MODE", F_VALUE, NULL},
    {"--numa", NULL, "LLAMA_ARG_NUMA", F_VALUE, NULL},
    {"-dev|--device", NULL, "LLAMA_ARG_DEVICE", F_VALUE, set_device},
    {"--list-devices", NULL, NULL, F_SWITCH, NULL},
    {"-ot|--override-tensor", NULL, "LLAMA_ARG_OVERRIDE_TENSOR", F_VALUE, NULL},
    {"-cmoe|--cpu-moe", NULL, "LLAMA_ARG_CPU_MOE", F_SWITCH, NULL},
    {"-ncmoe|--n-cpu-moe", NULL, "LLAMA_ARG_N_CPU_MOE", F_VALUE, NULL},
    {"-ncffn|--n-cpu-ffn", NULL, "LLAMA_ARG_N_CPU_FFN", F_VALUE, NULL},
    {"-ngl|--gpu-layers|--n-gpu-layers", NULL, "LLAMA_ARG_N_GPU_LAYERS", F_VALUE, set_ngl},
    {"-sm|--split-mode", NULL, "LLAMA_ARG_SPLIT_MODE", F_VALUE, NULL},
    {"-ts|--tensor-split", NULL, "LLAMA_ARG_TENSOR_SPLIT", F_VALUE, NULL},
    {"-mg|--main-gpu", NULL, "LLAMA_ARG_MAIN_GPU", F_VALUE, NULL},
    {"-fit|--fit", NULL, "LLAMA_ARG_FIT", F_VALUE, NULL},
    {"-fitt|--fit-target", NULL, "LLAMA_ARG_FIT_TARGET", F_VALUE, NULL},
    {"-fitc|--fit-ctx", NULL, "LLAMA_ARG_FIT_CTX", F_VALUE, NULL},
    {"--check-tensors", NULL, NULL, F_SWITCH, NULL},
    {"--override-kv", NULL, NULL, F_VALUE, NULL},
    {"--op-offload", "--no-op-offload", NULL, F_BOOL, NULL},
    {"--lora", NULL, NULL, F_VALUE, NULL},
    {"--lora-scaled", NULL, NULL, F_VALUE, NULL},
    {"--control-vector", NULL, NULL, F_VALUE, NULL},
    {"--control-vector-scaled", NULL, NULL, F_VALUE, NULL},
    {"--control-vector-layer-range", NULL, NULL, F_TWO, NULL},
    {"-a|--alias", NULL, "LLAMA_ARG_ALIAS", F_VALUE, set_alias},
    {"--tags", NULL, "LLAMA_ARG_TAGS", F_VALUE, set_tags},
    {"-m|--model", NULL, "LLAMA_ARG_MODEL", F_VALUE, set_model},
    {"-mu|--model-url", NULL, "LLAMA_ARG_MODEL_URL", F_VALUE, NULL},
    {"-dr|--docker-repo", NULL, "LLAMA_ARG_DOCKER_REPO", F_VALUE, NULL},
    {"--embd-normalize", NULL, NULL, F_VALUE, NULL},
    {"--host", NULL, "LLAMA_ARG_HOST", F_VALUE, set_host},
    {"--port", NULL, "LLAMA_ARG_PORT", F_VALUE, set_port},
    {"--reuse-port", NULL, "LLAMA_ARG_REUSE_PORT", F_SWITCH, NULL},
    {"--path", NULL, "LLAMA_ARG_STATIC_PATH", F_VALUE, NULL},
    {"--cors-origins", NULL, "LLAMA_ARG_CORS_ORIGINS", F_VALUE, set_cors},
    {"--cors-methods", NULL, "LLAMA_ARG_CORS_METHODS", F_VALUE, set_cors_methods},
    {"--cors-headers", NULL, "LLAMA_ARG_CORS_HEADERS", F_VALUE, set_cors_headers},
    {"--cors-credentials", "--no-cors-credentials", "LLAMA_ARG_CORS_CREDENTIALS", F_BOOL, set_cors_credentials},
    {"--api-prefix", NULL, "LLAMA_ARG_API_PREFIX", F_VALUE, NULL},
    {"--ui-config|--webui-config", NULL, "LLAMA_ARG_UI_CONFIG", F_VALUE, NULL},
    {"--ui-config-file|--webui-config-file", NULL, "LLAMA_ARG_UI_CONFIG_FILE", F_VALUE, NULL},
    {"--ui-mcp-proxy|--webui-mcp-proxy", "--no-ui-mcp-proxy|--no-webui-mcp-proxy", "LLAMA_ARG_UI_MCP_PROXY", F_BOOL,
     set_mcp_proxy},
    {"--tools", NULL, "LLAMA_ARG_TOOLS", F_VALUE, set_tools},
    {"--tools-runtime", NULL, "LLAMA_ARG_TOOLS_RUNTIME", F_VALUE, NULL},
    {"--mcp-servers-config", NULL, "LLAMA_ARG_MCP_SERVERS_CONFIG", F_VALUE, NULL},
    {"--mcp-servers-json", NULL, "LLAMA_ARG_MCP_SERVERS_JSON", F_VALUE, NULL},
    {"-ag|--agent", "-no-ag|--no-agent", "LLAMA_ARG_AGENT", F_BOOL, NULL},
    {"--ui|--webui", "--no-ui|--no-webui", "LLAMA_ARG_UI", F_BOOL, NULL},
    {"--embedding|--embeddings", NULL, "LLAMA_ARG_EMBEDDINGS", F_SWITCH, NULL},
    {"--rerank|--reranking", NULL, "LLAMA_ARG_RERANKING", F_SWITCH, NULL},
    {"--api-key", NULL, "LLAMA_API_KEY", F_VALUE, set_keys},
    {"--api-key-file", NULL, "LLAMA_ARG_API_KEY_FILE", F_VALUE, set_key_file},
    {"--ssl-key-file", NULL, "LLAMA_ARG_SSL_KEY_FILE", F_VALUE, NULL},
    {"--ssl-cert-file", NULL, "LLAMA_ARG_SSL_CERT_FILE", F_VALUE, NULL},
    {"--chat-template-kwargs", NULL, "LLAMA_ARG_CHAT_TEMPLATE_KWARGS", F_VALUE, NULL},
    {"-to|--timeout", NULL, "LLAMA_ARG_TIMEOUT", F_VALUE, set_timeout},
    {"--header-timeout", NULL, "TRIT_HEADER_TIMEOUT", F_VALUE, set_header_timeout},
    {"--max-connections", NULL, "TRIT_MAX_CONNECTIONS", F_VALUE, set_max_conns},
    {"--max-connections-per-ip", NULL, "TRIT_MAX_CONNECTIONS_PER_IP", F_VALUE, set_max_conns_ip},
    {"--sse-ping-interval", NULL, "LLAMA_ARG_SSE_PING_INTERVAL", F_VALUE, set_ping},
    {"--threads-http", NULL, "LLAMA_ARG_THREADS_HTTP", F_VALUE, NULL},
    {"--cache-prompt", "--no-cache-prompt", "LLAMA_ARG_CACHE_PROMPT", F_BOOL, NULL},
    {"--cache-reuse", NULL, "LLAMA_ARG_CACHE_REUSE", F_VALUE, NULL},
    {"--metrics", NULL, "LLAMA_ARG_ENDPOINT_METRICS", F_SWITCH, set_metrics},
    {"--props", NULL, "LLAMA_ARG_ENDPOINT_PROPS", F_SWITCH, NULL},
    {"--slots", "--no-slots", "LLAMA_ARG_ENDPOINT_SLOTS", F_BOOL, set_slots},
    {"--slot-save-path", NULL, NULL, F_VALUE, set_slot_save_path},
    {"--media-path", NULL, NULL, F_VALUE, NULL},
    {"--models-dir", NULL, "LLAMA_ARG_MODELS_DIR", F_VALUE, set_models_dir},
    {"--models-preset", NULL, "LLAMA_ARG_MODELS_PRESET", F_VALUE, NULL},
    {"--models-max", NULL, "LLAMA_ARG_MODELS_MAX", F_VALUE, set_models_max},
    {"--models-autoload", "--no-models-autoload", "LLAMA_ARG_MODELS_AUTOLOAD", F_BOOL, set_models_autoload},
    {"--jinja", "--no-jinja", "LLAMA_ARG_JINJA", F_BOOL, set_jinja},
    {"--reasoning-format", NULL, "LLAMA_ARG_THINK", F_VALUE, set_reasoning_format},
    {"-rea|--reasoning", NULL, "LLAMA_ARG_REASONING", F_VALUE, set_reasoning},
    {"--reasoning-effort", NULL, "LLAMA_ARG_REASONING_EFFORT", F_VALUE, NULL},
    {"--reasoning-budget", NULL, "LLAMA_ARG_THINK_BUDGET", F_VALUE, set_reasoning_budget},
    {"--reasoning-budget-message", NULL, "LLAMA_ARG_THINK_BUDGET_MESSAGE", F_VALUE, NULL},
    {"--reasoning-preserve", "--no-reasoning-preserve", "LLAMA_ARG_REASONING_PRESERVE", F_BOOL, NULL},
    {"--chat-template", NULL, "LLAMA_ARG_CHAT_TEMPLATE", F_VALUE, set_chat_template},
    {"--chat-template-file", NULL, "LLAMA_ARG_CHAT_TEMPLATE_FILE", F_VALUE, set_chat_template_file},
    {"--skip-chat-parsing", "--no-skip-chat-parsing", "LLAMA_ARG_SKIP_CHAT_PARSING", F_BOOL, NULL},
    {"--prefill-assistant", "--no-prefill-assistant", "LLAMA_ARG_PREFILL_ASSISTANT", F_BOOL, set_prefill},
    {"-sps|--slot-prompt-similarity", NULL, NULL, F_VALUE, NULL},
    {"--lora-init-without-apply", NULL, NULL, F_SWITCH, NULL},
    {"--sleep-idle-seconds", NULL, NULL, F_VALUE, set_sleep},
    {"--log-disable", NULL, NULL, F_SWITCH, NULL},
    {"--log-file", NULL, "LLAMA_ARG_LOG_FILE", F_VALUE, NULL},
    {"--log-jsonl", "--no-log-jsonl", "LLAMA_ARG_LOG_JSONL", F_BOOL, NULL},
    {"--log-prompts-dir", NULL, NULL, F_VALUE, NULL},
    {"--log-colors", NULL, "LLAMA_ARG_LOG_COLORS", F_VALUE, NULL},
    {"-v|--verbose|--log-verbose", NULL, NULL, F_SWITCH, set_verbose},
    {"--offline", NULL, "LLAMA_ARG_OFFLINE", F_SWITCH, NULL},
    {"-lv|--verbosity|--log-verbosity", NULL, "LLAMA_ARG_LOG_VERBOSITY", F_VALUE, NULL},
    {"--log-prefix", "--no-log-prefix", "LLAMA_ARG_LOG_PREFIX", F_BOOL, NULL},
    {"--log-timestamps", "--no-log-timestamps", "LLAMA_ARG_LOG_TIMESTAMPS", F_BOOL, NULL},
    {"--spec-draft-hf|-hfd|-hfrd|--hf-repo-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_HF_REPO", F_VALUE, NULL},
    {"--spec-draft-threads|-td|--threads-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-threads-batch|-tbd|--threads-batch-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-mask|-Cd|--cpu-mask-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-range|-Crd|--cpu-range-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-strict|--cpu-strict-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-prio|--prio-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-poll|--poll-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-mask-batch|-Cbd|--cpu-mask-batch-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-strict-batch|--cpu-strict-batch-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-prio-batch|--prio-batch-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-poll-batch|--poll-batch-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-type-k|-ctkd|--cache-type-k-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", F_VALUE, NULL},
    {"--spec-draft-type-v|-ctvd|--cache-type-v-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V", F_VALUE, NULL},
    {"--spec-draft-override-tensor|-otd|--override-tensor-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-cpu-moe|-cmoed|--cpu-moe-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_CPU_MOE", F_SWITCH, NULL},
    {"--spec-draft-n-cpu-moe|--spec-draft-ncmoe|-ncmoed|--n-cpu-moe-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE",
     F_VALUE, NULL},
    {"--spec-draft-n-max", NULL, "LLAMA_ARG_SPEC_DRAFT_N_MAX", F_VALUE, NULL},
    {"--spec-draft-n-min", NULL, "LLAMA_ARG_SPEC_DRAFT_N_MIN", F_VALUE, NULL},
    {"--spec-synth-len", NULL, "LLAMA_ARG_SPEC_SYNTH_LEN", F_VALUE, NULL},
    {"--spec-synth-rates", NULL, "LLAMA_ARG_SPEC_SYNTH_RATES", F_VALUE, NULL},
    {"--spec-draft-p-split|--draft-p-split", NULL, "LLAMA_ARG_SPEC_DRAFT_P_SPLIT", F_VALUE, NULL},
    {"--spec-draft-p-min|--draft-p-min", NULL, "LLAMA_ARG_SPEC_DRAFT_P_MIN", F_VALUE, NULL},
    {"--spec-draft-backend-sampling", "--no-spec-draft-backend-sampling", "LLAMA_ARG_SPEC_DRAFT_BACKEND_SAMPLING",
     F_BOOL, NULL},
    {"--spec-draft-device|-devd|--device-draft", NULL, NULL, F_VALUE, NULL},
    {"--spec-draft-ngl|-ngld|--gpu-layers-draft|--n-gpu-layers-draft", NULL, "LLAMA_ARG_N_GPU_LAYERS_DRAFT", F_VALUE,
     NULL},
    {"--spec-draft-model|-md|--model-draft", NULL, "LLAMA_ARG_SPEC_DRAFT_MODEL", F_VALUE, NULL},
    {"--spec-type", NULL, "LLAMA_ARG_SPEC_TYPE", F_VALUE, NULL},
    {"--spec-ngram-mod-n-min", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-mod-n-max", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-mod-n-match", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-simple-size-n", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-simple-size-m", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-simple-min-hits", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k-size-n", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k-size-m", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k-min-hits", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k4v-size-n", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k4v-size-m", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-map-k4v-min-hits", NULL, NULL, F_VALUE, NULL},
    {"--draft|--draft-n|--draft-max", NULL, "LLAMA_ARG_DRAFT_MAX", F_VALUE, NULL},
    {"--draft-min|--draft-n-min", NULL, "LLAMA_ARG_DRAFT_MIN", F_VALUE, NULL},
    {"--spec-ngram-size-n", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-size-m", NULL, NULL, F_VALUE, NULL},
    {"--spec-ngram-min-hits", NULL, NULL, F_VALUE, NULL},
    {"--embd-gemma-default", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-1.5b-default", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-3b-default", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-7b-default", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-7b-spec", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-14b-spec", NULL, NULL, F_SWITCH, NULL},
    {"--fim-qwen-30b-default", NULL, NULL, F_SWITCH, NULL},
    {"--gpt-oss-20b-default", NULL, NULL, F_SWITCH, NULL},
    {"--gpt-oss-120b-default", NULL, NULL, F_SWITCH, NULL},
    {"--vision-gemma-4b-default", NULL, NULL, F_SWITCH, NULL},
    {"--vision-gemma-12b-default", NULL, NULL, F_SWITCH, NULL},
    {"--spec-default", NULL, NULL, F_SWITCH, NULL},
};
const size_t n_serve_flags = sizeof serve_flags / sizeof serve_flags[0];

/* Whether a is one of the '|'-separated spellings in list. */
static int spelled(const char *list, const char *a) {
    size_t n = strlen(a);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, "|");
        if (k == n && !strncmp(p, a, n)) return 1;
        p += k + (p[k] == '|');
    }
    return 0;
}

static int from_env(serve_opts *o) {
    for (size_t k = 0; k < n_serve_flags; k++) {
        const serve_flag *f = &serve_flags[k];
        const char *v = f->env ? getenv(f->env) : NULL;
        if (!v || !*v) continue;
        if (f->arity == F_SWITCH) {
            int on;
            if (parse_bool(f->env, v, &on)) return -1;
            if (!on) continue;
            v = "1";
        }
        if (f->fn && f->fn(o, f->env, v)) return -1;
    }
    return 0;
}

static int from_argv(serve_opts *o, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char a[128];
        snprintf(a, sizeof a, "%s", argv[i]);
        if (!strncmp(a, "--", 2))
            for (char *p = a; *p; p++) *p = *p == '_' ? '-' : *p;
        size_t k = 0;
        int neg = 0;
        while (k < n_serve_flags && !spelled(serve_flags[k].names, a) && !(neg = spelled(serve_flags[k].neg, a))) k++;
        if (k == n_serve_flags)
            return fprintf(stderr, "trit serve: unknown option '%s' (see trit serve --help)\n", argv[i]), -1;
        const serve_flag *f = &serve_flags[k];
        const char *flag = argv[i], *v = neg ? "0" : "1";
        if (f->arity == F_VALUE || f->arity == F_TWO) v = arg_value(C, argc, argv, &i);
        if (v && f->arity == F_TWO && !arg_value(C, argc, argv, &i)) v = NULL;
        if (!v || (f->fn && f->fn(o, flag, v))) return -1;
    }
    return 0;
}

int serve_flags_parse(serve_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    srv_config_defaults(&o->c);
    char why[256];
    if (from_env(o) || from_argv(o, argc, argv) || check_template(o)) return -1;
    if (trit_sampler_params_check(&o->c.sp, why, sizeof why)) return fprintf(stderr, "trit serve: %s\n", why), -1;
    return 0;
}
