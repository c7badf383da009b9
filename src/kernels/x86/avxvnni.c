/* kernels_avxvnni: the AVX2 set for CPUs with AVX-VNNI (Alder Lake and later, also without
 * AVX-512): avx2.c compiled again with the AVX-VNNI flag (Makefile), its repacked kernel
 * summing byte products with VEX vpdpbusd. kernels.c calls kernels_avxvnni_init only on CPUs
 * that have it. */
#define PK_VNNI 1
#include "kernels/x86/avx2.c"
