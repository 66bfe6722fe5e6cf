// common/backend/cuda/rope.cu: rotary position embedding in place (rotate_half layout), forward and the
// transposed rotation for backward. Angles as cpu_rope_tables: fp32 pos * inv_freq, then cosf / sinf.
// Not here: llama3 frequency scaling (already folded into inv_freq by model_config_inv_freq).
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

static __global__ void rope_kernel(float *x, int ld, const int32_t *pos, const float *inv_freq, int nh, int hd,
                                   int inverse) {
    int m = blockIdx.x, half = hd / 2;
    float p = (float)pos[m];
    for (int t = threadIdx.x; t < nh * half; t += blockDim.x) {
        int h = t / half, i = t % half;
        float a = p * inv_freq[i], c = cosf(a), s = sinf(a);
        if (inverse) s = -s;
        float *r = x + (long)m * ld + h * hd;
        float x1 = r[i], x2 = r[i + half];
        r[i] = x1 * c - x2 * s;
        r[i + half] = x2 * c + x1 * s;
    }
}
extern "C" void cuda_rope(float *x, int ld, const int32_t *pos, const float *inv_freq, int M, int nh, int hd,
                          int inverse, cudaStream_t st) {
    CUDA_REQUIRE(x && pos && inv_freq && M > 0 && nh > 0 && hd > 1 && hd % 2 == 0 && ld >= nh * hd);
    rope_kernel<<<M, 128, 0, st>>>(x, ld, pos, inv_freq, nh, hd, inverse);
    CUDA_LAUNCH_CHECK();
}
