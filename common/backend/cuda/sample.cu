// common/backend/cuda/sample.cu: on-device token sampling, one block per row of logits, with model/sample.h's
// semantics: z = logits / temperature; top-k (ties: lower id first); top-p over what top-k kept (smallest
// descending prefix with cumulative probability >= top_p, ties by id); the draw u = rng_uniform(seed, group,
// sample, pos) from the same Philox4x32-10 and counter mapping as core/rng.c; untruncated the inverse CDF runs in
// id order, truncated in descending order (as the CPU sampler); greedy = argmax of the raw logits, first index.
// Log-prob returned: log_softmax(z)[token] over the full vocabulary (temperature 1 for greedy with T <= 0).
// Instead of sorting, thresholds are found by bisection over the order-preserving integer image of fp32 z
// (32 block reductions each). Sums are fp64 across threads, so near-boundary draws may differ from the CPU's
// fp32 block sums in rare cases (gpu_check reports the agreement rate). Not here: penalties, min-p, logit bias.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define SBLOCK 1024

static __device__ void philox10(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
        c[1] = (uint32_t)p1;
        c[3] = (uint32_t)p0;
        c[0] = n0;
        c[2] = n2;
    }
}
static __device__ double rng_uniform_dev(uint64_t seed, uint64_t group, uint32_t sample, uint32_t pos) {
    uint32_t c[4] = { pos, sample, (uint32_t)group, (uint32_t)(group >> 32) };
    philox10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    return ((double)(c[0] >> 5) * 67108864.0 + (double)(c[1] >> 6)) * 0x1p-53;
}

