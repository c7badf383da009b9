#include "test.h"

const test_case sampler_tests[] = {
    {0},
};
