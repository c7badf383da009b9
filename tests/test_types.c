#include "test.h"

const test_case types_tests[] = {
    {0},
};
