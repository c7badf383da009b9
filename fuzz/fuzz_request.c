/* libFuzzer target for the server's request parsing: any body, for every endpoint and dialect,
 * must be parsed or refused with a one-line message, and a parsed chat must render; the generated-text filter
 * gets the same bytes as token pieces. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/server.h"

static void check_msg(const char *err, size_t n) {
    if (!memchr(err, 0, n) || strchr(err, '\n') || !err[0]) __builtin_trap();
}

/* ep, or with dialect >= 0 a conversation body of that dialect (token counting). */
static void parse_one(srv_endpoint ep, int dialect, const uint8_t *data, size_t size, const srv_config *c) {
    char err[512];
    srv_req q;
    const char *body = (const char *)data;
    if (dialect >= 0 ? route_parse_messages((srv_dialect)dialect, body, size, c, &q, err, sizeof err)
                     : route_parse(ep, body, size, c, &q, err, sizeof err)) {
        check_msg(err, sizeof err);
        return;
    }
    if (ep == EP_CHAT) {
        char *p = render_chat(NULL, c, &q, err, sizeof err);
        if (!p) check_msg(err, sizeof err);
        free(p);
    }
    srv_req_free(&q);
}

/* Feeds the input as pieces (split at 0xFF bytes) through the text filter with two stops. */
static void filter(const uint8_t *data, size_t size) {
    char *stops[] = {"</s>", "\n\n"};
    textout t;
    strbuf c = {0}, r = {0};
    textout_init(&t, stops, 2, 1, size && data[0] & 1);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && data[i] != 0xFF) continue;
        if (textout_push(&t, (const char *)data + start, i - start, &c, &r)) break;
        start = i + 1;
    }
    textout_flush(&t, &c, &r);
    textout_free(&t), sb_free(&c), sb_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    srv_config c;
    srv_config_defaults(&c);
    parse_one(EP_CHAT, -1, data, size, &c);
    parse_one(EP_CMPL, -1, data, size, &c);
    parse_one(EP_NATIVE, -1, data, size, &c);
    parse_one(EP_CHAT, DIALECT_RESPONSES, data, size, &c);
    parse_one(EP_CHAT, DIALECT_ANTHROPIC, data, size, &c);
    filter(data, size);
    return 0;
}
