/* tests/unit/test_cuda_host.c: the host-side logic of the CUDA backend (backend/cuda/cuda_host.h), on the CPU:
 * bf16 conversion against torch's bits (tests/data/cuda/bf16_v1.bin, tests/reference/make_cuda_host_fixtures.py),
 * NaN handling, the packing index, the lm_head chunk plan and the paged KV block allocator.
 * The GPU itself is exercised by bench/gpu_check.sh (tools/dapo-gpu-check.c), not here; only its --help is. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "backend/cuda/cuda_host.h"
#include "core/dtype.h"
#include "dapo_fixture.h"
#include "model/model_config.h"
#include "tests/testutil.h"

static void test_bf16_matches_torch(void **state) {
    (void)state;
    Fixture fx;
    assert_int_equal(fx_load("tests/data/cuda/bf16_v1.bin", &fx), 0);
    const FxTensor *x = fx_get(&fx, "x", FX_F32), *bits = fx_get(&fx, "bf16_bits", FX_I32), *back = fx_get(&fx, "back", FX_F32);
    assert_non_null(x);
    assert_non_null(bits);
    assert_non_null(back);
    assert_true(x->n > 6000 && bits->n == x->n && back->n == x->n);
    const float *xv = x->data, *bv = back->data;
    const int32_t *bb = bits->data;
    int bad = 0;
    for (uint32_t i = 0; i < x->n; i++) {
        uint16_t h = dtype_bf16_from_f32(xv[i]);
        if (h != (uint16_t)bb[i]) {
            if (bad++ < 5) fprintf(stderr, "bf16(%a) = %04x, torch %04x\n", (double)xv[i], h, (unsigned)bb[i]);
            continue;
        }
        float y = dtype_bf16_to_f32(h);
        if (memcmp(&y, &bv[i], 4) != 0) bad++;
    }
    assert_int_equal(bad, 0);
    /* array forms agree with the scalar ones */
    uint16_t h[16];
    float y[16];
    dtype_bf16_from_f32_n(h, xv, 16);
    dtype_bf16_to_f32_n(y, h, 16);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(h[i], (uint16_t)bb[i]);
        assert_memory_equal(&y[i], &bv[i], 4);
    }
    fx_free(&fx);
}

