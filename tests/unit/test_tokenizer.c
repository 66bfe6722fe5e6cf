/* tests/unit/test_tokenizer.c: the tokenizer against HF tokenizers 0.23 fixtures (tests/reference/
 * make_tokenizer_fixtures.py): every id of the Qwen3 corpus (all dataset prompts, solutions, scripts, emoji,
 * whitespace, special tokens, NFC, invalid UTF-8, random strings), decode and skip-special decode, the
 * streaming decoder, the tiny tokenizer, special ids, and refusal of malformed tokenizer.json files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_fixture.h"
#include "tokenizer/tokenizer.h"

static Tokenizer *g_qwen, *g_tiny;

static int setup(void **state) {
    (void)state;
    char err[ERR_LEN];
    g_qwen = tokenizer_load(tf_path("data/tokenizers/qwen3"), err);
    if (!g_qwen) { fprintf(stderr, "%s\n", err); return -1; }
    g_tiny = tokenizer_load(tf_path("data/tokenizers/tiny"), err);
    if (!g_tiny) { fprintf(stderr, "%s\n", err); return -1; }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tokenizer_free(g_qwen);
    tokenizer_free(g_tiny);
    return 0;
}

typedef struct {
    Tokenizer *tok;
    long n, bad_ids, bad_dec, bad_skip, bad_stream;
    TokIds ids, ref;
    TokBuf text, dec, stream;
} Check;

static void show(const char *what, long lineno, const char *cat, const TokIds *a, const TokIds *b) {
    size_t k = 0;
    while (k < a->n && k < b->n && a->v[k] == b->v[k]) k++;
    fprintf(stderr, "%s: case line %ld (%s): first difference at id #%zu: ours %d, HF %d (lengths %zu vs %zu)\n", what,
            lineno, cat, k, k < a->n ? a->v[k] : -1, k < b->n ? b->v[k] : -1, a->n, b->n);
}

/* One fixture case: encode(text) == ids; decode(ids) == decoded|text; skip-special; streaming == decode. */
static void check_case(json_t *o, long lineno, void *ctx) {
    Check *c = ctx;
    const char *cat = json_string_value(json_object_get(o, "cat"));
    json_t *t = json_object_get(o, "text"), *hex = json_object_get(o, "hex");
    c->text.n = 0;
    if (t) tok_buf_append(&c->text, json_string_value(t), json_string_length(t));
    else {
        const char *h = json_string_value(hex);
        for (size_t i = 0; h && h[i] && h[i + 1]; i += 2) {
            char b = (char)(tf_hexval(h[i]) * 16 + tf_hexval(h[i + 1]));
            tok_buf_append(&c->text, &b, 1);
        }
    }
    if (!c->text.v) tok_buf_append(&c->text, "", 0);
    tf_ids(json_object_get(o, "ids"), &c->ref);
    c->ids.n = 0;
    char err[ERR_LEN];
    assert_int_equal(tokenizer_encode(c->tok, c->text.v, c->text.n, &c->ids, err), 0);
    c->n++;
    if (c->ids.n != c->ref.n || memcmp(c->ids.v, c->ref.v, c->ids.n * sizeof(int32_t))) {
        if (c->bad_ids++ < 5) show("encode", lineno, cat ? cat : "?", &c->ids, &c->ref);
    }
    json_t *d = json_object_get(o, "decoded");
    const char *want = d ? json_string_value(d) : c->text.v;
    size_t wlen = d ? json_string_length(d) : c->text.n;
    c->dec.n = 0;
    assert_int_equal(tokenizer_decode(c->tok, c->ref.v, c->ref.n, false, &c->dec), 0);
    if (c->dec.n != wlen || memcmp(c->dec.v, want, wlen)) {
        if (c->bad_dec++ < 5) fprintf(stderr, "decode: case line %ld (%s) differs\n", lineno, cat ? cat : "?");
    }
    /* streaming: one id at a time must give exactly the full decode */
    TokStream s;
    tok_stream_init(&s);
    c->stream.n = 0;
    for (size_t i = 0; i < c->ref.n; i++) assert_int_equal(tok_stream_push(c->tok, &s, c->ref.v[i], false, &c->stream), 0);
    tok_stream_finish(&s, &c->stream);
    if (c->stream.n != c->dec.n || memcmp(c->stream.v, c->dec.v, c->dec.n)) {
        if (c->bad_stream++ < 5) fprintf(stderr, "stream: case line %ld (%s) differs from decode\n", lineno, cat ? cat : "?");
    }
    json_t *ds = json_object_get(o, "decoded_skip");
    if (ds || json_object_get(o, "text")) {
        const char *ws = ds ? json_string_value(ds) : want;
        size_t wsl = ds ? json_string_length(ds) : wlen;
        c->dec.n = 0;
        tokenizer_decode(c->tok, c->ref.v, c->ref.n, true, &c->dec);
        if (c->dec.n != wsl || memcmp(c->dec.v, ws, wsl)) {
            if (c->bad_skip++ < 5) fprintf(stderr, "decode skip_special: case line %ld (%s) differs\n", lineno, cat ? cat : "?");
        }
    }
}

