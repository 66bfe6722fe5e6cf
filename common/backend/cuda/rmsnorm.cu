// common/backend/cuda/rmsnorm.cu: RMSNorm forward (fp32 statistics, bf16 output for the next GEMM) and backward
// (cpu_rmsnorm_backward's formula; the weight gradient is summed per block of rows, then atomically added).
// Not here: the per-head q/k norm of Qwen3 (the CUDA model refuses qk_norm configs for now).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void rms_fwd_kernel(bf16 *y, float *rstd, const float *x, const float *w, int D, float eps) {
    __shared__ float sh[32];
    int m = blockIdx.x;
    const float *xr = x + (long)m * D;
    float ss = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) ss += xr[d] * xr[d];
    ss = block_sum(ss, sh);
    float r = rsqrtf(ss / (float)D + eps);
    if (threadIdx.x == 0 && rstd) rstd[m] = r;
    for (int d = threadIdx.x; d < D; d += blockDim.x) y[(long)m * D + d] = __float2bfloat16_rn(w[d] * (xr[d] * r));
}

#define RMS_BWD_ROWS 16
static __global__ void rms_bwd_kernel(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                      const float *rstd, int M, int D, int accum) {
    __shared__ float sh[32];
    extern __shared__ float dwacc[];   // [D]
    for (int d = threadIdx.x; d < D; d += blockDim.x) dwacc[d] = 0.0f;
    for (int m = blockIdx.x * RMS_BWD_ROWS; m < M && m < (blockIdx.x + 1) * RMS_BWD_ROWS; m++) {
        const float *xr = x + (long)m * D, *g = dy + (long)m * D;
        float r = rstd[m], dot = 0.0f;
        for (int d = threadIdx.x; d < D; d += blockDim.x) dot += w[d] * g[d] * xr[d];
        dot = block_sum(dot, sh);
        float c = r * r * r / (float)D * dot;
        for (int d = threadIdx.x; d < D; d += blockDim.x) {
            float v = r * (w[d] * g[d]) - xr[d] * c;
            long k = (long)m * D + d;
            dx[k] = accum ? dx[k] + v : v;
            dwacc[d] += g[d] * xr[d] * r;
        }
    }
    if (dw)
        for (int d = threadIdx.x; d < D; d += blockDim.x) atomicAdd(&dw[d], dwacc[d]);
}

extern "C" void cuda_rmsnorm_fwd(uint16_t *y, float *rstd, const float *x, const float *w, int M, int D, float eps,
                                 cudaStream_t st) {
    CUDA_REQUIRE(y && x && w && M > 0 && D > 0 && D <= 8192);
    rms_fwd_kernel<<<M, 256, 0, st>>>((bf16 *)y, rstd, x, w, D, eps);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                                 const float *rstd, int M, int D, int accum, cudaStream_t st) {
    CUDA_REQUIRE(dx && dy && x && w && rstd && M > 0 && D > 0 && D <= 8192 && dx != dy);
    rms_bwd_kernel<<<CEIL_DIV(M, RMS_BWD_ROWS), 256, D * sizeof(float), st>>>(dx, dw, dy, x, w, rstd, M, D, accum);
    CUDA_LAUNCH_CHECK();
}
