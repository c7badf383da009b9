#include "cli.h"

int cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return 1;
}
