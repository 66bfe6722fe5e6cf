/* tests/unit/test_chat.c: chat renders equal transformers' apply_chat_template for the Qwen2.5, Qwen3 and
 * Llama-3 templates (tests/data/tokenizer/chat_cases.jsonl, made by tests/reference/make_tokenizer_fixtures.py),
 * including the ids of the rendered text; template detection from tokenizer_config.json; refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_fixture.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

static Tokenizer *g_qwen;
static int setup(void **state) { (void)state; return tf_qwen_load(&g_qwen); }
static int teardown(void **state) { (void)state; tokenizer_free(g_qwen); return 0; }

/* Detects the family from a tokenizer_config.json file; returns its bos_token (xstrdup'd, may be "") in *bos. */
static ChatFamily family_of(const char *config_rel, char **bos) {
    size_t len = 0;
    char *buf = tf_read(tf_path(config_rel), &len);
    assert_non_null(buf);
    json_t *cfg = json_loadb(buf, len, 0, NULL);
    assert_non_null(cfg);
    ChatFamily f;
    char err[ERR_LEN];
    int rc = chat_family_detect(json_string_value(json_object_get(cfg, "chat_template")), &f, err);
    if (rc) fprintf(stderr, "%s: %s\n", config_rel, err);
    assert_int_equal(rc, 0);
    const char *b = json_string_value(json_object_get(cfg, "bos_token"));
    *bos = xstrdup(b ? b : "");
    json_decref(cfg);
    xfree(buf);
    return f;
}

typedef struct { long n, bad_text, bad_ids; int per_family[4]; } ChatCheck;

static void check_render(json_t *o, long lineno, void *ctx) {
    ChatCheck *c = ctx;
    const char *fam_name = json_string_value(json_object_get(o, "family"));
    char *bos;
    ChatFamily f = family_of(json_string_value(json_object_get(o, "config")), &bos);
    ChatFamily named;
    assert_int_equal(chat_family_parse(fam_name, &named, NULL), 0);
    assert_int_equal(f, named);
    json_t *msgs = json_object_get(o, "messages");
    size_t n = json_array_size(msgs);
    ChatMessage *m = xcalloc(n, sizeof *m);
    for (size_t i = 0; i < n; i++) {
        json_t *mi = json_array_get(msgs, i);
        m[i].role = json_string_value(json_object_get(mi, "role"));
        m[i].content = json_string_value(json_object_get(mi, "content"));
        m[i].content_len = json_string_length(json_object_get(mi, "content"));
    }
    TokBuf out = {0};
    char err[ERR_LEN];
    assert_int_equal(chat_render(f, bos[0] ? bos : NULL, m, n, json_is_true(json_object_get(o, "add_generation_prompt")),
                                 &out, err), 0);
    json_t *want = json_object_get(o, "text");
    c->n++;
    c->per_family[f]++;
    if (out.n != json_string_length(want) || memcmp(out.v, json_string_value(want), out.n)) {
        if (c->bad_text++ < 3)
            fprintf(stderr, "line %ld (%s): ours\n%s\n--- transformers\n%s\n", lineno, fam_name, out.v, json_string_value(want));
    }
    TokIds ids = {0}, ref = {0};
    assert_int_equal(tokenizer_encode(g_qwen, out.v, out.n, &ids, err), 0);
    tf_ids(json_object_get(o, "ids"), &ref);
    if (ids.n != ref.n || memcmp(ids.v, ref.v, ids.n * sizeof(int32_t))) c->bad_ids++;
    tok_ids_free(&ids);
    tok_ids_free(&ref);
    tok_buf_free(&out);
    xfree(m);
    xfree(bos);
}

static void test_renders_match_transformers(void **state) {
    (void)state;
    size_t len = 0;
    char *buf = tf_read(tf_path("tests/data/tokenizer/chat_cases.jsonl"), &len);
    assert_non_null(buf);
    ChatCheck c = {0};
    long n = tf_jsonl(buf, len, check_render, &c);
    fprintf(stderr, "chat: %ld renders (qwen2.5 %d, qwen3 %d, llama3 %d), %ld text mismatches, %ld id mismatches\n", n,
            c.per_family[CHAT_QWEN25], c.per_family[CHAT_QWEN3], c.per_family[CHAT_LLAMA3], c.bad_text, c.bad_ids);
    assert_true(n >= 60);
    assert_true(c.per_family[CHAT_QWEN25] >= 20 && c.per_family[CHAT_QWEN3] >= 20 && c.per_family[CHAT_LLAMA3] >= 20);
    assert_int_equal(c.bad_text, 0);
    assert_int_equal(c.bad_ids, 0);
    xfree(buf);
}

static void test_resolve_and_refusals(void **state) {
    (void)state;
    ChatFamily f;
    char err[ERR_LEN];
    assert_int_equal(chat_family_resolve("auto", g_qwen, &f, err), 0);
    assert_int_equal(f, CHAT_QWEN3);
    assert_int_equal(chat_family_resolve("none", NULL, &f, err), 0);
    assert_int_equal(f, CHAT_NONE);
    assert_int_equal(chat_family_resolve("llama3", NULL, &f, err), 0);
    assert_int_equal(f, CHAT_LLAMA3);
    assert_int_equal(chat_family_resolve("chatml", NULL, &f, err), ERR_INVAL);
    assert_non_null(strstr(err, "auto|qwen2.5|qwen3|llama3|none"));
    assert_int_equal(chat_family_resolve("auto", NULL, &f, err), ERR_INVAL);
    assert_int_equal(chat_family_detect("{{ messages[0].content }}", &f, err), ERR_UNSUPPORTED);
    assert_non_null(strstr(err, "data.chat_template"));
    assert_int_equal(chat_family_detect(NULL, &f, err), ERR_UNSUPPORTED);
    assert_int_equal(chat_family_detect("<|start_header_id|> Cutting Knowledge Date <|eot_id|>", &f, err), ERR_UNSUPPORTED);
    assert_int_equal(chat_family_detect("<|im_start|>{{ m }}<|im_end|>", &f, err), ERR_UNSUPPORTED);
    assert_string_equal(chat_family_name(CHAT_QWEN25), "qwen2.5");

    ChatMessage bad[] = { { "tool", "x", 1 } };
    TokBuf out = {0};
    assert_int_equal(chat_render(CHAT_QWEN3, NULL, bad, 1, true, &out, err), ERR_INVAL);
    assert_non_null(strstr(err, "tool"));
    assert_int_equal(chat_render(CHAT_QWEN3, NULL, NULL, 0, true, &out, err), ERR_INVAL);
    ChatMessage none[] = { { "user", "raw ", 4 }, { "assistant", "text", 4 } };
    assert_int_equal(chat_render(CHAT_NONE, NULL, none, 2, true, &out, err), 0);
    assert_string_equal(out.v, "raw text");
    out.n = 0;
    ChatMessage one[] = { { "user", "hi", 2 } };
    assert_int_equal(chat_render(CHAT_QWEN3, NULL, one, 1, true, &out, err), 0);
    assert_string_equal(out.v, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    tok_buf_free(&out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_renders_match_transformers),
        cmocka_unit_test(test_resolve_and_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
