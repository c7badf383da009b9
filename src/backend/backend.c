#include "backend/backend.h"

#include <string.h>

int backend_open(backend *b, const backend_ops *ops, const model *m, const backend_params *p, trit_err *err) {
    memset(b, 0, sizeof *b);
    b->ops = ops, b->m = m;
    if (!model_has_weights(m)) return 0; /* a vocabulary: nothing to prepare, no state to run */
    if (ops->prepare(b, p, err)) {
        memset(b, 0, sizeof *b);
        return -1;
    }
    return 0;
}

void backend_close(backend *b) {
    if (b->ops && b->impl) b->ops->release(b);
    memset(b, 0, sizeof *b);
}
