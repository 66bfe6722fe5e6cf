// common/backend/cuda/gather.cu: copies selected bf16 rows (the last row of each sequence in a generation step)
// into a compact matrix for the lm_head GEMM. Not here: scatter, other dtypes.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void gather_kernel(bf16 *dst, const bf16 *src, const int32_t *idx, int H) {
    int s = blockIdx.x;
    const bf16 *r = src + (long)idx[s] * H;
    for (int d = threadIdx.x; d < H; d += blockDim.x) dst[(long)s * H + d] = r[d];
}
extern "C" void cuda_gather_rows_bf16(uint16_t *dst, const uint16_t *src, const int32_t *idx, int S, int H,
                                      cudaStream_t st) {
    CUDA_REQUIRE(dst && src && idx && S > 0 && H > 0);
    gather_kernel<<<S, 256, 0, st>>>((bf16 *)dst, (const bf16 *)src, idx, H);
    CUDA_LAUNCH_CHECK();
}
