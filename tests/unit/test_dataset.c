/* tests/unit/test_dataset.c: the verl-schema JSONL reader: ids of the Qwen3 chat rendering of dataset prompts
 * equal HF's (tests/data/tokenizer/dataset_ids.jsonl), record counts and fields of every data/ file,
 * max_prompt_length with filter / left / right / middle / error (verl semantics), malformed lines skipped or
 * fatal with their line numbers, the tiny tokenizer's Qwen2.5 template, and option errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dataset.h"
#include "tok_fixture.h"

static Tokenizer *g_qwen;
static int setup(void **state) { (void)state; return tf_qwen_load(&g_qwen); }
static int teardown(void **state) { (void)state; tokenizer_free(g_qwen); return 0; }

static DatasetOptions opts(int max_len, bool filter, const char *trunc, const char *malformed) {
    DatasetOptions o;
    char err[ERR_LEN];
    int rc = dataset_options_init(&o, max_len, filter, trunc, "auto", malformed, g_qwen, err);
    if (rc) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return o;
}

static const char *FILES[4] = { "aime-2024.jsonl", "gsm8k-test.jsonl", "gsm8k-train.jsonl", "math500-test.jsonl" };

typedef struct { Dataset *ds; size_t first[4]; long checked, bad; } IdsCheck;

static void check_ids(json_t *o, long lineno, void *ctx) {
    (void)lineno;
    IdsCheck *c = ctx;
    const char *file = json_string_value(json_object_get(o, "file"));
    long line = (long)json_integer_value(json_object_get(o, "line"));
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(file, FILES[i])) k = i;
    assert_true(k >= 0);
    const DatasetItem *it = &c->ds->items[c->first[k] + (size_t)line - 1];
    assert_int_equal(it->line, line);
    assert_int_equal(it->file, k);
    TokIds ref = {0};
    tf_ids(json_object_get(o, "ids"), &ref);
    c->checked++;
    if ((size_t)it->n_ids != ref.n || memcmp(it->ids, ref.v, ref.n * sizeof(int32_t))) c->bad++;
    tok_ids_free(&ref);
}

static void test_all_files_match_hf(void **state) {
    (void)state;
    DatasetOptions o = opts(2048, false, "error", "error");
    Dataset ds = {0};
    char err[ERR_LEN], rel[256];
    IdsCheck c = { .ds = &ds };
    static const size_t counts[4] = { 30, 1319, 7473, 500 };
    for (int k = 0; k < 4; k++) {
        c.first[k] = ds.n;
        snprintf(rel, sizeof rel, "data/%s", FILES[k]);
        int rc = dataset_load(&ds, tf_path(rel), g_qwen, &o, err);
        if (rc) fprintf(stderr, "%s\n", err);
        assert_int_equal(rc, 0);
        assert_int_equal(ds.n - c.first[k], counts[k]);
    }
    assert_int_equal(ds.n_malformed + ds.n_filtered + ds.n_truncated, 0);
    size_t len = 0;
    char *buf = tf_read(tf_path("tests/data/tokenizer/dataset_ids.jsonl"), &len);
    assert_non_null(buf);
    assert_int_equal(tf_jsonl(buf, len, check_ids, &c), 100);
    fprintf(stderr, "dataset: %zu prompts, %ld checked against HF ids, %ld mismatches\n", ds.n, c.checked, c.bad);
    assert_int_equal(c.bad, 0);
    xfree(buf);
    /* fields */
    const DatasetItem *g = &ds.items[c.first[1]];
    assert_string_equal(g->data_source, "openai/gsm8k");
    assert_string_equal(g->ground_truth, "18");
    assert_int_equal(g->index, 0);
    assert_true(strncmp(g->prompt_text, "<|im_start|>user\nSolve the following math problem", 49) == 0);
    const DatasetItem *m = &ds.items[c.first[3]];
    assert_string_equal(m->data_source, "math500");
    assert_string_equal(m->ground_truth, "\\left( 3, \\frac{\\pi}{2} \\right)");
    const DatasetItem *a = &ds.items[c.first[0] + 29];
    assert_string_equal(a->data_source, "math_dapo");
    assert_int_equal(a->index, 29);
    assert_int_equal(a->line, 30);
    /* rendered ids decode back to the rendered text */
    TokBuf dec = {0};
    tokenizer_decode(g_qwen, g->ids, (size_t)g->n_ids, false, &dec);
    assert_string_equal(dec.v, g->prompt_text);
    tok_buf_free(&dec);
    dataset_free(&ds);
    assert_int_equal(ds.n, 0);
}

