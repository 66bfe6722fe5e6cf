/* common/core/err.c: error strings, die(), the counted allocator. */
#include "core/err.h"
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *err_str(int code) {
    switch (code) {
    case ERR_OK: return "ok";
    case ERR_NOMEM: return "out of memory";
    case ERR_INVAL: return "invalid argument";
    case ERR_IO: return "I/O error";
    case ERR_DECODE: return "decode error";
    case ERR_TOO_BIG: return "too big";
    case ERR_TIMEOUT: return "timed out";
    case ERR_STALE: return "stale";
    case ERR_FULL: return "full";
    case ERR_VERSION: return "version mismatch";
    case ERR_NOTFOUND: return "not found";
    case ERR_CLOSED: return "closed";
    case ERR_AGAIN: return "try again";
    case ERR_UNSUPPORTED: return "unsupported";
    case ERR_COLLECTIVE: return "collective failed";
    default: return code < 0 && code > -1000 ? strerror(-code) : "unknown error";
    }
}

int err_set(char err[ERR_LEN], int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return code;
}

void die(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_msg(LL_ERROR, "%s:%d: %s", file, line, msg);
    abort();
}

/* Each block carries its size in a 16-byte header (keeps 16-byte alignment for SIMD loads). */
static atomic_size_t g_used;
#define HDR 16

void *xmalloc(size_t n) {
    if (n > SIZE_MAX - HDR) DIE("xmalloc(%zu): size overflow", n);
    unsigned char *p = malloc(n + HDR);
    if (!p) DIE("xmalloc(%zu): out of memory", n);
    memcpy(p, &n, sizeof n);
    atomic_fetch_add(&g_used, n);
    return p + HDR;
}

void *xcalloc(size_t n, size_t size) {
    if (size && n > (SIZE_MAX - HDR) / size) DIE("xcalloc(%zu, %zu): size overflow", n, size);
    void *p = xmalloc(n * size);
    memset(p, 0, n * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    if (!p) return xmalloc(n);
    if (n > SIZE_MAX - HDR) DIE("xrealloc(%zu): size overflow", n);
    unsigned char *b = (unsigned char *)p - HDR;
    size_t old;
    memcpy(&old, b, sizeof old);
    unsigned char *q = realloc(b, n + HDR);
    if (!q) DIE("xrealloc(%zu): out of memory", n);
    memcpy(q, &n, sizeof n);
    atomic_fetch_sub(&g_used, old);
    atomic_fetch_add(&g_used, n);
    return q + HDR;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = xmalloc(n);
    memcpy(d, s, n);
    return d;
}

void xfree(void *p) {
    if (!p) return;
    unsigned char *b = (unsigned char *)p - HDR;
    size_t n;
    memcpy(&n, b, sizeof n);
    atomic_fetch_sub(&g_used, n);
    free(b);
}

size_t xmalloc_used(void) { return atomic_load(&g_used); }
