/* libFuzzer target for the server's request parsing: any body, for every endpoint, must be parsed
 * or refused with a one-line message, and a parsed chat must render; the generated-text filter
 * gets the same bytes as token pieces. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../server/server.h"

static void check_msg(const char *err, size_t n) {
    if (!memchr(err, 0, n) || strchr(err, '\n') || !err[0]) __builtin_trap();
}

static void parse_one(srv_endpoint ep, const uint8_t *data, size_t size, const srv_config *c) {
    char err[512];
    srv_req q;
    if (route_parse(ep, (const char *)data, size, c, &q, err, sizeof err)) {
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
    parse_one(EP_CHAT, data, size, &c);
    parse_one(EP_CMPL, data, size, &c);
    parse_one(EP_NATIVE, data, size, &c);
    filter(data, size);
    return 0;
}
