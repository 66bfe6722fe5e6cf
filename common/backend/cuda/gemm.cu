// common/backend/cuda/gemm.cu: the three GEMM shapes of a linear layer on cuBLAS (bf16 inputs, fp32 output,
// fp32 accumulation: CUBLAS_COMPUTE_32F). Row-major [M, N] is column-major [N, M], so every call below is the
// column-major transpose of the row-major formula. Not here: epilogues (bias: bias.cu), cuBLASLt tuning.
#include <cublas_v2.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_ops.h"

#define CUBLAS_CHECK(x)                                                                                     \
    do {                                                                                                    \
        cublasStatus_t s_ = (x);                                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) die(__FILE__, __LINE__, "%s: cuBLAS status %d", #x, (int)s_);      \
    } while (0)

static void gemm(void *h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *A, int lda,
                 const void *B, int ldb, float *C, int ldc, float beta) {
    const float alpha = 1.0f;
    CUBLAS_CHECK(cublasGemmEx((cublasHandle_t)h, ta, tb, m, n, k, &alpha, A, CUDA_R_16BF, lda, B, CUDA_R_16BF, ldb,
                              &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// y^T [N, M] = w [K, N]^T-as-stored... : C(N x M) = op(W col-major K x N)^T * X(col-major K x M)
extern "C" void cuda_gemm_fwd_ld(void *h, float *y, long ldy, const uint16_t *x, const uint16_t *w, int M, int N, int K,
                                 float beta) {
    CUDA_REQUIRE(h && y && x && w && M > 0 && N > 0 && K > 0 && ldy >= N && ldy <= 2147483647L);
    gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, w, K, x, K, y, (int)ldy, beta);
}
extern "C" void cuda_gemm_fwd(void *h, float *y, const uint16_t *x, const uint16_t *w, int M, int N, int K, float beta) {
    cuda_gemm_fwd_ld(h, y, N, x, w, M, N, K, beta);
}
// dx^T [K, M] = W(col-major K x N) * dy^T(col-major N x M)
extern "C" void cuda_gemm_dx(void *h, float *dx, const uint16_t *dy, const uint16_t *w, int M, int N, int K, float beta) {
    CUDA_REQUIRE(h && dx && dy && w && M > 0 && N > 0 && K > 0);
    gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, w, K, dy, N, dx, K, beta);
}
// dw^T [K, N] += X(col-major K x M) * dy(col-major N x M)^T
extern "C" void cuda_gemm_dw(void *h, float *dw, const uint16_t *dy, const uint16_t *x, int M, int N, int K) {
    CUDA_REQUIRE(h && dw && dy && x && M > 0 && N > 0 && K > 0);
    gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x, K, dy, N, dw, K, 1.0f);
}
