// common/backend/cuda/paged_attention.cu: the generation path's paged KV cache (bf16 blocks of BS positions,
// vLLM's PagedAttention layout without the K transpose): storing a step's k / v rows, and attention of
// each packed query row over its own sequence's cached keys 0 .. pos (prefill chunks and decode rows alike),
// one warp per (row, head) with the online softmax of attention.cu. Not here: block allocation
// (cuda_host.h CudaKvPager), prefix sharing, copy-on-write.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define WARPS 4
#define MAXC 8

static __global__ void kv_store_kernel(bf16 *kc, bf16 *vc, const float *qkv, int ld, int qd, const int32_t *pos,
                                       const int32_t *seq, const int32_t *tables, int max_blocks, int BS, int kvd) {
    int r = blockIdx.x, p = pos[r];
    int blk = tables[(long)seq[r] * max_blocks + p / BS];
    long o = ((long)blk * BS + p % BS) * kvd;
    for (int d = threadIdx.x; d < kvd; d += blockDim.x) {
        kc[o + d] = __float2bfloat16_rn(qkv[(long)r * ld + qd + d]);
        vc[o + d] = __float2bfloat16_rn(qkv[(long)r * ld + qd + kvd + d]);
    }
}

static __global__ void paged_attn_kernel(bf16 *out, const float *qkv, int ld, const int32_t *pos, const int32_t *seq,
                                         const int32_t *tables, int max_blocks, const bf16 *kc, const bf16 *vc, int R,
                                         int BS, int nh, int nkv, int hd, float scale) {
    __shared__ float qs[WARPS][256];
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (r >= R) return;
    int g = h / (nh / nkv), kvd = nkv * hd, P = pos[r];
    const int32_t *tab = tables + (long)seq[r] * max_blocks;
    for (int d = lane; d < hd; d += 32) qs[w][d] = qkv[(long)r * ld + h * hd + d] * scale;
    __syncwarp();
    float acc[MAXC];
    for (int c = 0; c < MAXC; c++) acc[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 <= P; j0 += 32) {
        int j = j0 + lane;
        float s = -INFINITY;
        if (j <= P) {
            const bf16 *k = kc + ((long)tab[j / BS] * BS + j % BS) * kvd + g * hd;
            s = 0.0f;
            for (int d = 0; d < hd; d++) s += qs[w][d] * __bfloat162float(k[d]);
        }
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn), p = j <= P ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        for (int c = 0; c < MAXC; c++) acc[c] *= corr;
        int nt = min(32, P - j0 + 1);
        for (int t = 0; t < nt; t++) {
            int jj = j0 + t;
            float pt = __shfl_sync(0xffffffffu, p, t);
            const bf16 *v = vc + ((long)tab[jj / BS] * BS + jj % BS) * kvd + g * hd;
            for (int c = 0; c < MAXC; c++) {
                int d = lane + 32 * c;
                if (d < hd) acc[c] += pt * __bfloat162float(v[d]);
            }
        }
        m = mn;
    }
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        if (d < hd) out[(long)r * nh * hd + h * hd + d] = __float2bfloat16_rn(acc[c] / l);
    }
}

extern "C" void cuda_kv_store(uint16_t *kc, uint16_t *vc, const float *qkv, int ld, int qd, const int32_t *pos,
                              const int32_t *seq, const int32_t *tables, int max_blocks, int R, int BS, int kvd,
                              cudaStream_t st) {
    CUDA_REQUIRE(kc && vc && qkv && pos && seq && tables && R > 0 && BS > 0 && kvd > 0 && max_blocks > 0 &&
                 ld >= qd + 2 * kvd);
    kv_store_kernel<<<R, 128, 0, st>>>((bf16 *)kc, (bf16 *)vc, qkv, ld, qd, pos, seq, tables, max_blocks, BS, kvd);
    CUDA_LAUNCH_CHECK();
}

extern "C" void cuda_paged_attention(uint16_t *out, const float *qkv, int ld, const int32_t *pos, const int32_t *seq,
                                     const int32_t *tables, int max_blocks, const uint16_t *kc, const uint16_t *vc,
                                     int R, int BS, int nh, int nkv, int hd, float scale, cudaStream_t st) {
    CUDA_REQUIRE(out && qkv && pos && seq && tables && kc && vc && R > 0 && BS > 0 && nkv > 0 && nh % nkv == 0 &&
                 hd > 0 && hd <= 256 && ld >= (nh + 2 * nkv) * hd);
    paged_attn_kernel<<<dim3(CEIL_DIV(R, WARPS), nh), 32 * WARPS, 0, st>>>(
        (bf16 *)out, qkv, ld, pos, seq, tables, max_blocks, (const bf16 *)kc, (const bf16 *)vc, R, BS, nh, nkv, hd, scale);
    CUDA_LAUNCH_CHECK();
}
