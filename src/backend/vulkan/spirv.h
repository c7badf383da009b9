/* spirv: the compute shaders (the .comp files in shaders/), compiled by glslc at build time and embedded as
 * the table the Makefile generates (build/.../spirv_table.c). */
#ifndef TRIT_SPIRV_H
#define TRIT_SPIRV_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name; /* the file's name and its variant: "matmul_Q8_0" */
    const uint32_t *code;
    size_t bytes;
} vk_spirv;

extern const vk_spirv vk_spirv_table[];
extern const int vk_spirv_count;

#endif
