/* tests/integration/test_generate_cli.c: dapo-generate end to end on a small random Qwen2 model sized to the tiny
 * tokenizer (data/tokenizers/tiny) and three verl-schema prompts: JSONL shape (n responses per prompt, token ids
 * and log-probs of equal length <= --max-tokens, finish reasons, text == the tokenizer's decode of the ids with
 * special tokens skipped), --verify summary lines per data_source, reproducibility (--n 2 is a prefix of --n 3;
 * batch-invariant output independent of --max-num-seqs / --batch-tokens), bad arguments exit 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <sys/stat.h>

#include "core/fsutil.h"
#include "model/model.h"
#include "tests/testutil.h"
#include "tokenizer/tokenizer.h"

static char g_dir[512], g_prompts[600], g_model[600];

static const char *CONFIG =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_act\": \"silu\","
    " \"hidden_size\": 32, \"intermediate_size\": 64, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"num_hidden_layers\": 2, \"vocab_size\": 1040, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-6,"
    " \"rope_theta\": 10000.0, \"tie_word_embeddings\": true, \"eos_token_id\": 2, \"bos_token_id\": 0}";

static int setup(void **state) {
    (void)state;
    char err[ERR_LEN];
    snprintf(g_dir, sizeof g_dir, "%s/test-logs/generate-cli", tu_build());
    if (fs_mkdir_p(g_dir, err)) { fprintf(stderr, "%s\n", err); return -1; }   /* run alone, test-logs may not exist */
    snprintf(g_model, sizeof g_model, "%s/model", g_dir);
    ModelOptions o = { .max_tokens = 8 };
    Model *m = model_create(CONFIG, &o, err);
    if (!m) { fprintf(stderr, "%s\n", err); return -1; }
    model_init_random(m, 3, 0.5f);
    int rc = model_save(m, g_model, ST_F32, err);
    model_free(m);
    if (rc) { fprintf(stderr, "%s\n", err); return -1; }
    snprintf(g_prompts, sizeof g_prompts, "%s/prompts.jsonl", g_dir);
    FILE *f = fopen(g_prompts, "w");
    if (!f) return -1;
    fputs("{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}],"
          " \"reward_model\": {\"ground_truth\": \"5\", \"style\": \"rule\"}}\n"
          "{\"data_source\": \"math_dapo\", \"prompt\": [{\"role\": \"user\", \"content\": \"Compute 7*6.\"}],"
          " \"reward_model\": {\"ground_truth\": 42, \"style\": \"rule\"}, \"extra_info\": {\"index\": 9}}\n"
          "\n"
          "{\"data_source\": \"openai/gsm8k\", \"prompt\": [{\"role\": \"user\", \"content\": \"Say hi.\"}],"
          " \"reward_model\": {\"ground_truth\": \"1\", \"style\": \"rule\"}}\n", f);
    return fclose(f) ? -1 : 0;
}

static int run_gen(const char *extra, const char *out, char *text, size_t n) {
    char bin[256], cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --model %s --tokenizer %s/data/tokenizers/tiny --input %s --output %s "
             "--max-tokens 16 --seed 7 --threads 1 %s 2>&1", tu_bin(bin, sizeof bin, "dapo-generate"), g_model,
             tu_root(), g_prompts, out, extra);
    return tu_run(cmd, text, n);
}

static void read_lines(const char *path, json_t *v[16], int *n) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1 << 16];
    *n = 0;
    while (*n < 16 && fgets(line, sizeof line, f)) {
        json_error_t je;
        v[*n] = json_loads(line, JSON_ALLOW_NUL, &je);
        assert_non_null(v[*n]);
        (*n)++;
    }
    fclose(f);
}

