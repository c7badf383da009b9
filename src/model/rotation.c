#include "model/rotation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "prism.hadamard."

static const char *const folded_kinds[] = {
    "attn_q",           "attn_k",         "attn_v",       "attn_qkv",       "attn_gate",   "attn_output",
    "ffn_gate",         "ffn_up",         "ffn_down",     "ffn_gate_exps",  "ffn_up_exps", "ffn_down_exps",
    "ffn_gate_up_exps", "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ssm_out",
};
static const char *const rotatable_arches[] = {"llama", "qwen3", "qwen3moe", "qwen35", "qwen35moe", "qwen3next"};

int rot_arch_ok(const char *arch) {
    for (size_t i = 0; i < sizeof rotatable_arches / sizeof rotatable_arches[0]; i++)
        if (!strcmp(arch, rotatable_arches[i])) return 1;
    return 0;
}

int rot_foldable_name(const char *name) {
    if (!strcmp(name, "output.weight")) return 1;
    if (strncmp(name, "blk.", 4)) return 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (*p++ != '.') return 0;
    size_t len = strlen(p);
    if (len < 8 || strcmp(p + len - 7, ".weight")) return 0;
    for (size_t i = 0; i < sizeof folded_kinds / sizeof folded_kinds[0]; i++)
        if (strlen(folded_kinds[i]) == len - 7 && !strncmp(p, folded_kinds[i], len - 7)) return 1;
    return 0;
}

static int need_str(const gguf_file *f, const char *key, const char *want, trit_err *err) {
    const char *v = NULL;
    int r = gguf_get_str(f, key, &v, err);
    if (r < 0) return -1;
    if (r == 0) return fail(err, "%s: the rotation contract lacks '%s'", f->path, key);
    if (strcmp(v, want))
        return fail(err, "%s: '%s' = \"%s\" is not supported (expected \"%s\")", f->path, key, v, want);
    return 0;
}

static const gguf_kv *str_array(const gguf_file *f, const char *key, int required, trit_err *err, int *bad) {
    const gguf_kv *kv = gguf_find(f, key);
    *bad = 0;
    if (!kv) {
        if (required) *bad = 1, fail(err, "%s: the rotation contract lacks '%s'", f->path, key);
        return NULL;
    }
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING) {
        *bad = 1;
        fail(err, "%s: '%s' must be an array of strings", f->path, key);
        return NULL;
    }
    return kv;
}

static int load_names(rot_contract *c, const gguf_file *f, trit_err *err) {
    int bad;
    const gguf_kv *kv = str_array(f, KEY "weight_names", 1, err, &bad);
    if (bad) return -1;
    if (kv->n == 0 || kv->n > 1000000) return fail(err, "%s: '" KEY "weight_names' is empty", f->path);
    c->names = calloc(kv->n, sizeof *c->names);
    if (!c->names) return fail(err, "out of memory");
    for (uint64_t i = 0; i < kv->n; i++) {
        const char *name = kv->strs[i].str;
        if (!rot_foldable_name(name))
            return fail(err, "%s: '" KEY "weight_names' lists '%s', which is not a foldable weight", f->path, name);
        for (int j = 0; j < c->n_names; j++)
            if (!strcmp(c->names[j], name))
                return fail(err, "%s: '" KEY "weight_names' lists '%s' twice", f->path, name);
        c->names[c->n_names++] = kv->strs[i].str;
    }
    kv = str_array(f, KEY "inverse_weight_names", 0, err, &bad);
    if (bad) return -1;
    for (uint64_t i = 0; kv && i < kv->n; i++) {
        if (strcmp(kv->strs[i].str, "token_embd.weight"))
            return fail(err, "%s: '" KEY "inverse_weight_names' lists '%s'; only token_embd.weight can be", f->path,
                        kv->strs[i].str);
        c->inverse_embd = 1;
    }
    return 0;
}

static int load_signs(rot_contract *c, const gguf_file *f, trit_err *err) {
    const gguf_kv *w = gguf_find(f, KEY "sign_widths"), *v = gguf_find(f, KEY "sign_values");
    if (!w || !v)
        return fail(err, "%s: explicit sign mode needs '" KEY "%s'", f->path, w ? "sign_values" : "sign_widths");
    if (w->type != GGUF_ARRAY || !gguf_vtype_size(w->arr_type) || w->n == 0 || w->n > 64)
        return fail(err, "%s: '" KEY "sign_widths' must be a non-empty array of integers", f->path);
    if (v->type != GGUF_ARRAY || !gguf_vtype_size(v->arr_type))
        return fail(err, "%s: '" KEY "sign_values' must be an array of integers", f->path);
    uint64_t total = 0;
    for (uint64_t i = 0; i < w->n; i++) {
        int64_t width = gguf_arr_int(w, i);
        if (width <= 0 || width > (1 << 24) || width % c->block)
            return fail(err, "%s: '" KEY "sign_widths' has width %lld, not a positive multiple of the block size %d",
                        f->path, (long long)width, c->block);
        for (uint64_t j = 0; j < i; j++)
            if (gguf_arr_int(w, j) == width)
                return fail(err, "%s: '" KEY "sign_widths' lists width %lld twice", f->path, (long long)width);
        total += (uint64_t)width;
    }
    if (v->n != total)
        return fail(err, "%s: '" KEY "sign_values' has %llu values; the widths need %llu", f->path,
                    (unsigned long long)v->n, (unsigned long long)total);
    c->signs = malloc(total * sizeof(float));
    c->rots = calloc(w->n, sizeof *c->rots);
    if (!c->signs || !c->rots) return fail(err, "out of memory");
    for (uint64_t i = 0; i < total; i++) {
        int64_t s = gguf_arr_int(v, i);
        if ((s != 1 && s != -1) || gguf_arr_float(v, i) != (double)s)
            return fail(err, "%s: '" KEY "sign_values'[%llu] is %g, not +1 or -1", f->path, (unsigned long long)i,
                        gguf_arr_float(v, i));
        c->signs[i] = (float)s;
    }
    for (uint64_t i = 0, at = 0; i < w->n; i++) {
        rotation *r = &c->rots[c->n_rot++];
        r->block = c->block;
        r->width = (int)gguf_arr_int(w, i);
        r->signs = c->signs + at;
        at += (uint64_t)r->width;
    }
    return 0;
}

