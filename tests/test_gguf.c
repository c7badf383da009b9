#include "test.h"

const test_case gguf_tests[] = {
    {0},
};
