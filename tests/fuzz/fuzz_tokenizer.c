/* tests/fuzz/fuzz_tokenizer.c: libFuzzer target for the tokenizer, chat templates and dataset line parser.
 * Byte 0 picks the mode (mod 4), the rest is the input:
 *   0 encode with the tiny tokenizer (data/tokenizers/tiny): ids in range, decode is valid UTF-8, streaming
 *     decode equals decode, and decode(encode(x)) == x for ASCII input (NFC is the identity there);
 *   1 the input as a tokenizer.json document (tokenizer_load_mem): loads or refuses, never crashes;
 *   2 the input as one dataset JSONL line (dataset_parse_line) with options from byte 1;
 *   3 chat_render of NUL-separated messages (roles cycle system/user/assistant) in every family.
 * Besides crashes/UB/leaks (ASan+UBSan) it aborts when an invariant fails. Expected values: tests/unit/. */
// fuzz-sources: common/tokenizer/tokenizer.c common/tokenizer/tokenizer_load.c common/tokenizer/tokenizer_bpe.c common/tokenizer/chat.c common/core/utf8.c common/io/dataset.c common/core/err.c common/core/log.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/dataset.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

static Tokenizer *g_tok;

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    char dir[4096], err[ERR_LEN];
    const char *root = getenv("DAPO_ROOT");
    snprintf(dir, sizeof dir, "%s/data/tokenizers/tiny", root && *root ? root : ".");
    g_tok = tokenizer_load(dir, err);
    if (!g_tok) { fprintf(stderr, "fuzz_tokenizer: %s\n", err); abort(); }
    return 0;
}

static void fuzz_encode(const char *s, size_t n) {
    TokIds ids = {0};
    char err[ERR_LEN];
    check(tokenizer_encode(g_tok, s, n, &ids, err) == 0);
    for (size_t i = 0; i < ids.n; i++) check(ids.v[i] >= 0 && ids.v[i] < tokenizer_vocab_size(g_tok));
    TokBuf dec = {0}, st = {0};
    check(tokenizer_decode(g_tok, ids.v, ids.n, false, &dec) == 0);
    check(tok_utf8_valid_prefix(dec.v, dec.n) == dec.n);
    TokStream ts;
    tok_stream_init(&ts);
    for (size_t i = 0; i < ids.n; i++) check(tok_stream_push(g_tok, &ts, ids.v[i], false, &st) == 0);
    tok_stream_finish(&ts, &st);
    check(st.n == dec.n && memcmp(st.v, dec.v, dec.n) == 0);
    bool ascii = true;
    for (size_t i = 0; i < n; i++) ascii &= (unsigned char)s[i] < 0x80;
    if (ascii) check(dec.n == n && memcmp(dec.v, s, n) == 0);
    tok_buf_free(&dec);
    tok_buf_free(&st);
    tok_ids_free(&ids);
}

static void fuzz_load(const char *s, size_t n) {
    char err[ERR_LEN];
    Tokenizer *t = tokenizer_load_mem(s, n, NULL, 0, err);
    if (t) {
        TokIds ids = {0};
        check(tokenizer_encode(t, "hello world 123", 15, &ids, err) == 0);
        tok_ids_free(&ids);
        tokenizer_free(t);
    }
}

static void fuzz_line(uint8_t flags, const char *s, size_t n) {
    DatasetOptions o = { .max_prompt_length = (flags >> 2) * 4, .filter_overlong = flags & 1,
                         .truncation = (DataTruncation)((flags >> 1) & 3), .chat = (ChatFamily)(flags & 3) };
    DatasetItem it;
    char err[ERR_LEN];
    int rc = dataset_parse_line(s, n, g_tok, &o, &it, err);
    check(rc == 0 || rc == 1 || rc == ERR_DECODE || rc == ERR_TOO_BIG);
    if (rc == 0) {
        check(o.max_prompt_length <= 0 || it.n_ids <= o.max_prompt_length);
        check(it.ground_truth && it.data_source && it.prompt_text);
        dataset_item_free(&it);
    }
}

static void fuzz_chat(const char *s, size_t n) {
    static const char *roles[3] = { "system", "user", "assistant" };
    ChatMessage m[16];
    size_t k = 0, start = 0;
    for (size_t i = 0; i <= n && k < 16; i++) {
        if (i == n || s[i] == 0) {
            m[k] = (ChatMessage){ roles[k % 3], s + start, i - start };
            k++;
            start = i + 1;
        }
    }
    for (int f = 0; f < 4; f++) {
        TokBuf out = {0};
        char err[ERR_LEN];
        check(chat_render((ChatFamily)f, NULL, m, k, f & 1, &out, err) == 0);
        tok_buf_free(&out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    switch (data[0] & 3) {
    case 0: fuzz_encode(s, n); break;
    case 1: fuzz_load(s, n); break;
    case 2: fuzz_line(data[1], s, n); break;
    default: fuzz_chat(s, n); break;
    }
    return 0;
}
