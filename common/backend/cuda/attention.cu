// common/backend/cuda/attention.cu: causal GQA attention over packed variable-length sequences, forward and
// backward, memory-efficient: one warp per (row, head), keys walked in tiles of 32 with the online-softmax
// recurrence (Milakov & Gimelshein 2018; FlashAttention, Dao et al. 2022), so no T x T matrix exists anywhere.
// Backward (FlashAttention-2, Dao 2023, algorithm 2) recomputes p from the saved log-sum-exp, in two passes
// without atomics: dq per query row over its keys, dk / dv per key row over its queries (all heads of the
// kv group). Correctness first: lanes split the head dimension (coalesced row loads, dot products as warp
// reductions), fp32, no tensor cores.
// Not here: sliding windows, dropout, alibi, the paged decode path (paged_attention.cu).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define WARPS 4
#define MAXC 8   // hd <= 256: 8 dims per lane

// Rows are read with the warp's lanes across the head dimension (lane owns dims lane, lane + 32, ...), so
// every global load of a K / V / Q / dO row is coalesced; a dot product is a warp reduction.
static __device__ __forceinline__ void row_load(float *r, const float *row, int hd, int lane) {
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        r[c] = d < hd ? row[d] : 0.0f;
    }
}
static __device__ __forceinline__ float row_dot(const float *a, const float *b) {
    float s = 0.0f;
    for (int c = 0; c < MAXC; c++) s += a[c] * b[c];
    return warp_sum(s);
}

static __global__ void attn_fwd_kernel(bf16 *out, float *lse, const float *qkv, int ld, const int32_t *start, int N,
                                       int nh, int nkv, int hd, float scale) {
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (i >= N) return;
    int g = h / (nh / nkv), qd = nh * hd, kvd = nkv * hd;
    float q[MAXC], kv[MAXC], acc[MAXC];
    row_load(q, qkv + (long)i * ld + h * hd, hd, lane);
    for (int c = 0; c < MAXC; c++) { q[c] *= scale; acc[c] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    for (int j0 = start[i]; j0 <= i; j0 += 32) {
        int nt = min(32, i - j0 + 1);
        float s = -INFINITY;   // lane t holds the score of key j0 + t
        for (int t = 0; t < nt; t++) {
            row_load(kv, qkv + (long)(j0 + t) * ld + qd + g * hd, hd, lane);
            float st = row_dot(q, kv);
            if (lane == t) s = st;
        }
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn), p = lane < nt ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        for (int c = 0; c < MAXC; c++) acc[c] *= corr;
        for (int t = 0; t < nt; t++) {
            float pt = __shfl_sync(0xffffffffu, p, t);
            row_load(kv, qkv + (long)(j0 + t) * ld + qd + kvd + g * hd, hd, lane);
            for (int c = 0; c < MAXC; c++) acc[c] += pt * kv[c];
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

// dq_i = scale * sum_j p_ij (dp_ij - D_i) k_j over the keys j in [start_i, i]
static __global__ void attn_dq_kernel(float *dqkv, const float *dout, const float *qkv, int ld, const float *lse,
                                      const float *dsum, const int32_t *start, int N, int nh, int nkv, int hd,
                                      float scale) {
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int i = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (i >= N) return;
    int g = h / (nh / nkv), qd = nh * hd, kvd = nkv * hd, ldd = qd + 2 * kvd;
    float q[MAXC], go[MAXC], k[MAXC], v[MAXC], acc[MAXC];
    row_load(q, qkv + (long)i * ld + h * hd, hd, lane);
    row_load(go, dout + (long)i * qd + h * hd, hd, lane);
    for (int c = 0; c < MAXC; c++) { q[c] *= scale; acc[c] = 0.0f; }
    float L = lse[(long)i * nh + h], Di = dsum[(long)i * nh + h];
    for (int j = start[i]; j <= i; j++) {
        row_load(k, qkv + (long)j * ld + qd + g * hd, hd, lane);
        row_load(v, qkv + (long)j * ld + qd + kvd + g * hd, hd, lane);
        float p = expf(row_dot(q, k) - L);
        float ds = p * (row_dot(go, v) - Di);
        for (int c = 0; c < MAXC; c++) acc[c] += ds * k[c];
    }
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        if (d < hd) dqkv[(long)i * ldd + h * hd + d] = acc[c] * scale;
    }
}

// dk_j = scale * sum_{h in group, i in [j, end_j)} ds_ij q_i;  dv_j = sum p_ij dout_i
static __global__ void attn_dkv_kernel(float *dqkv, const float *dout, const float *qkv, int ld, const float *lse,
                                       const float *dsum, const int32_t *end, int N, int nh, int nkv, int hd,
                                       float scale) {
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int j = blockIdx.x * WARPS + w, g = blockIdx.y;
    if (j >= N) return;
    int rep = nh / nkv, qd = nh * hd, kvd = nkv * hd, ldd = qd + 2 * kvd, e = end[j];
    float k[MAXC], v[MAXC], q[MAXC], go[MAXC], dk[MAXC], dv[MAXC];
    row_load(k, qkv + (long)j * ld + qd + g * hd, hd, lane);
    row_load(v, qkv + (long)j * ld + qd + kvd + g * hd, hd, lane);
    for (int c = 0; c < MAXC; c++) dk[c] = dv[c] = 0.0f;
    for (int h = g * rep; h < (g + 1) * rep; h++)
        for (int i = j; i < e; i++) {
            row_load(q, qkv + (long)i * ld + h * hd, hd, lane);
            row_load(go, dout + (long)i * qd + h * hd, hd, lane);
            float p = expf(row_dot(q, k) * scale - lse[(long)i * nh + h]);
            float ds = p * (row_dot(go, v) - dsum[(long)i * nh + h]);
            for (int c = 0; c < MAXC; c++) { dv[c] += p * go[c]; dk[c] += ds * q[c]; }
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