static __device__ __forceinline__ uint32_t fkey(float f) {
    uint32_t u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

typedef struct {
    double d[32];
    double pre[SBLOCK];
    int    cnt[SBLOCK];
    int    id;
} SampleShared;

// Block sums: count of key >= t (ge) / key > t (gt); mass of the same.
static __device__ double mass_cmp(const uint32_t *key, const float *w, int lo, int hi, uint32_t t, int strict,
                                  int count, SampleShared *sh) {
    double s = 0.0;
    for (int v = lo; v < hi; v++) {
        int in = strict ? key[v] > t : key[v] >= t;
        if (in) s += count ? 1.0 : (double)w[v];
    }
    return block_sum_d(s, sh->d);
}
// Largest t with f(t) = mass/count(key >= t) >= target (strict: > target); f(0) must satisfy it.
static __device__ uint32_t bisect(const uint32_t *key, const float *w, int lo, int hi, double target, int count,
                                  int strict_cmp, SampleShared *sh) {
    uint64_t a = 0, b = 0xffffffffu;
    while (a < b) {
        uint64_t mid = a + (b - a + 1) / 2;
        double f = mass_cmp(key, w, lo, hi, (uint32_t)mid, 0, count, sh);
        if (strict_cmp ? f > target : f >= target) a = mid;
        else b = mid - 1;
    }
    return (uint32_t)a;
}
// The id of the n-th (0-based) element with key == t in id order (n clamped to the last one).
static __device__ int nth_equal(const uint32_t *key, int lo, int hi, uint32_t t, long n, SampleShared *sh) {
    int c = 0;
    for (int v = lo; v < hi; v++) c += key[v] == t;
    __syncthreads();
    sh->cnt[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        long tot = 0;
        for (int i = 0; i < (int)blockDim.x; i++) { int x = sh->cnt[i]; sh->cnt[i] = (int)tot; tot += x; }
        sh->id = -1;
        sh->pre[0] = (double)tot;
    }
    __syncthreads();
    long tot = (long)sh->pre[0];
    if (n >= tot) n = tot - 1;
    if (n < 0) n = 0;
    long k = sh->cnt[threadIdx.x];
    if (n >= k && n < k + c)
        for (int v = lo; v < hi; v++)
            if (key[v] == t && k++ == n) { sh->id = v; break; }
    __syncthreads();
    return sh->id;
}

static __global__ void __launch_bounds__(SBLOCK) sample_kernel(int32_t *tok, float *logp, const float *logits, int ld, int V,
                                     CudaSampleParams P, uint64_t seed, const uint64_t *group, const uint32_t *sample,
                                     const uint32_t *pos, void *scratch) {
    __shared__ SampleShared sh;
    __shared__ float bv[32];
    __shared__ int bi[32];
    int s = blockIdx.x;
    const float *x = logits + (long)s * ld;
    float *w = (float *)scratch + (long)s * 2 * V;
    uint32_t *key = (uint32_t *)(w + V);
    int chunk = CEIL_DIV(V, (int)blockDim.x), lo = min(V, (int)threadIdx.x * chunk), hi = min(V, lo + chunk);
    // raw argmax (first index), validity
    float best = -INFINITY;
    int bid = -1, bad = 0;
    for (int v = lo; v < hi; v++) {
        float f = x[v];
        if (isnan(f) || f == INFINITY) bad = 1;
        if (f > best) { best = f; bid = v; }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bid, o);
        if (ob > best || (ob == best && oi >= 0 && (bid < 0 || oi < bid))) { best = ob; bid = oi; }
    }
    if ((threadIdx.x & 31) == 0) { bv[threadIdx.x >> 5] = best; bi[threadIdx.x >> 5] = bid; }
    bad = __syncthreads_or(bad);
    if (threadIdx.x < 32) {
        int nw = blockDim.x >> 5;
        best = threadIdx.x < nw ? bv[threadIdx.x] : -INFINITY;
        bid = threadIdx.x < nw ? bi[threadIdx.x] : -1;
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bid, o);
            if (ob > best || (ob == best && oi >= 0 && (bid < 0 || oi < bid))) { best = ob; bid = oi; }
        }
        if (threadIdx.x == 0) { bv[0] = best; bi[0] = bid; }
    }
    __syncthreads();
    best = bv[0];
    bid = bi[0];
    if (bad || best == -INFINITY) {
        if (threadIdx.x == 0) { tok[s] = -1; logp[s] = NAN; }
        return;
    }
    int greedy = P.greedy || !(P.temperature > 0);
    float T = P.temperature > 0 ? P.temperature : 1.0f, mz = best / T;
    double Z = 0.0;
    for (int v = lo; v < hi; v++) {
        float z = x[v] / T, e = expf(z - mz);
        w[v] = e;
        key[v] = fkey(z);
        Z += e;
    }
    Z = block_sum_d(Z, sh.d);
    int chosen = bid, trunc = 0;
    if (!greedy) {
        if (P.top_k > 0 && P.top_k < V) {
            uint32_t t = bisect(key, w, lo, hi, (double)P.top_k, 1, 0, &sh);
            double gt = mass_cmp(key, w, lo, hi, t, 1, 1, &sh);
            int cut = nth_equal(key, lo, hi, t, (long)(P.top_k - gt) - 1, &sh);
            for (int v = lo; v < hi; v++)
                if (key[v] < t || (key[v] == t && v > cut)) { w[v] = 0.0f; key[v] = 0; }
            trunc = 1;
        }
        __syncthreads();
        if (P.top_p < 1.0f) {
            double K = mass_cmp(key, w, lo, hi, 0, 0, 0, &sh), target = (double)P.top_p * K;
            uint32_t t = bisect(key, w, lo, hi, target, 0, 0, &sh);
            double gt = mass_cmp(key, w, lo, hi, t, 1, 0, &sh);
            int any = nth_equal(key, lo, hi, t, 0, &sh);
            double wt = any >= 0 ? w[any] : 0.0;
            long need = wt > 0 ? (long)ceil((target - gt) / wt) : 1;
            if (need < 1) need = 1;
            int cut = nth_equal(key, lo, hi, t, need - 1, &sh);
            for (int v = lo; v < hi; v++)
                if (key[v] < t || (key[v] == t && v > cut)) { w[v] = 0.0f; key[v] = 0; }
            trunc = 1;
        }
        __syncthreads();
        double u = rng_uniform_dev(seed, group[s], sample[s], pos[s]);
        double W = mass_cmp(key, w, lo, hi, 0, 0, 0, &sh), target = u * W;
        if (trunc) {
            uint32_t t = bisect(key, w, lo, hi, target, 0, 1, &sh);
            double gt = mass_cmp(key, w, lo, hi, t, 1, 0, &sh);
            int any = nth_equal(key, lo, hi, t, 0, &sh);
            double wt = any >= 0 ? w[any] : 0.0;
            long idx = wt > 0 ? (long)floor((target - gt) / wt) : 0;
            chosen = nth_equal(key, lo, hi, t, idx, &sh);
            if (chosen < 0) chosen = bid;
        } else {
            double ts = 0.0;
            for (int v = lo; v < hi; v++) ts += w[v];
            __syncthreads();
            sh.pre[threadIdx.x] = ts;
            __syncthreads();
            if (threadIdx.x == 0) {
                double run = 0.0;
                for (int i = 0; i < (int)blockDim.x; i++) { double a = sh.pre[i]; sh.pre[i] = run; run += a; }
                sh.id = -1;
            }
            __syncthreads();
            double run = sh.pre[threadIdx.x];
            if (target >= run && target < run + ts)
                for (int v = lo; v < hi; v++) {
                    run += w[v];
                    if (run > target) { sh.id = v; break; }
                }
            __syncthreads();
            chosen = sh.id >= 0 ? sh.id : bid;   // rounding past the total: the mode
        }
    }
    if (threadIdx.x == 0) {
        tok[s] = chosen;
        logp[s] = (x[chosen] / T - mz) - (float)log(Z);
    }
}

static __global__ void rng_kernel(double *u, uint64_t seed, const uint64_t *group, const uint32_t *sample,
                                  const uint32_t *pos, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) u[i] = rng_uniform_dev(seed, group[i], sample[i], pos[i]);
}

extern "C" void cuda_sample(int32_t *tok, float *logp, const float *logits, int ld, int S, int V, CudaSampleParams p,
                            uint64_t seed, const uint64_t *group, const uint32_t *sample, const uint32_t *pos,
                            void *scratch, cudaStream_t st) {
    CUDA_REQUIRE(tok && logp && logits && group && sample && pos && scratch && S > 0 && V > 0 && ld >= V &&
                 p.top_p > 0);
    sample_kernel<<<S, SBLOCK, 0, st>>>(tok, logp, logits, ld, V, p, seed, group, sample, pos, scratch);
    CUDA_LAUNCH_CHECK();
}
extern "C" void cuda_rng_uniform(double *u, uint64_t seed, const uint64_t *group, const uint32_t *sample,
                                 const uint32_t *pos, int n, cudaStream_t st) {
    CUDA_REQUIRE(u && group && sample && pos && n > 0);
    rng_kernel<<<CEIL_DIV(n, 256), 256, 0, st>>>(u, seed, group, sample, pos, n);
    CUDA_LAUNCH_CHECK();
}
