// common/backend/cuda/cuda_common.cuh: what every .cu file of the backend shares (C++ side only): the fail-fast
// check macros (docs/conventions.md rule 3: file:line, the call, the CUDA / cuBLAS error text), launch-shape assertions,
// warp reductions and bf16 helpers. Not here: anything C11 code sees (cuda_ops.h).
#ifndef DAPO_CUDA_COMMON_CUH
#define DAPO_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

// core/err.h is C11 (_Noreturn); its die() is declared here with C linkage for the C++ side.
extern "C" [[noreturn]] void die(const char *file, int line, const char *fmt, ...);

#define CUDA_CHECK(x)                                                                                       \
    do {                                                                                                    \
        cudaError_t e_ = (x);                                                                               \
        if (e_ != cudaSuccess) die(__FILE__, __LINE__, "%s: %s", #x, cudaGetErrorString(e_));               \
    } while (0)
#define CUDA_REQUIRE(cond)                                                                                  \
    do {                                                                                                    \
        if (!(cond)) die(__FILE__, __LINE__, "%s: shape check failed: %s", __func__, #cond);                \
    } while (0)
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

typedef __nv_bfloat16 bf16;

static __device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Sum over a block of blockDim.x (a multiple of 32, <= 1024) threads; every thread gets the result.
// sh: 32 floats of shared memory (reused: a __syncthreads() guards it on entry).
static __device__ __forceinline__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(t);
}
static __device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ double block_sum_d(double v, double *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    return warp_sum_d(t);
}

#endif
