#include "test.h"

const test_case model_tests[] = {
    {0},
};
