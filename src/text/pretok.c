/* pretok: the pre-tokenizers of byte-level BPE vocabularies, as hand-written scanners. Each
 * finds the word that llama.cpp's split regex for that tokenizer.ggml.pre matches at a position
 * (alternatives tried in order, greedy, with backtracking):
 *   gpt-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2:   as llama3 with \p{N} for \p{N}{1,3}
 *   qwen35:  as qwen2 with [\p{L}\p{M}]+ for \p{L}+ and [^\s\p{L}\p{M}\p{N}] for [^\s\p{L}\p{N}]
 * Categories come from utf8proc; \s is the Unicode White_Space property, as in llama.cpp. A byte
 * that starts no UTF-8 sequence counts as one character of category So, as llama.cpp's U+FFFD
 * replacement does (the byte itself is kept). */
#include "text/tokenizer_int.h"

#include <utf8proc.h>

enum { C_END = 0, C_LETTER = 1, C_NUMBER = 2, C_MARK = 4, C_SPACE = 8, C_OTHER = 16 };

typedef struct {
    uint32_t cp, len; /* code point and bytes; len 0 past the end */
    unsigned cls;
} uchar;

typedef struct {
    const char *s;
    size_t len;
    unsigned word; /* categories of \p{L}+ (letters; qwen35 adds marks) */
    unsigned punct; /* categories of [^\s\p{L}\p{N}] (qwen35 leaves out marks) */
} scanner;

static int is_white_space(uint32_t cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static unsigned classify(uint32_t cp) {
    if (is_white_space(cp)) return C_SPACE;
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        return cp >= '0' && cp <= '9' ? C_NUMBER : C_OTHER;
    }
    if (cp > 0x10FFFF) return C_OTHER;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return C_LETTER;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: return C_MARK;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return C_NUMBER;
    default: return C_OTHER;
    }
}

/* The character at s[i], decoded as llama.cpp does: the lead byte gives the length and every
 * continuation byte must be there (overlong forms pass); anything else is a lone byte. */
static uchar char_at(const scanner *sc, size_t i) {
    if (i >= sc->len) return (uchar){0, 0, C_END};
    uint8_t c = (uint8_t)sc->s[i];
    if (c < 0x80) return (uchar){c, 1, classify(c)};
    uint32_t n = c >= 0xF8 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    uint32_t cp = c & (0x7Fu >> n);
    if (n == 0 || n > sc->len - i) return (uchar){0xFFFD, 1, C_OTHER};
    for (uint32_t k = 1; k < n; k++) {
        uint8_t b = (uint8_t)sc->s[i + k];
        if ((b & 0xC0) != 0x80) return (uchar){0xFFFD, 1, C_OTHER};
        cp = cp << 6 | (b & 0x3F);
    }
    return (uchar){cp, n, classify(cp)};
}

/* End of the run of characters in categories cls that starts at i. */
static size_t run(const scanner *sc, size_t i, unsigned cls) {
    for (uchar c; (c = char_at(sc, i)).cls & cls;) i += c.len;
    return i;
}

static int is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

/* 's 't 're 've 'm 'll 'd at i (ASCII case folded when fold): its length, or 0. */
static size_t contraction(const scanner *sc, size_t i, int fold) {
    if (sc->s[i] != '\'' || i + 1 >= sc->len) return 0;
    char a = sc->s[i + 1], b = i + 2 < sc->len ? sc->s[i + 2] : 0;
    if (fold) {
        if (a >= 'A' && a <= 'Z') a = (char)(a + 32);
        if (b >= 'A' && b <= 'Z') b = (char)(b + 32);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

/* A whitespace run at i: \s*[\r\n]+ (when newlines) takes it up to its last newline;
 * \s+(?!\S) takes it all at the end of the text, else all but its last character, which
 * then starts the next word; a single character is \s+. */
static size_t spaces(const scanner *sc, size_t i, int newlines) {
    size_t end = i, last = i, after_newline = 0;
    for (uchar c; (c = char_at(sc, end)).cls & C_SPACE;) {
        last = end;
        end += c.len;
        if (newlines && is_newline(c.cp)) after_newline = end;
    }
    if (after_newline) return after_newline;
    return end == sc->len || last == i ? end : last;
}

static size_t next_gpt2(const scanner *sc, size_t i) {
    size_t n = contraction(sc, i, 0);
    if (n) return i + n;
    uchar c = char_at(sc, i);
    size_t at = i;
    if (c.cp == ' ') { /* " ?" belongs to the word after it */
        uchar d = char_at(sc, i + 1);
        if (d.cls & (C_LETTER | C_NUMBER | sc->punct)) at = i + 1, c = d;
    }
    if (c.cls & C_LETTER) return run(sc, at, C_LETTER);
    if (c.cls & C_NUMBER) return run(sc, at, C_NUMBER);
    if (c.cls & sc->punct) return run(sc, at, sc->punct);
    return spaces(sc, i, 0);
}

static size_t next_llama3(const scanner *sc, size_t i, int max_digits) {
    size_t n = contraction(sc, i, 1);
    if (n) return i + n;
    uchar c = char_at(sc, i), d = char_at(sc, i + c.len);
    if (c.cls & sc->word) return run(sc, i, sc->word);
    /* [^\r\n\p{L}\p{N}]? before the letters */
    if (!is_newline(c.cp) && !(c.cls & C_NUMBER) && (d.cls & sc->word)) return run(sc, i + c.len, sc->word);
    if (c.cls & C_NUMBER) {
        for (int k = 0; k < max_digits && (c = char_at(sc, i)).cls & C_NUMBER; k++) i += c.len;
        return i;
    }
    size_t at = c.cp == ' ' && (d.cls & sc->punct) ? i + 1 : i;
    if (char_at(sc, at).cls & sc->punct) {
        size_t end = run(sc, at, sc->punct);
        while (end < sc->len && is_newline((uint8_t)sc->s[end])) end++;
        return end;
    }
    return spaces(sc, i, 1);
}

size_t pretok_next(enum pretok_kind k, const char *s, size_t len, size_t i) {
    scanner sc = {s, len, C_LETTER, C_OTHER | C_MARK};
    switch (k) {
    case PRETOK_GPT2: return next_gpt2(&sc, i);
    case PRETOK_LLAMA3: return next_llama3(&sc, i, 3);
    case PRETOK_QWEN2: return next_llama3(&sc, i, 1);
    case PRETOK_QWEN35:
        sc.word = C_LETTER | C_MARK;
        sc.punct = C_OTHER;
        return next_llama3(&sc, i, 1);
    }
    return len;
}
