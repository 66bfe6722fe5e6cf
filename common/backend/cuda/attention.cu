// common/backend/cuda/attention.cu: causal GQA attention over packed variable-length sequences, forward and
// backward, memory-efficient: one warp per (row, head), keys walked in tiles of 32 with the online-softmax
// recurrence (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022), so no T x T matrix exists anywhere.
// Backward (FlashAttention-2, Dao 2023, algorithm 2) recomputes p from the saved log-sum-exp, in two passes
// without atomics: dq per query row over its keys, dk / dv per key row over its queries (all heads of the
// kv group). Correctness first: lanes read K / V rows from global memory (L1/L2 cached), no tensor cores.
// Not here: sliding windows, dropout, alibi, the paged decode path (paged_attention.cu).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define WARPS 4
#define MAXC 8   // hd <= 256: 8 dims per lane

static __device__ __forceinline__ float dot_row(const float *a, const float *b, int hd) {
    float s = 0.0f;
    for (int d = 0; d < hd; d++) s += a[d] * b[d];
    return s;
}

static __global__ void attn_fwd_kernel(bf16 *out, float *lse, const float *qkv, int ld, const int32_t *start, int N,
                                       int nh, int nkv, int hd, float scale) {
    __shared__ float qs[WARPS][256];
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (i >= N) return;
    int g = h / (nh / nkv), qd = nh * hd, kvd = nkv * hd;
    for (int d = lane; d < hd; d += 32) qs[w][d] = qkv[(long)i * ld + h * hd + d] * scale;
    __syncwarp();
    float acc[MAXC];
    for (int c = 0; c < MAXC; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = start[i]; j0 <= i; j0 += 32) {
        int j = j0 + lane;
        float s = -INFINITY;
        if (j <= i) s = dot_row(qs[w], qkv + (long)j * ld + qd + g * hd, hd);
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn), p = j <= i ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        for (int c = 0; c < MAXC; c++) acc[c] *= corr;
        int nt = min(32, i - j0 + 1);
        for (int t = 0; t < nt; t++) {
            float pt = __shfl_sync(0xffffffffu, p, t);
            const float *v = qkv + (long)(j0 + t) * ld + qd + kvd + g * hd;
            for (int c = 0; c < MAXC; c++) {
                int d = lane + 32 * c;
                if (d < hd) acc[c] += pt * v[d];
            }
        }
        m = mn;
    }
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        if (d < hd) out[(long)i * qd + h * hd + d] = __float2bfloat16_rn(acc[c] / l);
    }
    if (lane == 0) lse[(long)i * nh + h] = m + logf(l);
}

// dsum[i, h] = sum_d dout[i, h, d] * out[i, h, d]
static __global__ void attn_dsum_kernel(float *dsum, const float *dout, const bf16 *out, int N, int nh, int hd) {
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (i >= N) return;
    long o = (long)i * nh * hd + h * hd;
    float s = 0.0f;
    for (int d = lane; d < hd; d += 32) s += dout[o + d] * __bfloat162float(out[o + d]);
    s = warp_sum(s);
    if (lane == 0) dsum[(long)i * nh + h] = s;
}

static __global__ void attn_dq_kernel(float *dqkv, const float *dout, const float *qkv, int ld, const float *lse,
                                      const float *dsum, const int32_t *start, int N, int nh, int nkv, int hd,
                                      float scale) {
    __shared__ float qs[WARPS][256], gs[WARPS][256];
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (i >= N) return;
    int g = h / (nh / nkv), qd = nh * hd, kvd = nkv * hd, ldd = qd + 2 * kvd;
    for (int d = lane; d < hd; d += 32) {
        qs[w][d] = qkv[(long)i * ld + h * hd + d] * scale;
        gs[w][d] = dout[(long)i * qd + h * hd + d];
    }
    __syncwarp();
    float L = lse[(long)i * nh + h], Di = dsum[(long)i * nh + h];
    float acc[MAXC];
    for (int c = 0; c < MAXC; c++) acc[c] = 0.0f;
    for (int j0 = start[i]; j0 <= i; j0 += 32) {
        int j = j0 + lane;
        float ds = 0.0f;
        if (j <= i) {
            const float *k = qkv + (long)j * ld + qd + g * hd, *v = k + kvd;
            float p = expf(dot_row(qs[w], k, hd) - L);
            ds = p * (dot_row(gs[w], v, hd) - Di);
        }
        int nt = min(32, i - j0 + 1);
        for (int t = 0; t < nt; t++) {
            float dt = __shfl_sync(0xffffffffu, ds, t);
            const float *k = qkv + (long)(j0 + t) * ld + qd + g * hd;
            for (int c = 0; c < MAXC; c++) {
                int d = lane + 32 * c;
                if (d < hd) acc[c] += dt * k[d];
            }
        }
    }
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        if (d < hd) dqkv[(long)i * ldd + h * hd + d] = acc[c] * scale;
    }
}

