// common/backend/cuda/norm.cu: the global gradient L2 norm's sum of squares (fp32 per thread, fp64 across threads
// and blocks, as model_grad_norm's double accumulation) and the in-place scale of gradient clipping
// (torch.nn.utils.clip_grad_norm_). Not here: the norm across ranks (the all-reduce happens before).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define NORM_BLOCKS 1024

static __global__ void sumsq_partial_kernel(double *part, const float *x, long n) {
    __shared__ double sh[32];
    double s = 0.0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += (double)x[i] * x[i];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}
static __global__ void __launch_bounds__(1024) sumsq_final_kernel(double *out, const double *part, int nb) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) s += part[i];
    s = block_sum_d(s, sh);
    if (threadIdx.x == 0) *out = s;
}
static __global__ void scale_kernel(float *x, float s, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) x[i] *= s;
}

extern "C" void cuda_sumsq(double *out, double *partial, const float *x, long n, cudaStream_t st) {
    CUDA_REQUIRE(out && partial && x && n > 0);
    sumsq_partial_kernel<<<NORM_BLOCKS, 256, 0, st>>>(partial, x, n);
    CUDA_LAUNCH_CHECK();
    sumsq_final_kernel<<<1, 1024, 0, st>>>(out, partial, NORM_BLOCKS);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_scale(float *x, float s, long n, cudaStream_t st) {
    CUDA_REQUIRE(x && n > 0);
    long b = CEIL_DIV(n, 256L);
    scale_kernel<<<(int)(b > 65536 ? 65536 : b), 256, 0, st>>>(x, s, n);
    CUDA_LAUNCH_CHECK();
}
