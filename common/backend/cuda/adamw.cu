// common/backend/cuda/adamw.cu: torch.optim.AdamW (single-tensor formula of model/adamw.h) on the fp32 master
// weights and fp32 state, with the gradient scaled by the clip coefficient on the fly, and the bf16 weight copy
// refreshed in the same pass. Not here: LR schedules (adamw.h lr_at, host), the global norm (norm.cu).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void adamw_kernel(float *p, bf16 *pbf, const float *g, float *m, float *v, long n, float lr,
                                    float b1, float b2, float eps, float wd, float bc1, float bc2s, float gs) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float gi = g[i] * gs, pi = p[i] * (1.0f - lr * wd);
        float mi = m[i] + (gi - m[i]) * (1.0f - b1);           // torch lerp
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        pi -= lr / bc1 * mi / (sqrtf(vi) / bc2s + eps);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        pbf[i] = __float2bfloat16_rn(pi);
    }
}

extern "C" void cuda_adamw(float *p, uint16_t *pbf, const float *g, float *m, float *v, long n, float lr, float beta1,
                           float beta2, float eps, float wd, long step, float gscale, cudaStream_t st) {
    CUDA_REQUIRE(p && pbf && g && m && v && n > 0 && step >= 1);
    float bc1 = (float)(1.0 - pow((double)beta1, (double)step));
    float bc2s = (float)sqrt(1.0 - pow((double)beta2, (double)step));
    long blocks = CEIL_DIV(n, 256L);
    adamw_kernel<<<(int)(blocks > 65536 ? 65536 : blocks), 256, 0, st>>>(p, (bf16 *)pbf, g, m, v, n, lr, beta1, beta2,
                                                                          eps, wd, bc1, bc2s, gscale);
    CUDA_LAUNCH_CHECK();
}
