/* common/core/log.c: the stderr logger. */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static char g_component[64] = "dapo";
static atomic_int g_level = LL_INFO;
static atomic_long g_step = -1;

int log_level_parse(const char *s) {
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (s && strcasecmp(s, names[i]) == 0) return i;
    return -1;
}

void log_init(const char *component, LogLevel level) {
    snprintf(g_component, sizeof g_component, "%s", component ? component : "dapo");
    int env = log_level_parse(getenv("DAPO_LOG_LEVEL"));
    atomic_store(&g_level, env >= 0 ? env : (int)level);
}

void log_set_step(long step) { atomic_store(&g_step, step); }
int log_enabled(LogLevel level) { return (int)level >= atomic_load(&g_level); }

void log_msg(LogLevel level, const char *fmt, ...) {
    if (!log_enabled(level)) return;
    static const char *tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048], stamp[32], stepbuf[32] = "";
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    long step = atomic_load(&g_step);
    if (step >= 0) snprintf(stepbuf, sizeof stepbuf, " [step %ld]", step);
    int n = snprintf(line, sizeof line, "%s.%03ldZ %s %s%s ", stamp, ts.tv_nsec / 1000000L,
                     tags[level & 3], g_component, stepbuf);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    for (unsigned char *p = (unsigned char *)line; *p; p++) {   /* one record, one line, no terminal codes (a client's
                                                                    text may be in it) */
        if (*p < 0x20 || *p == 0x7f) *p = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : '?';
        else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { p[0] = p[1] = '?'; p++; }   /* C1 controls (CSI ...) */
        else if ((p[0] == 0xe2 && p[1] == 0x80 && ((p[2] >= 0x8b && p[2] <= 0x8f) ||   /* zero-width, marks */
                                                   (p[2] >= 0xa8 && p[2] <= 0xae))) ||  /* line/para separators, bidi */
                 (p[0] == 0xe2 && p[1] == 0x81 && p[2] >= 0xa0 && p[2] <= 0xaf) ||     /* joiners, isolates */
                 (p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf)) {                     /* byte-order mark */
            p[0] = p[1] = p[2] = '?';
            p += 2;
        }
    }
    fprintf(stderr, "%s\n", line);
}

static long long mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void log_limit_flush(LogLimit *l, const char *what) {
    long long now = mono_ms();
    if (!l->held || now < l->next_ms) return;
    log_msg(LL_WARN, "%s: %llu more in the last %.0f s", what, l->held, (now - l->window_start_ms) / 1000.0);
    l->held = 0;
    l->window_start_ms = now;
}

static void vlimited(LogLimit *l, LogLevel level, int window_ms, const char *fmt, va_list ap) {
    if (!log_enabled(level)) return;
    long long now = mono_ms();
    int in_burst = now < l->next_ms && l->used < (l->burst ? l->burst : 1u);
    if (now < l->next_ms && !in_burst) { l->held++; return; }
    char msg[1536];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (in_burst) {                                  /* within the window's burst: as is, the window unchanged */
        l->used++;
        log_msg(level, "%s", msg);
        return;
    }
    if (l->held) log_msg(level, "%s (and %llu more in the last %.0f s)", msg, l->held,
                         (now - l->window_start_ms) / 1000.0);
    else log_msg(level, "%s", msg);
    l->held = 0;
    l->used = 1;
    l->window_start_ms = now;
    l->next_ms = now + window_ms;
}

void log_warn_limited(LogLimit *l, int window_ms, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlimited(l, LL_WARN, window_ms, fmt, ap);
    va_end(ap);
}

void log_limited(LogLimit *l, LogLevel level, int window_ms, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlimited(l, level, window_ms, fmt, ap);
    va_end(ap);
}