int rot_contract_load(rot_contract *c, const gguf_file *f, const char *arch, trit_err *err) {
    memset(c, 0, sizeof *c);
    int64_t version, block;
    int r = gguf_get_int(f, KEY "version", &version, err);
    if (r < 0) return -1;
    if (r == 0) {
        for (size_t i = 0; i < f->n_kv; i++)
            if (!strncmp(f->kv[i].key, KEY, strlen(KEY)))
                return fail(err, "%s: '%s' without '" KEY "version'", f->path, f->kv[i].key);
        return 0;
    }
    c->present = 1;
    if (version != 1)
        return fail(err, "%s: '" KEY "version' = %lld is not supported (only 1)", f->path, (long long)version);
    if (!rot_arch_ok(arch)) return fail(err, "%s: architecture '%s' cannot carry a rotation contract", f->path, arch);
    r = gguf_get_int(f, KEY "block_size", &block, err);
    if (r < 0) return -1;
    if (r == 0) return fail(err, "%s: the rotation contract lacks '" KEY "block_size'", f->path);
    if (block <= 0 || block > (1 << 16) || (block & (block - 1)))
        return fail(err, "%s: '" KEY "block_size' = %lld is not a power of two", f->path, (long long)block);
    c->block = (int)block;
    if (need_str(f, KEY "transform", "normalized-sylvester-walsh-hadamard", err) ||
        need_str(f, KEY "axis", "input-last-dimension", err))
        return -1;
    const char *mode = NULL;
    r = gguf_get_str(f, KEY "sign_mode", &mode, err);
    if (r < 0) return -1;
    if (r == 0) return fail(err, "%s: the rotation contract lacks '" KEY "sign_mode'", f->path);
    if (!strcmp(mode, "explicit")) c->explicit_signs = 1;
    else if (strcmp(mode, "identity"))
        return fail(err, "%s: '" KEY "sign_mode' = \"%s\" is not supported (identity or explicit)", f->path, mode);
    r = gguf_get_bool(f, KEY "gdn_v_grouped", &c->gdn_v_grouped, err);
    if (r < 0) return -1;
    static const char *const known[] = {
        "version",      "block_size",           "transform",    "axis", "sign_mode", "sign_widths", "sign_values",
        "weight_names", "inverse_weight_names", "gdn_v_grouped"};
    for (size_t i = 0; i < f->n_kv; i++) {
        const char *k = f->kv[i].key;
        if (strncmp(k, KEY, strlen(KEY))) continue;
        int found = 0;
        for (size_t j = 0; j < sizeof known / sizeof known[0]; j++) found |= !strcmp(k + strlen(KEY), known[j]);
        if (!found) return fail(err, "%s: unknown rotation key '%s'", f->path, k);
    }
    if (load_names(c, f, err)) return -1;
    if (c->explicit_signs && load_signs(c, f, err)) return -1;
    return 0;
}

void rot_contract_free(rot_contract *c) {
    free(c->names);
    free(c->rots);
    free(c->signs);
    memset(c, 0, sizeof *c);
}

int rot_lists(const rot_contract *c, const char *name) {
    for (int i = 0; i < c->n_names; i++)
        if (!strcmp(c->names[i], name)) return 1;
    return 0;
}

int rot_for_width(const rot_contract *c, int64_t ne0, const char *name, rotation *r, trit_err *err) {
    if (ne0 % c->block)
        return fail(err, "'%s' has %lld inputs, not a multiple of the rotation block %d", name, (long long)ne0,
                    c->block);
    r->block = c->block;
    r->width = (int)ne0;
    r->signs = NULL;
    if (!c->explicit_signs) return 0;
    for (int i = 0; i < c->n_rot; i++)
        if (c->rots[i].width == ne0) {
            *r = c->rots[i];
            return 0;
        }
    return fail(err, "'%s' has %lld inputs but the rotation contract gives no signs of that width", name,
                (long long)ne0);
}

/* Normalized Walsh–Hadamard of one block, as ggml's CPU kernel: scale first, then butterflies. */
static void fwht(float *x, int n) {
    float scale = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= scale;
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += len << 1)
            for (int j = i; j < i + len; j++) {
                float u = x[j], v = x[j + len];
                x[j] = u + v;
                x[j + len] = u - v;
            }
}

void rot_forward(const rotation *r, float *x) {
    if (r->signs)
        for (int i = 0; i < r->width; i++) x[i] *= r->signs[i];
    for (int b = 0; b < r->width; b += r->block) fwht(x + b, r->block);
}

void rot_inverse(const rotation *r, float *x) {
    for (int b = 0; b < r->width; b += r->block) fwht(x + b, r->block);
    if (r->signs)
        for (int i = 0; i < r->width; i++) x[i] *= r->signs[i];
}
