/* libFuzzer target for the repack cache's header parser: any input must be refused with one line
 * or, once accepted, have every tensor inside the input, in order, without overlaps. The input's
 * checksum is recomputed first (when its table fits), so that mutations reach the checks behind it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "types/repack.h"
#include "backend/cpu/repack_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *b = malloc(size ? size : 1);
    if (!b) return 0;
    memcpy(b, data, size);
    if (size >= RC_HEADER_BYTES) {
        uint32_t n = rd_u32(b + 12);
        if ((uint64_t)RC_HEADER_BYTES + (uint64_t)n * RC_ENTRY_BYTES <= size) rc_seal(b);
    }
    trit_err err = {{0}};
    rc_identity id;
    rc_entry *e = NULL;
    uint32_t n = 0;
    if (rc_parse(b, size, &id, &e, &n, &err)) {
        if (e || !memchr(err.msg, 0, sizeof err.msg) || strchr(err.msg, '\n')) __builtin_trap();
    } else {
        uint64_t prev = RC_HEADER_BYTES + (uint64_t)n * RC_ENTRY_BYTES;
        for (uint32_t i = 0; i < n; i++) {
            if (e[i].offset < prev || e[i].bytes > size || e[i].offset > size - e[i].bytes) __builtin_trap();
            if (e[i].bytes != repack_bytes(e[i].type, (int)e[i].layout, e[i].n_in, e[i].n_out) || !e[i].name[0])
                __builtin_trap();
            prev = e[i].offset + e[i].bytes;
        }
    }
    free(e);
    free(b);
    return 0;
}
