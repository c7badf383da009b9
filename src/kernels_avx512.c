/* kernels_avx512: placeholder until the AVX-512 kernels land. */
#if defined(__x86_64__)
#include "kernels.h"
void kernels_avx512_init(kernel_set *s) { (void)s; }
#endif
