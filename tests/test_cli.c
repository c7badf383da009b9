#include "test.h"

const test_case cli_tests[] = {
    {0},
};