static void check_free(Check *c) {
    tok_ids_free(&c->ids); tok_ids_free(&c->ref);
    tok_buf_free(&c->text); tok_buf_free(&c->dec); tok_buf_free(&c->stream);
}

static void test_qwen3_corpus_matches_hf(void **state) {
    (void)state;
    size_t len = 0;
    char *buf = tf_read(tf_path("tests/data/tokenizer/qwen3_corpus.jsonl.zst"), &len);
    assert_non_null(buf);
    Check c = { .tok = g_qwen };
    long n = tf_jsonl(buf, len, check_case, &c);
    fprintf(stderr, "qwen3 corpus: %ld cases, %ld id mismatches, %ld decode, %ld skip-special, %ld stream\n", n,
            c.bad_ids, c.bad_dec, c.bad_skip, c.bad_stream);
    assert_true(n > 11000);
    assert_int_equal(c.bad_ids, 0);
    assert_int_equal(c.bad_dec, 0);
    assert_int_equal(c.bad_skip, 0);
    assert_int_equal(c.bad_stream, 0);
    check_free(&c);
    xfree(buf);
}

/* encode-examples.jsonl (shipped with the tokenizer; made with the JS tokenizer): {"text", "ids"} */
static void check_simple(json_t *o, long lineno, void *ctx) {
    Check *c = ctx;
    json_t *t = json_object_get(o, "text");
    tf_ids(json_object_get(o, "ids"), &c->ref);
    c->ids.n = 0;
    assert_int_equal(tokenizer_encode(c->tok, json_string_value(t), json_string_length(t), &c->ids, NULL), 0);
    c->n++;
    if (c->ids.n != c->ref.n || memcmp(c->ids.v, c->ref.v, c->ids.n * sizeof(int32_t))) {
        if (c->bad_ids++ < 5) show("encode", lineno, "example", &c->ids, &c->ref);
    }
    json_t *d = json_object_get(o, "decoded");
    c->dec.n = 0;
    tokenizer_decode(c->tok, c->ref.v, c->ref.n, false, &c->dec);
    const char *want = d ? json_string_value(d) : json_string_value(t);
    size_t wl = d ? json_string_length(d) : json_string_length(t);
    if (c->dec.n != wl || memcmp(c->dec.v, want, wl)) c->bad_dec++;
}

static void run_simple(Tokenizer *tok, const char *rel, long min_cases) {
    size_t len = 0;
    char *buf = tf_read(tf_path(rel), &len);
    assert_non_null(buf);
    Check c = { .tok = tok };
    long n = tf_jsonl(buf, len, check_simple, &c);
    fprintf(stderr, "%s: %ld cases, %ld id mismatches, %ld decode mismatches\n", rel, n, c.bad_ids, c.bad_dec);
    assert_true(n >= min_cases);
    assert_int_equal(c.bad_ids, 0);
    assert_int_equal(c.bad_dec, 0);
    check_free(&c);
    xfree(buf);
}

