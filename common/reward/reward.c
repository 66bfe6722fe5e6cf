/* common/reward/reward.c: the data_source -> scorer table and the per-item entry point (reward.h).
 * Not here: the scoring rules themselves (math_dapo.c). */
#include "reward/reward.h"

#include <string.h>

struct RewardWs {
    MathDapoWs *math;
};

RewardWs *reward_ws_new(void) {
    RewardWs *ws = xcalloc(1, sizeof *ws);
    ws->math = math_dapo_ws_new();
    return ws;
}

void reward_ws_free(RewardWs *ws) {
    if (!ws) return;
    math_dapo_ws_free(ws->math);
    xfree(ws);
}

static int score_math_dapo(RewardWs *ws, const char *resp, size_t resp_len, const char *gt, size_t gt_len,
                           bool strict_box, int64_t deadline_ns, RewardResult *out) {
    MathDapoResult r;
    out->err[0] = '\0';
    out->error = math_dapo_score(ws->math, resp, resp_len, gt, gt_len, strict_box, deadline_ns, &r, out->err);
    out->score = r.score;
    out->acc = r.acc;
    out->has_pred = r.has_pred;
    out->pred = r.pred;
    out->pred_len = r.pred_len;
    return out->error;
}

/* Sources of the repository's datasets (the JSONL files under data/: "math_dapo", "math500", "openai/gsm8k") and the
 * names verl uses for the same sets. GSM8K is scored with math_dapo here (issue 3), not verl's gsm8k.py. */
static const RewardScorer table[] = {
    { "math_dapo",              false, "math_dapo", score_math_dapo, false },
    { "math500",                false, "math_dapo", score_math_dapo, false },
    { "HuggingFaceH4/MATH-500", false, "math_dapo", score_math_dapo, false },
    { "lighteval/MATH",         false, "math_dapo", score_math_dapo, false },
    { "openai/gsm8k",           false, "math_dapo", score_math_dapo, false },
    { "gsm8k",                  false, "math_dapo", score_math_dapo, false },
    { "aime",                   true,  "math_dapo", score_math_dapo, false },   /* aime-2024, aime25, ... */
    { "AIME",                   true,  "math_dapo", score_math_dapo, false },
    { "",                       true,  "math_dapo", score_math_dapo, true  },   /* default: last */
};
#define NTABLE (sizeof table / sizeof table[0])

const RewardScorer *reward_scorer_find(const char *ds) {
    if (!ds) ds = "";
    for (size_t i = 0; i + 1 < NTABLE; i++) {
        const RewardScorer *e = &table[i];
        if (e->prefix ? strncmp(ds, e->data_source, strlen(e->data_source)) == 0 : strcmp(ds, e->data_source) == 0)
            return e;
    }
    return &table[NTABLE - 1];
}

const RewardScorer *reward_scorers(size_t *n) {
    if (n) *n = NTABLE;
    return table;
}

int reward_score(RewardWs *ws, const char *data_source, const char *resp, size_t resp_len, const char *gt,
                 size_t gt_len, bool strict_box, int64_t deadline_ns, RewardResult *out) {
    if (!out) return ERR_INVAL;
    memset(out, 0, sizeof *out);
    out->score = -1.0;
    if (!ws) {
        out->error = err_set(out->err, ERR_INVAL, "reward_score: NULL workspace");
        return out->error;
    }
    const RewardScorer *s = reward_scorer_find(data_source);
    return s->fn(ws, resp, resp_len, gt, gt_len, strict_box, deadline_ns, out);
}