/* verl: left keeps the last L ids, right the first L, middle the first L/2 and the last L - L/2. */
static void test_truncation_modes(void **state) {
    (void)state;
    const char *path = tf_path("data/math500-test.jsonl");
    char err[ERR_LEN];
    const int L = 101;
    DatasetOptions full_o = opts(0, false, "error", "error");
    Dataset full = {0};
    assert_int_equal(dataset_load(&full, path, g_qwen, &full_o, err), 0);
    size_t over = 0;
    long first_over = -1;
    for (size_t i = 0; i < full.n; i++)
        if (full.items[i].n_ids > L) { over++; if (first_over < 0) first_over = full.items[i].line; }
    assert_true(over > 0 && over < full.n);

    static const char *modes[3] = { "left", "right", "middle" };
    for (int m = 0; m < 3; m++) {
        DatasetOptions o = opts(L, false, modes[m], "error");
        Dataset ds = {0};
        assert_int_equal(dataset_load(&ds, path, g_qwen, &o, err), 0);
        assert_int_equal(ds.n, full.n);
        assert_int_equal(ds.n_truncated, over);
        for (size_t i = 0; i < ds.n; i++) {
            const DatasetItem *f = &full.items[i], *t = &ds.items[i];
            assert_int_equal(t->n_ids_full, f->n_ids);
            if (f->n_ids <= L) {
                assert_int_equal(t->n_ids, f->n_ids);
                assert_memory_equal(t->ids, f->ids, (size_t)f->n_ids * sizeof(int32_t));
                continue;
            }
            assert_int_equal(t->n_ids, L);
            if (m == 0) assert_memory_equal(t->ids, f->ids + f->n_ids - L, L * sizeof(int32_t));
            if (m == 1) assert_memory_equal(t->ids, f->ids, L * sizeof(int32_t));
            if (m == 2) {
                assert_memory_equal(t->ids, f->ids, (L / 2) * sizeof(int32_t));
                assert_memory_equal(t->ids + L / 2, f->ids + f->n_ids - (L - L / 2), (L - L / 2) * sizeof(int32_t));
            }
        }
        dataset_free(&ds);
    }
    /* filter_overlong_prompts drops them, whatever the truncation */
    DatasetOptions fo = opts(L, true, "error", "error");
    Dataset ds = {0};
    assert_int_equal(dataset_load(&ds, path, g_qwen, &fo, err), 0);
    assert_int_equal(ds.n, full.n - over);
    assert_int_equal(ds.n_filtered, over);
    for (size_t i = 0; i < ds.n; i++) assert_true(ds.items[i].n_ids <= L);
    dataset_free(&ds);
    /* truncation=error stops at the first overlong prompt, naming file:line */
    DatasetOptions eo = opts(L, false, "error", "skip");
    assert_int_equal(dataset_load(&ds, path, g_qwen, &eo, err), ERR_TOO_BIG);
    char want[64];
    snprintf(want, sizeof want, "math500-test.jsonl:%ld:", first_over);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "data.max_prompt_length=101"));
    assert_int_equal(ds.n, (size_t)first_over - 1);
    dataset_free(&ds);
    dataset_free(&full);
}

static void test_malformed_lines(void **state) {
    (void)state;
    char path[] = "/tmp/dapo-test-dataset-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("{\"data_source\":\"s\",\"prompt\":[{\"role\":\"user\",\"content\":\"What is 1+1?\"}],"
          "\"reward_model\":{\"ground_truth\":\"2\"},\"extra_info\":{\"index\":7}}\n", f);             /* 1 ok */
    fputs("   \n", f);                                                                                 /* 2 blank */
    fputs("{not json\n", f);                                                                           /* 3 bad */
    fputs("{\"prompt\":\"bare string\",\"reward_model\":{\"ground_truth\":42}}\n", f);                 /* 4 ok */
    fputs("{\"prompt\":[],\"reward_model\":{\"ground_truth\":\"1\"}}\n", f);                           /* 5 bad */
    fputs("{\"prompt\":[{\"role\":\"user\",\"content\":\"q\"}]}\n", f);                                /* 6 bad */
    fputs("{\"prompt\":[{\"role\":\"tool\",\"content\":\"q\"}],\"reward_model\":{\"ground_truth\":\"1\"}}\n", f); /* 7 */
    fputs("[1,2,3]\n", f);                                                                             /* 8 bad */
    fputs("{\"prompt\":[{\"role\":\"user\",\"content\":5}],\"reward_model\":{\"ground_truth\":\"1\"}}\n", f); /* 9 */
    fputs("{\"prompt\":[{\"role\":\"user\",\"content\":\"\xff\"}],\"reward_model\":{\"ground_truth\":\"1\"}}\n", f); /* 10 */
    fputs("{\"prompt\":[{\"role\":\"user\",\"content\":\"x\"}],\"reward_model\":{\"ground_truth\":2.5},"
          "\"data_source\":7}\n", f);                                                                  /* 11 bad */
    fputs("{\"prompt\":[{\"role\":\"user\",\"content\":\"nul\\u0000in\"}],\"reward_model\":{\"ground_truth\":2.5}}", f); /* 12 ok, no \n */
    assert_int_equal(fclose(f), 0);
    char err[ERR_LEN];
    DatasetOptions o = opts(2048, false, "error", "skip");
    Dataset ds = {0};
    assert_int_equal(dataset_load(&ds, path, g_qwen, &o, err), 0);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.n_malformed, 8);
    assert_int_equal(ds.n_lines, 11);
    assert_int_equal(ds.items[0].line, 1);
    assert_int_equal(ds.items[0].index, 7);
    assert_string_equal(ds.items[0].ground_truth, "2");
    assert_string_equal(ds.items[0].data_source, "s");
    assert_int_equal(ds.items[1].line, 4);
    assert_int_equal(ds.items[1].index, 3);
    assert_string_equal(ds.items[1].ground_truth, "42");
    assert_string_equal(ds.items[1].data_source, "");
    assert_string_equal(ds.items[1].prompt_text, "<|im_start|>user\nbare string<|im_end|>\n<|im_start|>assistant\n");
    assert_int_equal(ds.items[2].line, 12);
    assert_string_equal(ds.items[2].ground_truth, "2.5");
    assert_memory_equal(ds.items[2].prompt_text + 17, "nul\0in", 6);
    dataset_free(&ds);
    /* fatal: the first malformed line is named, with the items before it kept */
    DatasetOptions fo = opts(2048, false, "error", "error");
    assert_int_equal(dataset_load(&ds, path, g_qwen, &fo, err), ERR_DECODE);
    assert_non_null(strstr(err, ":3: invalid JSON"));
    assert_non_null(strstr(err, "data.on_malformed=error"));
    assert_int_equal(ds.n, 1);
    dataset_free(&ds);
    /* max_items */
    o.max_items = 2;
    assert_int_equal(dataset_load(&ds, path, g_qwen, &o, err), 0);
    assert_int_equal(ds.n, 2);
    dataset_free(&ds);
    unlink(path);
    assert_int_equal(dataset_load(&ds, "/nonexistent/x.jsonl", g_qwen, &o, err), ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.jsonl"));
}

