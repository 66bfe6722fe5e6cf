/* tests/fuzz/fuzz_math_dapo.c: libFuzzer target for the math_dapo scorer (common/reward/math_dapo.c).
 * Input layout: byte 0 = flags (bit 0: strict_box), byte 1 = how many of the trailing bytes are the ground
 * truth (0..255), the rest before it = the solution. Besides crashes/UB/leaks (ASan+UBSan), it checks
 * invariants: score is +-1 and agrees with acc, pred is valid UTF-8 (repair is the identity on it), pred is
 * NUL-terminated, the default mode always has a pred, and normalize / answer_find / boxed_last stay in bounds.
 * Not here: expected values (tests/unit/test_verifier_*.c). */
// fuzz-sources: common/reward/math_dapo.c common/reward/reward.c common/core/utf8.c common/core/err.c common/core/log.c
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward.h"

static RewardWs   *g_ws;
static MathDapoWs *g_mws;

static void check(int cond) {
    if (!cond) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_ws) g_ws = reward_ws_new(), g_mws = math_dapo_ws_new();
    if (size < 2) return 0;
    bool strict = data[0] & 1;
    size_t gn = data[1];
    const char *body = (const char *)data + 2;
    size_t bn = size - 2;
    if (gn > bn) gn = bn;
    const char *sol = body, *gt = body + (bn - gn);
    size_t sn = bn - gn;

    RewardResult r;
    int rc = reward_score(g_ws, "math_dapo", sol, sn, gt, gn, strict, 0, &r);
    check(rc == 0 && r.error == 0);
    check(r.score == (r.acc ? 1.0 : -1.0));
    check(strict || r.has_pred);
    if (r.has_pred) {
        check(r.pred != NULL && r.pred[r.pred_len] == '\0');
        char *fix = malloc(3 * r.pred_len + 1);
        check(fix != NULL);
        size_t fn = math_dapo_utf8_repair(r.pred, r.pred_len, fix);
        check(fn == r.pred_len && memcmp(fix, r.pred, fn) == 0);
        free(fix);
    }

    /* the lower-level pieces on the whole input, repaired */
    char *fixed = malloc(3 * bn + 1);
    check(fixed != NULL);
    size_t fn = math_dapo_utf8_repair(body, bn, fixed);
    size_t off, len;
    if (math_dapo_answer_find(fixed, fn, &off, &len)) check(off + len <= fn && len > 0);
    if (math_dapo_boxed_last(fixed, fn, &off, &len)) check(off >= 7 && off + len < fn && fixed[off + len] == '}');
    const char *out;
    size_t on;
    char err[ERR_LEN];
    check(math_dapo_normalize(g_mws, body, bn, 0, &out, &on, err) == 0);
    check(out[on] == '\0');
    free(fixed);
    return 0;
}
