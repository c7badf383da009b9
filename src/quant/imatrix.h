/* imatrix: importance matrices in llama.cpp's GGUF imatrix layout, so files interoperate with
 * llama-imatrix and llama-quantize --imatrix: general.type = "imatrix", imatrix.datasets (string
 * array), imatrix.chunk_count and imatrix.chunk_size (u32), and per weight, in name order, the F32
 * tensors "<weight>.in_sum2" [n, 1] (Σ x² per input channel) and "<weight>.counts" [1, 1] (rows
 * seen). The Hessians GPTQ needs are not part of llama.cpp's format: trit adds them on request as
 * "<weight>.hessian" [n, n] F32 (Σ x xᵀ) after the pair, a file llama.cpp does not read; without
 * them a loaded imatrix gives importance-weighted fitting only (see calib_tensor). Expert-stacked
 * entries (more than one matrix per weight) are refused. */
#ifndef TRIT_IMATRIX_H
#define TRIT_IMATRIX_H

#include "quant/calib.h"

/* Writes d's Σx² and counts to path, and its Hessians when hessian != 0. 0, or -1 with err set. */
int imatrix_save(const calib_data *d, const char *path, int hessian, trit_err *err);
/* Reads path into *d (zeroed), Hessians included when present. 0, or -1 with err set naming the file. */
int imatrix_load(calib_data *d, const char *path, trit_err *err);

#endif