static void test_tiny_tokenizer_uses_qwen25_template(void **state) {
    (void)state;
    char err[ERR_LEN];
    Tokenizer *tiny = tokenizer_load(tf_path("data/tokenizers/tiny"), err);
    assert_non_null(tiny);
    DatasetOptions o;
    assert_int_equal(dataset_options_init(&o, 1024, true, "error", "auto", "skip", tiny, err), 0);
    assert_int_equal(o.chat, CHAT_QWEN25);
    o.max_items = 50;
    Dataset ds = {0};
    assert_int_equal(dataset_load(&ds, tf_path("data/gsm8k-test.jsonl"), tiny, &o, err), 0);
    assert_int_equal(ds.n, 50);
    const DatasetItem *it = &ds.items[0];
    assert_true(strncmp(it->prompt_text, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.", 58) == 0);
    assert_int_equal(it->ids[0], 1);                                     /* <|im_start|> */
    assert_int_equal(it->ids[it->n_ids - 1], tokenizer_token_id(tiny, "\n", 1));
    for (int i = 0; i < it->n_ids; i++) assert_true(it->ids[i] >= 0 && it->ids[i] < 1024);
    TokBuf dec = {0};
    tokenizer_decode(tiny, it->ids, (size_t)it->n_ids, false, &dec);
    assert_string_equal(dec.v, it->prompt_text);
    tok_buf_free(&dec);
    dataset_free(&ds);
    tokenizer_free(tiny);
}

static void test_option_errors(void **state) {
    (void)state;
    DatasetOptions o;
    char err[ERR_LEN];
    assert_int_equal(dataset_options_init(&o, 10, false, "sideways", "auto", "skip", g_qwen, err), ERR_INVAL);
    assert_non_null(strstr(err, "data.truncation"));
    assert_int_equal(dataset_options_init(&o, 10, false, "left", "auto", "ignore", g_qwen, err), ERR_INVAL);
    assert_non_null(strstr(err, "data.on_malformed"));
    assert_int_equal(dataset_options_init(&o, 10, false, "left", "mistral", "skip", g_qwen, err), ERR_INVAL);
    assert_non_null(strstr(err, "data.chat_template"));
    assert_int_equal(dataset_options_init(&o, 10, false, "middle", "none", "error", NULL, err), 0);
    assert_int_equal(o.truncation, DATA_TRUNC_MIDDLE);
    assert_true(o.malformed_fatal);
    DatasetItem it;
    const char *line = "{\"prompt\":\"x\",\"reward_model\":{\"ground_truth\":\"1\"}}";
    assert_int_equal(dataset_parse_line(line, strlen(line), g_qwen, &o, &it, err), 0);
    assert_string_equal(it.prompt_text, "x");                            /* template none: raw text */
    dataset_item_free(&it);
    assert_int_equal(dataset_parse_line(NULL, 0, g_qwen, &o, &it, err), ERR_INVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_files_match_hf),
        cmocka_unit_test(test_truncation_modes),
        cmocka_unit_test(test_malformed_lines),
        cmocka_unit_test(test_tiny_tokenizer_uses_qwen25_template),
        cmocka_unit_test(test_option_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
