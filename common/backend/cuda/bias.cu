// common/backend/cuda/bias.cu: bias add after a GEMM (nn.Linear's + b) and the bias gradient (column sums of dy,
// accumulated). Not here: fused GEMM epilogues.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void bias_add_kernel(float *y, const float *b, int M, int N) {
    long n = (long)M * N;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] += b[i % N];
}
// one thread per column, looping over rows (coalesced across the warp)
static __global__ void bias_grad_kernel(float *db, const float *dy, int M, int N) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= N) return;
    float s = 0.0f;
    for (int m = 0; m < M; m++) s += dy[(long)m * N + c];
    db[c] += s;
}
extern "C" void cuda_bias_add(float *y, const float *b, int M, int N, cudaStream_t st) {
    CUDA_REQUIRE(y && b && M > 0 && N > 0);
    long g = CEIL_DIV((long)M * N, 256L);
    bias_add_kernel<<<(int)(g > 65536 ? 65536 : g), 256, 0, st>>>(y, b, M, N);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_bias_grad(float *db, const float *dy, int M, int N, cudaStream_t st) {
    CUDA_REQUIRE(db && dy && M > 0 && N > 0);
    bias_grad_kernel<<<CEIL_DIV(N, 128), 128, 0, st>>>(db, dy, M, N);
    CUDA_LAUNCH_CHECK();
}
