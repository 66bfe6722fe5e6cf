// common/backend/cuda/logprob.cu: the fused lm_head log-prob + entropy with temperature, one vocabulary chunk at a
// time: per-row online statistics (max, sum exp, sum exp * z, target z) are folded chunk by chunk (online softmax,
// Milakov & Gimelshein 2018), so the [tokens, V] fp32 logits never exist; backward recomputes a chunk's logits
// (the caller's GEMM) and turns them into the chunk's bf16 gradient. Formulas: cpu_logprob_entropy(_backward),
// verl logprobs_from_logits / entropy_from_logits. Not here: the GEMMs (gemm.cu), chunk sizes (cuda_lm_plan).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void stats_init_kernel(float *st, int M) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M) return;
    st[i] = -INFINITY;
    st[M + i] = 0.0f;
    st[2 * M + i] = 0.0f;
    st[3 * M + i] = 0.0f;
}

// one block per row: chunk max, then sums relative to the merged max
static __global__ void stats_update_kernel(float *st, const float *logits, int ld, const int32_t *target, int M,
                                           int Vc, int v0, float invT) {
    __shared__ float sh[32];
    int m = blockIdx.x;
    const float *r = logits + (long)m * ld;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < Vc; v += blockDim.x) mx = fmaxf(mx, r[v] * invT);
    mx = warp_max(mx);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : -INFINITY;
    mx = warp_max(mx);
    float M0 = st[m], Mn = fmaxf(M0, mx);
    float se = 0.0f, sz = 0.0f;
    for (int v = threadIdx.x; v < Vc; v += blockDim.x) {
        float z = r[v] * invT, e = expf(z - Mn);
        se += e;
        sz += e * z;
    }
    se = block_sum(se, sh);
    sz = block_sum(sz, sh);
    if (threadIdx.x == 0) {
        float c = M0 == -INFINITY ? 0.0f : expf(M0 - Mn);
        st[m] = Mn;
        st[M + m] = st[M + m] * c + se;
        st[2 * M + m] = st[2 * M + m] * c + sz;
        int t = target ? target[m] : -1;
        if (t >= v0 && t < v0 + Vc) st[3 * M + m] = r[t - v0] * invT;
    }
}

static __global__ void stats_finish_kernel(float *logp, float *ent, const float *st, const int32_t *target, int M) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float lse = st[m] + logf(st[M + m]);
    if (logp) logp[m] = (target && target[m] >= 0) ? st[3 * M + m] - lse : 0.0f;
    if (ent) ent[m] = lse - st[2 * M + m] / st[M + m];
}

static __global__ void lm_grad_kernel(bf16 *dl, const float *logits, int ld, const float *st, const int32_t *target,
                                      const float *dlogp, const float *dent, int M, int Vc, int v0, float invT) {
    int m = blockIdx.x;
    float lse = st[m] + logf(st[M + m]), ez = st[2 * M + m] / st[M + m];
    float a = dlogp ? dlogp[m] : 0.0f, b = dent ? dent[m] : 0.0f;
    int t = target ? target[m] : -1;
    if (t < 0) a = 0.0f;
    for (int v = threadIdx.x; v < Vc; v += blockDim.x) {
        float z = logits[(long)m * ld + v] * invT, p = expf(z - lse);
        float g = a * ((v0 + v == t ? 1.0f : 0.0f) - p) - b * p * (z - ez);
        dl[(long)m * Vc + v] = __float2bfloat16_rn(g * invT);
    }
}

extern "C" void cuda_lm_stats_init(float *stats, int M, cudaStream_t st) {
    CUDA_REQUIRE(stats && M > 0);
    stats_init_kernel<<<CEIL_DIV(M, 256), 256, 0, st>>>(stats, M);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_lm_stats_update(float *stats, const float *logits, int ld, const int32_t *target, int M, int Vc,
                                     int v0, float temperature, cudaStream_t st) {
    CUDA_REQUIRE(stats && logits && M > 0 && Vc > 0 && ld >= Vc && v0 >= 0 && temperature > 0);
    stats_update_kernel<<<M, 256, 0, st>>>(stats, logits, ld, target, M, Vc, v0, 1.0f / temperature);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_lm_stats_finish(float *logp, float *ent, const float *stats, const int32_t *target, int M,
                                     cudaStream_t st) {
    CUDA_REQUIRE(stats && M > 0);
    stats_finish_kernel<<<CEIL_DIV(M, 256), 256, 0, st>>>(logp, ent, stats, target, M);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_lm_grad(uint16_t *dlogits, const float *logits, int ld, const float *stats, const int32_t *target,
                             const float *dlogp, const float *dent, int M, int Vc, int v0, float temperature,
                             cudaStream_t st) {
    CUDA_REQUIRE(dlogits && logits && stats && M > 0 && Vc > 0 && ld >= Vc && temperature > 0);
    lm_grad_kernel<<<M, 256, 0, st>>>((bf16 *)dlogits, logits, ld, stats, target, dlogp, dent, M, Vc, v0,
                                      1.0f / temperature);
    CUDA_LAUNCH_CHECK();
}
