/* common/core/dtype.h: the 16-bit float formats every layer reads and writes (safetensors files, the weight-chunk
 * protocol, the CUDA backend's bf16 copies), converted in one place so every path treats rounding and NaN alike.
 *   bf16: round to nearest, ties to even, as torch's Tensor.to(torch.bfloat16) and __float2bfloat16_rn; NaN -> the
 *         quiet NaN 0x7fc0 with the sign kept; +-inf and values that round past the largest bf16 -> +-inf.
 *   f16 (IEEE binary16) -> fp32: exact, subnormals included.
 * Checked against torch's bits by tests/unit/test_cuda_host.c (tests/data/cuda/bf16_v1.bin).
 * Not here: dtype tags of files (io/safetensors.h StDtype). */
#ifndef DAPO_DTYPE_H
#define DAPO_DTYPE_H

#include <stdint.h>

uint16_t dtype_bf16_from_f32(float x);
float    dtype_bf16_to_f32(uint16_t h);      /* exact */
float    dtype_f16_to_f32(uint16_t h);       /* exact */
/* arrays of n elements; dst and src may not overlap */
void     dtype_bf16_from_f32_n(uint16_t *dst, const float *src, long n);
void     dtype_bf16_to_f32_n(float *dst, const uint16_t *src, long n);

#endif