static void test_bf16_nan_and_known(void **state) {
    (void)state;
    assert_int_equal(dtype_bf16_from_f32(1.0f), 0x3f80);
    assert_int_equal(dtype_bf16_from_f32(-2.0f), 0xc000);
    assert_int_equal(dtype_bf16_from_f32(INFINITY), 0x7f80);
    assert_int_equal(dtype_bf16_from_f32(3.4028235e38f), 0x7f80);   /* rounds past the largest bf16 */
    uint16_t n = dtype_bf16_from_f32(NAN);
    assert_true((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
    uint32_t u = 0x7f800001u;   /* signalling NaN with a payload that would round away */
    float sn;
    memcpy(&sn, &u, 4);
    assert_true(isnan(dtype_bf16_to_f32(dtype_bf16_from_f32(sn))));
    u = 0xffffffffu;
    memcpy(&sn, &u, 4);
    uint16_t m = dtype_bf16_from_f32(sn);
    assert_true(isnan(dtype_bf16_to_f32(m)) && (m & 0x8000));
    assert_true(dtype_bf16_to_f32(0x3f80) == 1.0f);
}

static void test_pack_index(void **state) {
    (void)state;
    char err[ERR_LEN];
    const int32_t cu[4] = { 0, 3, 4, 9 };
    int32_t pos[9], st[9], en[9];
    int ml = 0;
    assert_int_equal(cuda_pack_index(cu, 3, 9, pos, st, en, &ml, err), 0);
    const int32_t epos[9] = { 0, 1, 2, 0, 0, 1, 2, 3, 4 }, est[9] = { 0, 0, 0, 3, 4, 4, 4, 4, 4 },
                  een[9] = { 3, 3, 3, 4, 9, 9, 9, 9, 9 };
    assert_memory_equal(pos, epos, sizeof pos);
    assert_memory_equal(st, est, sizeof st);
    assert_memory_equal(en, een, sizeof en);
    assert_int_equal(ml, 5);
    assert_int_equal(cuda_pack_index(cu, 3, 9, NULL, NULL, NULL, NULL, err), 0);
    const int32_t bad1[3] = { 0, 2, 2 }, bad2[3] = { 1, 2, 4 }, bad3[3] = { 0, 2, 5 };
    assert_int_equal(cuda_pack_index(bad1, 2, 2, pos, st, en, &ml, err), ERR_INVAL);
    assert_non_null(strstr(err, "cu_seqlens[2]"));
    assert_int_equal(cuda_pack_index(bad2, 2, 4, pos, st, en, &ml, err), ERR_INVAL);
    assert_int_equal(cuda_pack_index(bad3, 2, 4, pos, st, en, &ml, err), ERR_INVAL);
    assert_int_equal(cuda_pack_index(NULL, 2, 4, pos, st, en, &ml, err), ERR_INVAL);
    assert_int_equal(cuda_pack_index(cu, 0, 9, pos, st, en, &ml, err), ERR_INVAL);
}

static void test_lm_plan(void **state) {
    (void)state;
    char err[ERR_LEN];
    CudaLmPlan p;
    /* everything fits: one chunk */
    assert_int_equal(cuda_lm_plan(8, 1000, 1L << 20, &p, err), 0);
    assert_int_equal(p.row_chunk, 8);
    assert_int_equal(p.vocab_chunk, 1000);
    assert_int_equal(p.n_vocab_chunks, 1);
    assert_int_equal(p.scratch_bytes, 8 * 1000 * 6);
    /* Qwen vocabulary, 4096 rows, 256 MiB: all rows, 10880 columns (multiple of 64), 14 chunks */
    assert_int_equal(cuda_lm_plan(4096, 151936, 256L << 20, &p, err), 0);
    assert_int_equal(p.row_chunk, 4096);
    assert_int_equal(p.vocab_chunk, (int)((256L << 20) / (4096 * 6) / 64 * 64));
    assert_int_equal(p.vocab_chunk % 64, 0);
    assert_int_equal(p.n_vocab_chunks, (151936 + p.vocab_chunk - 1) / p.vocab_chunk);
    assert_true(p.scratch_bytes <= (256L << 20));
    assert_true((long)p.row_chunk * p.vocab_chunk < 4096L * 151936);   /* never the full logits */
    /* tiny budget: rows are cut too */
    assert_int_equal(cuda_lm_plan(1000, 5000, 64 * 6 * 10, &p, err), 0);
    assert_int_equal(p.row_chunk, 10);
    assert_int_equal(p.vocab_chunk, 64);
    assert_int_equal(p.n_row_chunks, 100);
    assert_int_equal(p.n_vocab_chunks, 79);
    assert_int_equal(cuda_lm_plan(10, 5000, 100, &p, err), ERR_INVAL);
    assert_int_equal(cuda_lm_plan(0, 5000, 1 << 20, &p, err), ERR_INVAL);
}

static void test_kv_pager(void **state) {
    (void)state;
    char err[ERR_LEN];
    CudaKvPager k;
    assert_int_equal(cuda_kv_init(&k, 6, 4, 3, 4, err), 0);
    int a = cuda_kv_seq_new(&k, err), b = cuda_kv_seq_new(&k, err);
    assert_int_equal(a, 0);
    assert_int_equal(b, 1);
    assert_int_equal(cuda_kv_seq_grow(&k, a, 5, err), 0);   /* 2 blocks: 0, 1 */
    assert_int_equal(cuda_kv_seq_grow(&k, b, 4, err), 0);   /* 1 block: 2 */
    assert_int_equal(cuda_kv_seq_grow(&k, a, 3, err), 0);   /* 8 tokens: still 2 blocks */
    assert_int_equal(k.n_free, 3);
    assert_int_equal(cuda_kv_block_of(&k, a, 0), 0);
    assert_int_equal(cuda_kv_block_of(&k, a, 7), 1);
    assert_int_equal(cuda_kv_block_of(&k, b, 3), 2);
    assert_int_equal(cuda_kv_seq_grow(&k, b, 1, err), 0);   /* block 3 */
    assert_int_equal(cuda_kv_block_of(&k, b, 4), 3);
    /* too many for max_blocks_per_seq, then too many for the free blocks: nothing changes */
    assert_int_equal(cuda_kv_seq_grow(&k, a, 9, err), ERR_TOO_BIG);
    int c = cuda_kv_seq_new(&k, err);
    assert_int_equal(c, 2);
    assert_int_equal(cuda_kv_seq_grow(&k, c, 12, err), ERR_FULL);   /* 3 blocks wanted, 2 free */
    assert_int_equal(k.len[c], 0);
    assert_int_equal(k.len[a], 8);
    assert_int_equal(k.n_free, 2);
    assert_int_equal(cuda_kv_seq_new(&k, err), ERR_FULL);
    cuda_kv_seq_release(&k, a);                              /* blocks 0, 1 back */
    assert_int_equal(k.n_free, 4);
    assert_int_equal(k.len[a], -1);
    assert_int_equal(cuda_kv_seq_grow(&k, c, 12, err), 0);   /* 3 blocks: 0, 1 reused first, then 4 */
    assert_int_equal(cuda_kv_block_of(&k, c, 0), 0);
    assert_int_equal(cuda_kv_block_of(&k, c, 4), 1);
    assert_int_equal(cuda_kv_block_of(&k, c, 11), 4);
    /* every block owned at most once */
    int seen[6] = { 0 };
    for (long i = 0; i < 3L * 4; i++)
        if (k.table[i] >= 0) seen[k.table[i]]++;
    for (int i = 0; i < k.n_free; i++) seen[k.free_stack[i]]++;
    for (int i = 0; i < 6; i++) assert_int_equal(seen[i], 1);
    assert_int_equal(cuda_kv_seq_grow(&k, 5, 1, err), ERR_INVAL);
    assert_int_equal(cuda_kv_seq_grow(&k, a, 1, err), ERR_INVAL);   /* released slot */
    cuda_kv_seq_release(&k, a);                                     /* no-op */
    cuda_kv_free(&k);
    assert_int_equal(cuda_kv_init(&k, 0, 4, 3, 4, err), ERR_INVAL);
}

/* dapo-gpu-check --help / -h: the usage on stdout, exit 0, with or without a GPU or CUDA in the build; a wrong
 * flag: exit 2 (the usage on stderr). Runs $DAPO_BUILD/bin/dapo-gpu-check. */
static void test_gpu_check_help(void **state) {
    (void)state;
    const char *build = getenv("DAPO_BUILD"), *root = getenv("DAPO_ROOT");
    if (!build || !*build) build = "build";
    if (!root || !*root) root = ".";
    char cmd[8400], out[2048];
    const char *flags[] = { "--help", "-h", "--bogus" };
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "'%s%s%s/bin/dapo-gpu-check' %s 2>/dev/null", build[0] == '/' ? "" : root,
                 build[0] == '/' ? "" : "/", build, flags[i]);
        assert_int_equal(tu_run(cmd, out, sizeof out), i < 2 ? 0 : 2);
        if (i < 2) assert_non_null(strstr(out, "usage: dapo-gpu-check [kernels|model|bench|all]"));
        else assert_string_equal(out, "");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_check_help),
        cmocka_unit_test(test_bf16_matches_torch), cmocka_unit_test(test_bf16_nan_and_known),
        cmocka_unit_test(test_pack_index),         cmocka_unit_test(test_lm_plan),
        cmocka_unit_test(test_kv_pager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
