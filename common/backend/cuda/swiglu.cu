// common/backend/cuda/swiglu.cu: SwiGLU (silu(gate) * up) on the fused gate|up GEMM output, and its backward
// (cpu_swiglu_backward's formula). Outputs are bf16: both feed GEMMs. Not here: other activations.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void swiglu_fwd_kernel(bf16 *h, const float *gu, int M, int I) {
    long n = (long)M * I;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        long m = t / I, i = t % I;
        float g = gu[m * 2 * I + i], u = gu[m * 2 * I + I + i];
        h[t] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
    }
}
static __global__ void swiglu_bwd_kernel(bf16 *dgu, const float *dh, const float *gu, int M, int I) {
    long n = (long)M * I;
    for (long t = blockIdx.x * (long)blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        long m = t / I, i = t % I;
        float g = gu[m * 2 * I + i], u = gu[m * 2 * I + I + i], s = 1.0f / (1.0f + expf(-g)), d = dh[t];
        dgu[m * 2 * I + i] = __float2bfloat16_rn(d * u * s * (1.0f + g * (1.0f - s)));
        dgu[m * 2 * I + I + i] = __float2bfloat16_rn(d * g * s);
    }
}
static int grid_for(long n) { long g = CEIL_DIV(n, 256L); return (int)(g > 65536 ? 65536 : g); }
extern "C" void cuda_swiglu_fwd(uint16_t *h, const float *gu, int M, int I, cudaStream_t st) {
    CUDA_REQUIRE(h && gu && M > 0 && I > 0);
    swiglu_fwd_kernel<<<grid_for((long)M * I), 256, 0, st>>>((bf16 *)h, gu, M, I);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_swiglu_bwd(uint16_t *dgu, const float *dh, const float *gu, int M, int I, cudaStream_t st) {
    CUDA_REQUIRE(dgu && dh && gu && M > 0 && I > 0);
    swiglu_bwd_kernel<<<grid_for((long)M * I), 256, 0, st>>>((bf16 *)dgu, dh, gu, M, I);
    CUDA_LAUNCH_CHECK();
}