static void test_generate_jsonl(void **state) {
    (void)state;
    char out[700], log[8192], err[ERR_LEN], tp[600];
    snprintf(out, sizeof out, "%s/out3.jsonl", g_dir);
    assert_int_equal(run_gen("--n 3 --verify --temperature 1.0", out, log, sizeof log), 0);
    assert_non_null(strstr(log, "val-core/openai/gsm8k/acc/mean@3 = "));
    assert_non_null(strstr(log, "val-core/openai/gsm8k/acc/best@3/mean = "));
    assert_non_null(strstr(log, "val-core/openai/gsm8k/acc/maj@3/mean = "));
    assert_non_null(strstr(log, "val-core/math_dapo/acc/mean@3 = "));
    assert_non_null(strstr(log, "(2 prompts)"));
    snprintf(tp, sizeof tp, "%s/data/tokenizers/tiny", tu_root());
    Tokenizer *tok = tokenizer_load(tp, err);
    assert_non_null(tok);
    int n;
    json_t *v[16];
    read_lines(out, v, &n);
    assert_int_equal(n, 3);
    assert_int_equal(json_integer_value(json_object_get(v[1], "index")), 9);
    assert_string_equal(json_string_value(json_object_get(v[1], "ground_truth")), "42");
    for (int i = 0; i < n; i++) {
        json_t *rs = json_object_get(v[i], "responses");
        assert_int_equal(json_array_size(rs), 3);
        for (size_t j = 0; j < 3; j++) {
            json_t *r = json_array_get(rs, j), *ids = json_object_get(r, "token_ids"), *lps = json_object_get(r, "logprobs");
            size_t k = json_array_size(ids);
            assert_true(k >= 1 && k <= 16);
            assert_int_equal(json_array_size(lps), k);
            const char *fin = json_string_value(json_object_get(r, "finish_reason"));
            int32_t t[16];
            for (size_t q = 0; q < k; q++) {
                t[q] = (int32_t)json_integer_value(json_array_get(ids, q));
                assert_true(json_real_value(json_array_get(lps, q)) <= 0.0);
                if (q + 1 < k) assert_true(t[q] != 2 && t[q] != 0);    /* im_end / endoftext stop it */
            }
            if (!strcmp(fin, "length")) assert_int_equal(k, 16);
            else { assert_string_equal(fin, "stop"); assert_true(t[k - 1] == 2 || t[k - 1] == 0); }
            TokBuf b = { 0 };
            tokenizer_decode(tok, t, k, true, &b);
            json_t *tx = json_object_get(r, "text");
            assert_int_equal(json_string_length(tx), b.n);
            if (b.n) assert_memory_equal(json_string_value(tx), b.v, b.n);
            tok_buf_free(&b);
            assert_non_null(json_object_get(r, "acc"));
            assert_non_null(json_object_get(r, "score"));
        }
    }
    /* --n 2 gives the first two responses of --n 3 (RNG keyed by group, sample, position) */
    char out2[700];
    snprintf(out2, sizeof out2, "%s/out2.jsonl", g_dir);
    assert_int_equal(run_gen("--n 2 --batch-invariant", out2, log, sizeof log), 0);
    char out2b[700];
    snprintf(out2b, sizeof out2b, "%s/out2b.jsonl", g_dir);
    assert_int_equal(run_gen("--n 2 --batch-invariant --max-num-seqs 1 --batch-tokens 3", out2b, log, sizeof log), 0);
    int n2, n2b;
    json_t *w[16], *wb[16];
    read_lines(out2, w, &n2);
    read_lines(out2b, wb, &n2b);
    assert_int_equal(n2, 3);
    assert_int_equal(n2b, 3);
    for (int i = 0; i < 3; i++) {
        assert_true(json_equal(json_object_get(w[i], "responses"), json_object_get(wb[i], "responses")));
        json_t *a = json_object_get(w[i], "responses"), *b = json_object_get(v[i], "responses");
        for (size_t j = 0; j < 2; j++)
            assert_true(json_equal(json_object_get(json_array_get(a, j), "token_ids"),
                                   json_object_get(json_array_get(b, j), "token_ids")));
        json_decref(w[i]);
        json_decref(wb[i]);
        json_decref(v[i]);
    }
    tokenizer_free(tok);
}

static void test_bad_arguments(void **state) {
    (void)state;
    char bin[256], cmd[2048], log[4096];
    const char *bad[] = { "", "--model /nonexistent", "--model x --n 0", "--model x --temperature nan",
                          "--model x --bogus 1", "--model x --top-p 0" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s < /dev/null 2>&1", tu_bin(bin, sizeof bin, "dapo-generate"), bad[i]);
        assert_int_equal(tu_run(cmd, log, sizeof log), 1);
    }
    char out[700];
    snprintf(out, sizeof out, "%s/none.jsonl", g_dir);
    snprintf(cmd, sizeof cmd, "%s --model %s --tokenizer %s/data/tokenizers/tiny --input /nonexistent 2>&1",
             tu_bin(bin, sizeof bin, "dapo-generate"), g_model, tu_root());
    assert_int_equal(tu_run(cmd, log, sizeof log), 1);
    /* --help / -h: the usage on stdout (stderr dropped here), exit 0. */
    const char *help[] = { "--help", "-h" };
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", tu_bin(bin, sizeof bin, "dapo-generate"), help[i]);
        assert_int_equal(tu_run(cmd, log, sizeof log), 0);
        assert_non_null(strstr(log, "usage: dapo-generate --model DIR"));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generate_jsonl),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
