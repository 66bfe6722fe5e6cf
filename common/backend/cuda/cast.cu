// common/backend/cuda/cast.cu: fp32 <-> bf16 conversion of whole arrays (round to nearest even, as
// dtype_bf16_from_f32 on the host). Not here: fused casts inside other kernels.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void f32_bf16_kernel(bf16 *d, const float *s, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        d[i] = __float2bfloat16_rn(s[i]);
}
static __global__ void bf16_f32_kernel(float *d, const bf16 *s, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        d[i] = __bfloat162float(s[i]);
}
static int grid_for(long n) { long g = CEIL_DIV(n, 256L); return (int)(g > 65536 ? 65536 : g < 1 ? 1 : g); }

extern "C" void cuda_cast_f32_bf16(uint16_t *dst, const float *src, long n, cudaStream_t st) {
    CUDA_REQUIRE(dst && src && n >= 0);
    if (!n) return;
    f32_bf16_kernel<<<grid_for(n), 256, 0, st>>>((bf16 *)dst, src, n);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_cast_bf16_f32(float *dst, const uint16_t *src, long n, cudaStream_t st) {
    CUDA_REQUIRE(dst && src && n >= 0);
    if (!n) return;
    bf16_f32_kernel<<<grid_for(n), 256, 0, st>>>(dst, (const bf16 *)src, n);
    CUDA_LAUNCH_CHECK();
}
