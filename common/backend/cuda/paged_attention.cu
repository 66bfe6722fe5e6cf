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

static __device__ __forceinline__ void row_load_bf16(float *r, const bf16 *row, int hd, int lane) {
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        r[c] = d < hd ? __bfloat162float(row[d]) : 0.0f;
    }
}

// One warp per (row, head); lanes split the head dimension (coalesced loads), keys in tiles of 32.
static __global__ void paged_attn_kernel(bf16 *out, const float *qkv, int ld, const int32_t *pos, const int32_t *seq,
                                         const int32_t *tables, int max_blocks, const bf16 *kc, const bf16 *vc, int R,
                                         int BS, int nh, int nkv, int hd, float scale) {
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r = blockIdx.x * WARPS + w, h = blockIdx.y;
    if (r >= R) return;
    int g = h / (nh / nkv), kvd = nkv * hd, P = pos[r];
    const int32_t *tab = tables + (long)seq[r] * max_blocks;
    float q[MAXC], kv[MAXC], acc[MAXC];
    for (int c = 0; c < MAXC; c++) {
        int d = lane + 32 * c;
        q[c] = d < hd ? qkv[(long)r * ld + h * hd + d] * scale : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 <= P; j0 += 32) {
        int nt = min(32, P - j0 + 1);
        float s = -INFINITY;
        for (int t = 0; t < nt; t++) {
            int j = j0 + t;
            row_load_bf16(kv, kc + ((long)tab[j / BS] * BS + j % BS) * kvd + g * hd, hd, lane);
            float a = 0.0f;
            for (int c = 0; c < MAXC; c++) a += q[c] * kv[c];
            a = warp_sum(a);
            if (lane == t) s = a;
        }
        float mn = fmaxf(m, warp_max(s));
        float corr = expf(m - mn), p = lane < nt ? expf(s - mn) : 0.0f;
        l = l * corr + warp_sum(p);
        for (int c = 0; c < MAXC; c++) acc[c] *= corr;
        for (int t = 0; t < nt; t++) {
            int j = j0 + t;
            float pt = __shfl_sync(0xffffffffu, p, t);
            row_load_bf16(kv, vc + ((long)tab[j / BS] * BS + j % BS) * kvd + g * hd, hd, lane);
            for (int c = 0; c < MAXC; c++) acc[c] += pt * kv[c];
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
