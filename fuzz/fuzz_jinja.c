/* libFuzzer target for the Jinja subset: any bytes as a template, rendered with a small
 * conversation. It must return output or an error, never crash, hang or leak. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "text/jinja/jinja.h"

static json_t *context(void) {
    json_error_t je;
    return json_loads("{\"messages\": [{\"role\": \"system\", \"content\": \"S\"},"
                      " {\"role\": \"user\", \"content\": \"<tool_response>x</tool_response>\"},"
                      " {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nA\", \"tool_calls\": "
                      "[{\"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1.5}}}]},"
                      " {\"role\": \"tool\", \"content\": \"t\"}],"
                      " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}],"
                      " \"add_generation_prompt\": true, \"enable_thinking\": false}",
                      0, &je);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) ctx = context();
    trit_err err = {{0}};
    jinja_status st;
    free(jinja_render((const char *)data, size, ctx, NULL, &st, &err));
    return 0;
}