static __global__ void attn_dkv_kernel(float *dqkv, const float *dout, const float *qkv, int ld, const float *lse,
                                       const float *dsum, const int32_t *end, int N, int nh, int nkv, int hd,
                                       float scale) {
    __shared__ float ks[WARPS][256], vs[WARPS][256];
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int j = blockIdx.x * WARPS + w, g = blockIdx.y;
    if (j >= N) return;
    int rep = nh / nkv, qd = nh * hd, kvd = nkv * hd, ldd = qd + 2 * kvd, e = end[j];
    for (int d = lane; d < hd; d += 32) {
        ks[w][d] = qkv[(long)j * ld + qd + g * hd + d];
        vs[w][d] = qkv[(long)j * ld + qd + kvd + g * hd + d];
    }
    __syncwarp();
    float dk[MAXC], dv[MAXC];
    for (int c = 0; c < MAXC; c++) dk[c] = dv[c] = 0.0f;
    for (int h = g * rep; h < (g + 1) * rep; h++)
        for (int i0 = j; i0 < e; i0 += 32) {
            int i = i0 + lane;
            float p = 0.0f, ds = 0.0f;
            if (i < e) {
                const float *q = qkv + (long)i * ld + h * hd, *go = dout + (long)i * qd + h * hd;
                p = expf(dot_row(q, ks[w], hd) * scale - lse[(long)i * nh + h]);
                ds = p * (dot_row(go, vs[w], hd) - dsum[(long)i * nh + h]);
            }
            int nt = min(32, e - i0);
            for (int t = 0; t < nt; t++) {
                float pt = __shfl_sync(0xffffffffu, p, t), dt = __shfl_sync(0xffffffffu, ds, t);
                const float *q = qkv + (long)(i0 + t) * ld + h * hd, *go = dout + (long)(i0 + t) * qd + h * hd;
                for (int c = 0; c < MAXC; c++) {
                    int d = lane + 32 * c;
                    if (d < hd) { dv[c] += pt * go[d]; dk[c] += dt * q[d]; }
                }
            }
        }
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        if (d < hd) {
            dqkv[(long)j * ldd + qd + g * hd + d] = dk[c] * scale;
            dqkv[(long)j * ldd + qd + kvd + g * hd + d] = dv[c];
        }
    }
}

extern "C" void cuda_attention_fwd(uint16_t *out, float *lse, const float *qkv, int ld, const int32_t *start, int N,
                                   int nh, int nkv, int hd, float scale, cudaStream_t st) {
    CUDA_REQUIRE(out && lse && qkv && start && N > 0 && nkv > 0 && nh % nkv == 0 && hd > 0 && hd <= 256 &&
                 ld >= (nh + 2 * nkv) * hd);
    attn_fwd_kernel<<<dim3(CEIL_DIV(N, WARPS), nh), 32 * WARPS, 0, st>>>((bf16 *)out, lse, qkv, ld, start, N, nh, nkv,
                                                                          hd, scale);
    CUDA_LAUNCH_CHECK();
}

extern "C" void cuda_attention_bwd(float *dqkv, float *dsum, const float *dout, const float *qkv, int ld,
                                   const uint16_t *out, const float *lse, const int32_t *start, const int32_t *end,
                                   int N, int nh, int nkv, int hd, float scale, cudaStream_t st) {
    CUDA_REQUIRE(dqkv && dsum && dout && qkv && out && lse && start && end && N > 0 && nkv > 0 && nh % nkv == 0 &&
                 hd > 0 && hd <= 256 && ld >= (nh + 2 * nkv) * hd);
    attn_dsum_kernel<<<dim3(CEIL_DIV(N, WARPS), nh), 32 * WARPS, 0, st>>>(dsum, dout, (const bf16 *)out, N, nh, hd);
    CUDA_LAUNCH_CHECK();
    attn_dq_kernel<<<dim3(CEIL_DIV(N, WARPS), nh), 32 * WARPS, 0, st>>>(dqkv, dout, qkv, ld, lse, dsum, start, N, nh,
                                                                         nkv, hd, scale);
    CUDA_LAUNCH_CHECK();
    attn_dkv_kernel<<<dim3(CEIL_DIV(N, WARPS), nkv), 32 * WARPS, 0, st>>>(dqkv, dout, qkv, ld, lse, dsum, end, N, nh,
                                                                           nkv, hd, scale);
    CUDA_LAUNCH_CHECK();
}
