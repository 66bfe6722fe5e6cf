/* tests/unit/tok_fixture.h: helpers shared by the tokenizer, chat and dataset tests: repository paths
 * (DAPO_ROOT), whole-file reads (optionally zstd-compressed) and JSONL iteration. Header-only, static. */
#ifndef DAPO_TOK_FIXTURE_H
#define DAPO_TOK_FIXTURE_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "core/err.h"
#include "tokenizer/tokenizer.h"

static inline const char *tf_root(void) {
    const char *r = getenv("DAPO_ROOT");
    return r && *r ? r : ".";
}

/* "<root>/<rel>" in a static rotating buffer (4 live results). */
static inline const char *tf_path(const char *rel) {
    static char buf[4][4096];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tf_root(), rel);
    return buf[k];
}

/* Reads a whole file (decompressing .zst); xmalloc'd, NUL-terminated; NULL when unreadable. */
static inline char *tf_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = xmalloc(cap);
    for (;;) {
        if (cap - n < 4096) { cap *= 2; b = xrealloc(b, cap); }
        size_t r = fread(b + n, 1, cap - n - 1, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    size_t pl = strlen(path);
    if (pl > 4 && !strcmp(path + pl - 4, ".zst")) {
        /* streaming: the fixture is written from a pipe (no content size) with --long=27 */
        ZSTD_DCtx *dc = ZSTD_createDCtx();
        ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
        size_t dcap = n * 8 + 65536, got = 0;
        char *d = xmalloc(dcap);
        ZSTD_inBuffer in = { b, n, 0 };
        size_t r = 1;
        while (in.pos < in.size || r != 0) {
            if (dcap - got < 65536) { dcap *= 2; d = xrealloc(d, dcap); }
            ZSTD_outBuffer out = { d, dcap - 1, got };
            size_t before = in.pos;
            r = ZSTD_decompressStream(dc, &out, &in);
            if (ZSTD_isError(r) || (out.pos == got && in.pos == before && r != 0)) { r = (size_t)-1; got = out.pos; break; }
            got = out.pos;
        }
        ZSTD_freeDCtx(dc);
        xfree(b);
        if (r == (size_t)-1) { xfree(d); return NULL; }
        d[got] = 0;
        if (len) *len = got;
        return d;
    }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

/* Calls fn(obj, lineno, ctx) for each non-blank JSONL line of buf; returns the number of lines, or -1 on a
 * JSON error. */
static inline long tf_jsonl(const char *buf, size_t len, void (*fn)(json_t *, long, void *), void *ctx) {
    long n = 0, lineno = 0;
    size_t i = 0;
    while (i < len) {
        const char *e = memchr(buf + i, '\n', len - i);
        size_t l = e ? (size_t)(e - (buf + i)) : len - i;
        lineno++;
        if (l > 0) {
            json_error_t je;
            json_t *o = json_loadb(buf + i, l, JSON_ALLOW_NUL, &je);
            if (!o) { fprintf(stderr, "line %ld: %s\n", lineno, je.text); return -1; }
            fn(o, lineno, ctx);
            json_decref(o);
            n++;
        }
        i += l + 1;
    }
    return n;
}

/* Fills ids from a JSON array of integers. */
static inline void tf_ids(const json_t *arr, TokIds *ids) {
    ids->n = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) tok_ids_push(ids, (int32_t)json_integer_value(json_array_get(arr, i)));
}

static inline int tf_hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* Loads the repository's Qwen3 tokenizer into *tok for a group setup: 0, or -1 with the reason on stderr. */
static inline int tf_qwen_load(Tokenizer **tok) {
    char err[ERR_LEN];
    *tok = tokenizer_load(tf_path("data/tokenizers/qwen3"), err);
    if (!*tok) fprintf(stderr, "%s\n", err);
    return *tok ? 0 : -1;
}

#endif
