/* common/core/err.h: the one set of error codes every dapo module returns (0 = success, negative = error),
 * and the fail-fast path for setup errors (docs/conventions.md rule 3).
 * Not here: logging (log.h). Request/message paths return these codes and never exit. */
#ifndef DAPO_ERR_H
#define DAPO_ERR_H

#include <stddef.h>

#define ERR_LEN 256            /* size of every `char err[ERR_LEN]` out-parameter */

enum {
    ERR_OK       = 0,
    ERR_NOMEM    = -1000,      /* allocation failed */
    ERR_INVAL    = -1001,      /* bad argument or malformed input */
    ERR_IO       = -1002,      /* file or socket I/O failed (errno kept by the caller) */
    ERR_DECODE   = -1003,      /* a message, file or JSON document did not parse */
    ERR_TOO_BIG  = -1004,      /* over a configured size bound */
    ERR_TIMEOUT  = -1005,      /* a bounded wait expired */
    ERR_STALE    = -1006,      /* result of an old lease, attempt or policy version */
    ERR_FULL     = -1007,      /* a bounded queue or buffer is full */
    ERR_VERSION  = -1008,      /* protocol or file-format version mismatch */
    ERR_NOTFOUND = -1009,      /* a named key, tensor or item does not exist */
    ERR_CLOSED   = -1010,      /* peer or endpoint closed */
    ERR_AGAIN    = -1011,      /* nothing available now; try again */
    ERR_UNSUPPORTED = -1012,   /* valid input that this build cannot run */
    ERR_COLLECTIVE = -1013,    /* a collective over the learner ranks failed (a rank lost, hung or out of step): the
                                  ranks must re-form before the step can run (the coordinator rolls back, recover.c) */
};

/* Static text for an ERR_* code, or strerror() for a negative errno value (-EINTR, ...). Never NULL. */
const char *err_str(int code);

/* Formats into err (ERR_LEN bytes, always NUL-terminated) and returns code; for `return err_set(...)`. */
int err_set(char err[ERR_LEN], int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The single fatal path: logs "file:line: msg" at error level and abort()s. Setup code only. */
_Noreturn void die(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define DIE(...) die(__FILE__, __LINE__, __VA_ARGS__)

/* Counted heap (docs/conventions.md rule 5): abort on failure (out of memory is not recoverable here), and the
 * running total of live bytes is exported for the dashboard. Free with xfree (NULL-safe). */
void  *xmalloc(size_t n);
void  *xcalloc(size_t n, size_t size);
void  *xrealloc(void *p, size_t n);
char  *xstrdup(const char *s);
void   xfree(void *p);
/* Growable arrays: makes room for element n of p (capacity cap, any integer types; p NULL when cap is 0), doubling
 * cap (from min_cap) by xrealloc when it is full. Use: XGROW(v, n, cap, 64); v[n++] = x; */
#define XGROW(p, n, cap, min_cap)                                                                              \
    do {                                                                                                       \
        if ((size_t)(n) >= (size_t)(cap)) {                                                                    \
            (cap) = (cap) ? 2 * (cap) : (min_cap);                                                             \
            (p) = xrealloc((p), (size_t)(cap) * sizeof *(p));                                                  \
        }                                                                                                      \
    } while (0)
size_t xmalloc_used(void);

#endif
