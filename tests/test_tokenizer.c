#include "test.h"

const test_case tokenizer_tests[] = {
    {0},
};
