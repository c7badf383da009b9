#if defined(__aarch64__)
#include "kernels.h"
void kernels_neon_init(kernel_set *s) { (void)s; }
#endif
