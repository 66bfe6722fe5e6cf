/* common/reward/math_dapo.h: the DAPO rule-based math reward, bit-exact with `compute_score` of
 * eval/math_dapo.py in BytedTsinghua-SIA/DAPO (commit 33fe317), whose behaviour
 * tests/data/verifier/README.md (a copy of the verifier test data's README) writes down rule by rule:
 *   - default mode: last `Answer\s*:\s*([^\n]+)` (case-insensitive) of the last 300 code points, both sides
 *     through the Minerva normalizer, exact comparison;
 *   - strict-box mode: content of the last complete `\boxed{}` of the last 100 code points, exact comparison
 *     with the raw ground truth (the DAPO variant: no box -> pred null, never correct; verl at
 *     commit 012542c returns "[INVALID]" there, verl 0.8.0 behaves as DAPO).
 * Everything works on UTF-8 bytes that are first repaired the way Python's bytes.decode("utf-8",
 * errors="replace") does (one U+FFFD per maximal invalid subpart); since every pattern of the reference is
 * ASCII except the whitespace class and str.isdigit(), byte-level replacement equals Python's code-point
 * replacement on the repaired text. Every step is a linear scan (no regex engine, no backtracking), so
 * the work is O(len(ground_truth) + 1200) whatever the solution length: only the solution's last 1200
 * bytes can hold its last 300 code points.
 * Pure functions, no I/O, no global state; a workspace (MathDapoWs) holds the scratch buffers so the hot
 * path does not allocate once the buffers have grown. One workspace per thread.
 * Not here: the data_source table (reward.h), the overlong penalty (dapo/overlong.h), JSON. */
#ifndef DAPO_MATH_DAPO_H
#define DAPO_MATH_DAPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* Window sizes of the reference (code points). */
#define MATH_DAPO_WINDOW       300     /* compute_score: solution_str[-300:] */
#define MATH_DAPO_STRICT_WINDOW 100    /* is_correct_strict_box: pred[-100:] */

typedef struct MathDapoWs MathDapoWs;  /* opaque scratch: growable byte buffers */

/* A new workspace (xmalloc, counted). Never NULL (xmalloc aborts on OOM). Free with math_dapo_ws_free. */
MathDapoWs *math_dapo_ws_new(void);
/* NULL-safe. Invalidates every pred pointer borrowed from ws. */
void math_dapo_ws_free(MathDapoWs *ws);

typedef struct {
    double      score;      /* +1.0 when acc, else -1.0 (also -1.0 on any error) */
    bool        acc;        /* pred == normalized ground truth (strict: == raw ground truth) */
    bool        has_pred;   /* false only in strict mode when no complete last box (reference: None) */
    const char *pred;       /* UTF-8 (valid), pred_len bytes, NUL-terminated for convenience but may hold
                             * U+0000 inside. BORROWED from the workspace: valid until the next call that
                             * uses the same ws. NULL when !has_pred. */
    size_t      pred_len;   /* bytes */
} MathDapoResult;

/* Monotonic clock (CLOCK_MONOTONIC) in nanoseconds; deadlines below are absolute values of it. */
int64_t math_dapo_now_ns(void);

/* Scores one response, as compute_score(solution, ground_truth, strict_box) of the reference.
 * sol: sol_len bytes, gt: gt_len bytes, any bytes (invalid UTF-8 is repaired, NULs are ordinary code points);
 * NULL is allowed when the length is 0. deadline_ns: absolute math_dapo_now_ns() value, or 0 for none;
 * checked on entry and between the linear normalization steps of long inputs (cooperative).
 * Returns 0 and fills *out; on error fills *out with score -1, acc false, has_pred false and returns
 * ERR_TIMEOUT (err = "timeout") or ERR_INVAL (NULL pointer with a non-zero length). Never crashes, never
 * aborts on input; memory used is O(gt_len): at most ~9x gt_len bytes of scratch (3x for the repaired
 * text, 6x for the other ping-pong buffer), kept in ws and released on the next call when over 4 MiB.
 * Ground truths over 64 MiB are refused with ERR_TOO_BIG (the solution has no limit: only its tail is read). */
int math_dapo_score(MathDapoWs *ws, const char *sol, size_t sol_len, const char *gt, size_t gt_len,
                    bool strict_box, int64_t deadline_ns, MathDapoResult *out, char err[ERR_LEN]);

/* normalize_final_answer() of the reference (README §3: equals split, substitutions, deletions, $..$,
 * \text{} \textbf{} \overline{} \boxed{} unwrapping, frac/sqrt shorthand, $ removal, integer commas,
 * strip). in: n bytes, repaired as UTF-8 first. *out (BORROWED from ws, valid until the next call using ws;
 * NUL-terminated; *out_len bytes). Returns 0, ERR_TIMEOUT (deadline_ns passed, see above), ERR_TOO_BIG
 * (n over 64 MiB) or ERR_INVAL. */
int math_dapo_normalize(MathDapoWs *ws, const char *in, size_t n, int64_t deadline_ns,
                        const char **out, size_t *out_len, char err[ERR_LEN]);

/* The capture of the last match of `(?i)Answer\s*:\s*([^\n]+)` (Python `re` semantics, README §2) in
 * s[0..n), which must be valid UTF-8 (e.g. from math_dapo_utf8_repair). The window is NOT applied here.
 * Returns true and sets [*off, *off + *len) (bytes into s) when there is a match, false otherwise. */
bool math_dapo_answer_find(const char *s, size_t n, size_t *off, size_t *len);

/* last_boxed_only_string() + remove_boxed() of the reference on s[0..n) (valid UTF-8; window NOT applied):
 * true and the content [*off, *off + *len) of the last `\boxed{` when its braces close, false otherwise. */
bool math_dapo_boxed_last(const char *s, size_t n, size_t *off, size_t *len);

/* Python's bytes.decode("utf-8", errors="replace") re-encoded as UTF-8 (CPython's decoder: one U+FFFD per
 * maximal subpart of an ill-formed sequence, surrogates and overlongs rejected). out must hold 3 * n bytes
 * (each bad byte may become EF BF BD); returns the bytes written. Idempotent on valid UTF-8. */
size_t math_dapo_utf8_repair(const char *in, size_t n, char *out);

/* Python str.isspace() / re `\s` on str (the 29 code points of README "Character classes"). */
bool math_dapo_is_space(uint32_t cp);
/* Python str.isdigit() for one code point (Unicode 14.0 Numeric_Type Decimal or Digit, as CPython 3.11). */
bool math_dapo_is_digit(uint32_t cp);

#endif
