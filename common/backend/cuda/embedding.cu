// common/backend/cuda/embedding.cu: token embedding lookup (nn.Embedding) and its backward (scatter-add).
// Not here: token range checks (the host validates the batch before upload).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void emb_fwd_kernel(float *x, const int32_t *tok, const bf16 *emb, int H) {
    int i = blockIdx.x;
    const bf16 *r = emb + (long)tok[i] * H;
    for (int d = threadIdx.x; d < H; d += blockDim.x) x[(long)i * H + d] = __bfloat162float(r[d]);
}
static __global__ void emb_bwd_kernel(float *demb, const int32_t *tok, const float *dx, int H) {
    int i = blockIdx.x;
    float *r = demb + (long)tok[i] * H;
    for (int d = threadIdx.x; d < H; d += blockDim.x) atomicAdd(&r[d], dx[(long)i * H + d]);
}
extern "C" void cuda_embedding_fwd(float *x, const int32_t *tok, const uint16_t *emb, int N, int H, cudaStream_t st) {
    CUDA_REQUIRE(x && tok && emb && N > 0 && H > 0);
    emb_fwd_kernel<<<N, 256, 0, st>>>(x, tok, (const bf16 *)emb, H);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_embedding_bwd(float *demb, const int32_t *tok, const float *dx, int N, int H, cudaStream_t st) {
    CUDA_REQUIRE(demb && tok && dx && N > 0 && H > 0);
    emb_bwd_kernel<<<N, 256, 0, st>>>(demb, tok, dx, H);
    CUDA_LAUNCH_CHECK();
}
