#include "test.h"

const test_case util_tests[] = {
    {0},
};
