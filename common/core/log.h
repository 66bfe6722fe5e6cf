/* common/core/log.h: structured logs to stderr: "2026-11-30T06:20:11.123Z LEVEL component [step N] msg".
 * The level is checked before formatting (docs/conventions.md: log levels checked first). Thread-safe (one fprintf
 * per line). Not here: metrics (metrics.h). */
#ifndef DAPO_LOG_H
#define DAPO_LOG_H

typedef enum { LL_DEBUG = 0, LL_INFO = 1, LL_WARN = 2, LL_ERROR = 3 } LogLevel;

/* Process-wide settings; call once at startup. component: short name ("coordinator", "rollout-0"),
 * copied. Level from the environment DAPO_LOG_LEVEL (debug|info|warn|error) when set. */
void log_init(const char *component, LogLevel level);
void log_set_step(long step);          /* the step shown in each line; <0 hides it */
int  log_enabled(LogLevel level);
/* One line to stderr: "<UTC time> <LEVEL> <component> [step N] <message>"; control characters in the message (a
 * client's text may be in it) become a space (line breaks, tabs) or '?' (C0 and C1 controls; the format characters
 * and separators U+200B-200F, U+2028-202E, U+2060-206F, U+FEFF), so a record is one line without terminal codes or
 * reordered text (issue 38). */
void log_msg(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A warning of one kind at most once per window (issue 38: 244 garbage frames are not 244 lines). The caller keeps one
 * LogLimit per kind (zeroed: the first one logs). log_warn_limited logs fmt when the kind's window has passed, with
 * " (and N more in the last S s)" when it held N back since its last line, and counts it otherwise; `burst` (0: 1)
 * lines of a kind are logged in one window before it holds back (refusals with different reasons each deserve a
 * line until a flood starts). Not thread-safe per LogLimit (each lives on one thread: the coordinator's loop, a
 * daemon's). */
typedef struct { long long next_ms, window_start_ms; unsigned long long held; unsigned burst, used; } LogLimit;
void log_warn_limited(LogLimit *l, int window_ms, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same at another level (a line below the level set is neither logged nor counted). */
void log_limited(LogLimit *l, LogLevel level, int window_ms, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* From a timer: once the window has passed, the lines held back since the last one as one warning, "<what>: N more in
 * the last S s" (nothing when none were held). */
void log_limit_flush(LogLimit *l, const char *what);

/* Parses "debug"/"info"/"warn"/"error"; returns -1 for anything else. */
int  log_level_parse(const char *s);

#define log_debug(...) do { if (log_enabled(LL_DEBUG)) log_msg(LL_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...)  do { if (log_enabled(LL_INFO))  log_msg(LL_INFO,  __VA_ARGS__); } while (0)
#define log_warn(...)  log_msg(LL_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LL_ERROR, __VA_ARGS__)

#endif