static void test_qwen3_encode_examples(void **state) {
    (void)state;
    run_simple(g_qwen, "data/tokenizers/qwen3/encode-examples.jsonl", 12);
}

static void test_tiny_matches_hf(void **state) {
    (void)state;
    run_simple(g_tiny, "tests/data/tokenizer/tiny_encode.jsonl", 200);
    assert_int_equal(tokenizer_vocab_size(g_tiny), 1024);
}

static void test_special_ids(void **state) {
    (void)state;
    const TokenizerSpecial *q = tokenizer_special(g_qwen), *t = tokenizer_special(g_tiny);
    assert_int_equal(q->eos, 151645);
    assert_int_equal(q->pad, 151643);
    assert_int_equal(q->bos, -1);
    assert_int_equal(q->endoftext, 151643);
    assert_int_equal(q->im_start, 151644);
    assert_int_equal(q->im_end, 151645);
    assert_int_equal(tokenizer_vocab_size(g_qwen), 151669);
    assert_true(tokenizer_is_special(g_qwen, 151645));
    assert_false(tokenizer_is_special(g_qwen, 151667));       /* <think> is added but not special */
    assert_false(tokenizer_is_special(g_qwen, 100));
    assert_int_equal(tokenizer_token_id(g_qwen, "<think>", 7), 151667);
    assert_int_equal(tokenizer_token_id(g_qwen, " the", 4), 279);
    size_t n;
    const char *b = tokenizer_token_bytes(g_qwen, 279, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(b, " the", 4);
    assert_null(tokenizer_token_bytes(g_qwen, 151669, &n));
    assert_null(tokenizer_token_bytes(g_qwen, -3, &n));
    assert_int_equal(t->endoftext, 0);
    assert_int_equal(t->im_start, 1);
    assert_int_equal(t->im_end, 2);
    assert_int_equal(t->eos, 2);
    assert_int_equal(t->pad, 0);
    assert_non_null(tokenizer_chat_template(g_tiny));
    assert_non_null(strstr(tokenizer_chat_template(g_qwen), "enable_thinking"));
}

static void test_decode_edges(void **state) {
    (void)state;
    TokBuf out = {0};
    int32_t ids[] = { -1, 9707, 151645, 999999, 11 };        /* unknown ids are skipped, as HF does */
    assert_int_equal(tokenizer_decode(g_qwen, ids, 5, false, &out), 0);
    assert_string_equal(out.v, "Hello<|im_end|>,");
    out.n = 0;
    assert_int_equal(tokenizer_decode(g_qwen, ids, 5, true, &out), 0);
    assert_string_equal(out.v, "Hello,");
    out.n = 0;
    assert_int_equal(tokenizer_decode(g_qwen, NULL, 0, false, &out), 0);
    assert_int_equal(out.n, 0);
    assert_int_equal(tokenizer_decode(g_qwen, NULL, 3, false, &out), ERR_INVAL);
    tok_buf_free(&out);
}

/* The streaming decoder holds back a split character and emits U+FFFD as soon as bytes cannot complete. */
static void test_stream_holds_split_chars(void **state) {
    (void)state;
    const char emoji[] = "\xF0\x9F\x98\x80";
    int32_t b[4];
    for (int i = 0; i < 4; i++) {
        b[i] = tokenizer_token_id(g_qwen, emoji + i, 1);
        assert_true(b[i] >= 0);
    }
    TokStream s;
    tok_stream_init(&s);
    TokBuf out = {0};
    for (int i = 0; i < 3; i++) {
        tok_stream_push(g_qwen, &s, b[i], false, &out);
        assert_int_equal(out.n, 0);                           /* nothing yet: incomplete character */
    }
    tok_stream_push(g_qwen, &s, b[3], false, &out);
    assert_int_equal(out.n, 4);
    assert_memory_equal(out.v, emoji, 4);
    /* F0 9F then 'a': the held bytes become one U+FFFD, then 'a' */
    out.n = 0;
    int32_t a = tokenizer_token_id(g_qwen, "a", 1);
    tok_stream_push(g_qwen, &s, b[0], false, &out);
    tok_stream_push(g_qwen, &s, b[1], false, &out);
    tok_stream_push(g_qwen, &s, a, false, &out);
    assert_string_equal(out.v, "\xEF\xBF\xBD" "a");
    /* an unfinished character at the end becomes U+FFFD on finish */
    out.n = 0;
    tok_stream_push(g_qwen, &s, b[0], false, &out);
    assert_int_equal(out.n, 0);
    tok_stream_finish(&s, &out);
    assert_string_equal(out.v, "\xEF\xBF\xBD");
    tok_buf_free(&out);
}

static void test_utf8_sanitize(void **state) {
    (void)state;
    static const struct { const char *in; size_t n; const char *want; size_t nrep; } cases[] = {
        { "abc", 3, "abc", 0 },
        { "a\xff" "b", 3, "a\xEF\xBF\xBD" "b", 1 },
        { "\xed\xa0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 3 },   /* surrogate: 3 maximal subparts */
        { "\xe4\xbd", 2, "\xEF\xBF\xBD", 1 },                                 /* truncated: one */
        { "\xf0\x9f\x98" "x", 4, "\xEF\xBF\xBD" "x", 1 },
        { "\xc0\xaf", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TokBuf out = {0};
        assert_int_equal(tok_utf8_sanitize(cases[i].in, cases[i].n, &out), cases[i].nrep);
        assert_string_equal(out.v, cases[i].want);
        tok_buf_free(&out);
    }
}

static void test_encode_args_and_reuse(void **state) {
    (void)state;
    TokIds ids = {0};
    char err[ERR_LEN];
    assert_int_equal(tokenizer_encode(g_qwen, "", 0, &ids, err), 0);
    assert_int_equal(ids.n, 0);
    assert_int_equal(tokenizer_encode(NULL, "x", 1, &ids, err), ERR_INVAL);
    assert_int_equal(tokenizer_encode(g_qwen, NULL, 1, &ids, err), ERR_INVAL);
    /* appends; the cache gives the same ids the second time */
    assert_int_equal(tokenizer_encode(g_qwen, "Hello, my dog is cute", 21, &ids, err), 0);
    assert_int_equal(tokenizer_encode(g_qwen, "Hello, my dog is cute", 21, &ids, err), 0);
    static const int32_t want[] = { 9707, 11, 847, 5562, 374, 18838 };
    assert_int_equal(ids.n, 12);
    assert_memory_equal(ids.v, want, sizeof want);
    assert_memory_equal(ids.v + 6, want, sizeof want);
    tokenizer_cache_clear(g_qwen);
    ids.n = 0;
    assert_int_equal(tokenizer_encode(g_qwen, "Hello, my dog is cute", 21, &ids, err), 0);
    assert_memory_equal(ids.v, want, sizeof want);
    tok_ids_free(&ids);
}

/* Malformed tokenizer.json documents are refused with an error naming the JSON path (or line/column). */
static void test_malformed_tokenizer_json(void **state) {
    (void)state;
    size_t len = 0;
    char *tiny = tf_read(tf_path("data/tokenizers/tiny/tokenizer.json"), &len);
    assert_non_null(tiny);
    char err[ERR_LEN];
    /* truncated at several points: never loads, never crashes */
    for (size_t cut = 0; cut < len; cut += len / 37 + 1) {
        err[0] = 0;
        assert_null(tokenizer_load_mem(tiny, cut, NULL, 0, err));
        assert_non_null(strstr(err, "tokenizer.json"));
    }
    assert_non_null(strstr(err, "line"));
    static const struct { const char *doc, *needle; } bad[] = {
        { "[]", "top level" },
        { "{\"model\": 3}", "model: expected an object" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": []}}", "model.vocab: expected an object" },
        { "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", "model.type" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": \"x\"}}}", "model.vocab[\"a\"]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}", "model.vocab[\"a\"]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}", "model.merges[0]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\", 7]}}", "model.merges[1]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [[\"a\"]]}}", "model.merges[0]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a  b\"]}}", "model.merges[0]" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": {}}}", "model.merges: expected an array" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"byte_fallback\": true}}", "model.byte_fallback" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": \"x\", \"content\": \"<s>\"}]}",
          "added_tokens[0].id" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 5, \"content\": \"\"}]}",
          "added_tokens[0].content" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 5, \"content\": \"x\", \"special\": 1}]}",
          "added_tokens[0].special" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"normalizer\": {\"type\": \"Lowercase\"}}", "normalizer.type" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", "pre_tokenizer" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
          "[{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}]}}",
          "pre_tokenizer.pretokenizers[0].pattern.Regex" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
          "[{\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Removed\"}]}}",
          "pre_tokenizer.pretokenizers[0].behavior" },
        { "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}", "decoder" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        Tokenizer *t = tokenizer_load_mem(bad[i].doc, strlen(bad[i].doc), NULL, 0, err);
        if (t || !strstr(err, bad[i].needle))
            fprintf(stderr, "case %zu: want \"%s\" in \"%s\"\n", i, bad[i].needle, err);
        assert_null(t);
        assert_non_null(strstr(err, bad[i].needle));
    }
    /* a bad tokenizer_config.json is refused too; a good one from memory loads */
    assert_null(tokenizer_load_mem(tiny, len, "{\"chat_template\": 5}", 20, err));
    assert_non_null(strstr(err, "chat_template"));
    Tokenizer *t = tokenizer_load_mem(tiny, len, "{\"eos_token\": {\"content\": \"<|im_end|>\"}}", 40, err);
    assert_non_null(t);
    assert_int_equal(tokenizer_special(t)->eos, 2);
    assert_null(tokenizer_chat_template(t));
    tokenizer_free(t);
    assert_null(tokenizer_load(tf_path("tests/data/tokenizer/no-such-dir"), err));
    assert_non_null(strstr(err, "no-such-dir"));
    xfree(tiny);
}

/* A minimal GPT-2 style document: ByteLevel pre-tokenizer with use_regex and add_prefix_space, "a b" merges,
 * ignore_merges. Expected ids worked by hand. */
static void test_gpt2_style_document(void **state) {
    (void)state;
    const char *doc =
        "{\"model\": {\"type\": \"BPE\", \"ignore_merges\": true, \"vocab\": {\"Ġ\": 0, \"h\": 1, \"i\": 2, \"Ġh\": 3, "
        "\"Ġhi\": 4, \"!\": 5, \"hi\": 6}, \"merges\": [\"Ġ h\", \"Ġh i\", \"h i\"]},"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"use_regex\": true},"
        " \"decoder\": {\"type\": \"ByteLevel\"}}";
    char err[ERR_LEN];
    Tokenizer *t = tokenizer_load_mem(doc, strlen(doc), NULL, 0, err);
    if (!t) fprintf(stderr, "%s\n", err);
    assert_non_null(t);
    TokIds ids = {0};
    assert_int_equal(tokenizer_encode(t, "hi hi!", 6, &ids, err), 0);
    /* " hi" " hi" "!" -> prefix space added once at the start; "!" has no merges */
    static const int32_t want[] = { 4, 4, 5 };
    assert_int_equal(ids.n, 3);
    assert_memory_equal(ids.v, want, sizeof want);
    TokBuf out = {0};
    tokenizer_decode(t, ids.v, ids.n, false, &out);
    assert_string_equal(out.v, " hi hi!");
    tok_buf_free(&out);
    tok_ids_free(&ids);
    tokenizer_free(t);
}


/* The Qwen3 tokenizer.json edited as tests/reference/make_tokenizer_fixtures.py's variant_json() does, so the
 * Llama-3 regex + ignore_merges, the GPT-2 ByteLevel regex + add_prefix_space, and Split + ByteLevel
 * add_prefix_space paths are checked against HF too (tests/data/tokenizer/variants.jsonl.zst). */
static const char LLAMA3_SPLIT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                                   "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct { const char *variant; Check c; } VariantCheck;

static void check_variant_case(json_t *o, long lineno, void *ctx) {
    VariantCheck *v = ctx;
    if (strcmp(json_string_value(json_object_get(o, "variant")), v->variant) != 0) return;
    json_t *t = json_object_get(o, "text");
    Check *c = &v->c;
    tf_ids(json_object_get(o, "ids"), &c->ref);
    c->ids.n = 0;
    assert_int_equal(tokenizer_encode(c->tok, json_string_value(t), json_string_length(t), &c->ids, NULL), 0);
    c->n++;
    if (c->ids.n != c->ref.n || memcmp(c->ids.v, c->ref.v, c->ids.n * sizeof(int32_t))) {
        if (c->bad_ids++ < 5) show(v->variant, lineno, "variant", &c->ids, &c->ref);
    }
}

static void test_variants_match_hf(void **state) {
    (void)state;
    size_t len = 0, flen = 0;
    char *fix = tf_read(tf_path("tests/data/tokenizer/variants.jsonl.zst"), &flen);
    char *doc = tf_read(tf_path("data/tokenizers/qwen3/tokenizer.json"), &len);
    assert_non_null(fix);
    assert_non_null(doc);
    json_t *root = json_loadb(doc, len, 0, NULL);
    xfree(doc);
    assert_non_null(root);
    json_t *pt = json_deep_copy(json_object_get(root, "pre_tokenizer"));
    static const char *names[3] = { "llama3", "gpt2", "prefix" };
    for (int k = 0; k < 3; k++) {
        json_object_set_new(root, "pre_tokenizer", json_deep_copy(pt));   /* pristine each time */
        json_t *model = json_object_get(root, "model");
        json_object_set_new(model, "ignore_merges", json_boolean(k == 0));
        json_t *seq = json_object_get(json_object_get(root, "pre_tokenizer"), "pretokenizers");
        if (k == 0) {
            json_object_set_new(root, "normalizer", json_null());
            json_object_set_new(json_object_get(json_array_get(seq, 0), "pattern"), "Regex", json_string(LLAMA3_SPLIT));
        } else if (k == 1) {
            json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:b, s:b}", "type", "ByteLevel",
                                                                 "add_prefix_space", 1, "use_regex", 1));
        } else {
            json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC"));
            json_object_set_new(json_array_get(seq, 1), "add_prefix_space", json_true());
        }
        char *s = json_dumps(root, JSON_COMPACT);
        char err[ERR_LEN];
        Tokenizer *t = tokenizer_load_mem(s, strlen(s), NULL, 0, err);
        free(s);
        if (!t) fprintf(stderr, "%s: %s\n", names[k], err);
        assert_non_null(t);
        VariantCheck v = { .variant = names[k], .c = { .tok = t } };
        assert_true(tf_jsonl(fix, flen, check_variant_case, &v) > 0);
        fprintf(stderr, "variant %s: %ld cases, %ld id mismatches\n", names[k], v.c.n, v.c.bad_ids);
        assert_true(v.c.n > 700);
        assert_int_equal(v.c.bad_ids, 0);
        check_free(&v.c);
        tokenizer_free(t);
    }
    json_decref(pt);
    json_decref(root);
    xfree(fix);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3_corpus_matches_hf),
        cmocka_unit_test(test_qwen3_encode_examples),
        cmocka_unit_test(test_tiny_matches_hf),
        cmocka_unit_test(test_special_ids),
        cmocka_unit_test(test_decode_edges),
        cmocka_unit_test(test_stream_holds_split_chars),
        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_encode_args_and_reuse),
        cmocka_unit_test(test_malformed_tokenizer_json),
        cmocka_unit_test(test_gpt2_style_document),
        cmocka_unit_test(test_variants_match_hf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
