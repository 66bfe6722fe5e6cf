/* services/learner/klreward.c: the KL penalty in the reward and the learner's own advantages (see klreward.h). */
#include "klreward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "learner.h"
#include "settings/settings.h"

enum { REC = 6 };   /* a response's record: group id in three 22-bit pieces, penalised score, counted tokens, mean KL */

void klreward_init(KlReward *k, const Config *cfg) {
    memset(k, 0, sizeof *k);
    k->est = settings_adv_estimator(cfg);
    k->gamma = cfg->gamma;
    k->use_kl = cfg->use_kl_in_reward;
    k->on = k->use_kl || (k->est == ADV_REINFORCE_PP && cfg->gamma != 1.0);
    k->kl = settings_kl_penalty(cfg->kl_penalty);
    k->adaptive = cfg->kl_ctrl_type == CFG_KL_CTRL_ADAPTIVE;
    k->value = cfg->kl_ctrl_coef;
    k->target = cfg->kl_ctrl_target;
    k->horizon = cfg->kl_ctrl_horizon;
    k->norm_by_std = cfg->norm_adv_by_std_in_grpo;
}

void klreward_restore(KlReward *k, double value) {
    if (value > 0 && k->use_kl && k->adaptive) k->value = value;   /* fixed: kl_ctrl.kl_coef as configured now */
}

void klreward_free_step(KlReward *k) {
    for (int i = 0; i < k->n_adv; i++) xfree(k->adv ? k->adv[i] : NULL);
    xfree(k->adv);
    k->adv = NULL;
    k->n_adv = 0;
}

/* Every rank's k doubles (exactly: each as a float pair in its own slots, the others 0) into all[W * k]. */
static int gather_doubles(Learner *L, const double *mine, int k, double *all, char err[ERR_LEN]) {
    int W = L->world;
    if (!L->coll || W == 1) { memcpy(all, mine, (size_t)k * sizeof(double)); return 0; }
    float *x = xcalloc((size_t)2 * k * W, sizeof(float));
    for (int i = 0; i < k; i++) {
        x[2 * (L->rank * k + i)] = (float)mine[i];
        x[2 * (L->rank * k + i) + 1] = (float)(mine[i] - (double)(float)mine[i]);
    }
    int rc = coll_allreduce_sum(L->coll, x, 2L * k * W, err) ? ERR_COLLECTIVE : 0;
    for (int i = 0; i < k * W; i++) all[i] = (double)x[2 * i] + (double)x[2 * i + 1];
    xfree(x);
    return rc;
}

/* The KL per counted token of sequence (k, i) into kld[n] (0 on masked tokens, all 0 without use_kl); its sum. */
static float seq_kld(const Learner *L, int k, const Dapo__TrainBatch *tb, long rs, int n, float *kld, int *cnt) {
    float sum = 0.0f;
    *cnt = 0;
    for (int t = 0; t < n; t++) {
        int m = tb->response_mask[rs + t] > 0.5f;
        kld[t] = m && L->klr.use_kl ? kl_penalty_eval(L->klr.kl, L->old_lp[k][rs + t], L->ref_lp[k][rs + t], NULL) : 0;
        sum += kld[t];
        *cnt += m;
    }
    return sum;
}

/* This rank's records (REC floats per response, mini-batch order) into rec; the number of responses. */
static int local_records(const Learner *L, Dapo__TrainBatch *const *mb, int nm, float *rec, float *scratch) {
    int s = 0;
    for (int k = 0; k < nm; k++) {
        const Dapo__TrainBatch *tb = mb[k];
        long rs = 0;
        for (size_t i = 0; i + 1 < tb->n_offsets; i++, s++) {
            int n = (int)(tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i]), cnt;
            float sum = seq_kld(L, k, tb, rs, n, scratch, &cnt);
            uint64_t g = tb->group_ids[i];
            float *r = rec + (size_t)s * REC;
            r[0] = (float)(g & 0x3fffff);
            r[1] = (float)((g >> 22) & 0x3fffff);
            r[2] = (float)(g >> 44);
            r[3] = tb->scores[i] - (float)L->klr.beta * sum;       /* token_level_rewards.sum(-1) */
            r[4] = (float)cnt;
            r[5] = sum / ((float)cnt + 1e-8f);                     /* masked_mean(kld, mask, axis=-1) */
            rs += n;
        }
    }
    return s;
}

static uint64_t rec_gid(const float *r) {
    return (uint64_t)r[0] | (uint64_t)r[1] << 22 | (uint64_t)r[2] << 44;
}

static const float *g_recs;   /* qsort's records (one sort at a time: the learner is single-threaded here) */
static int by_group(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    uint64_t gi = rec_gid(g_recs + (size_t)i * REC), gj = rec_gid(g_recs + (size_t)j * REC);
    return gi < gj ? -1 : gi > gj ? 1 : (i > j) - (i < j);    /* stable: gathered (rank) order within a group */
}

/* The outcome estimators over the gathered records all[n]; adv_seq[n] in the gathered order. */
static int outcome_advantages(const KlReward *k, const float *all, int n, float *adv_seq, char err[ERR_LEN]) {
    int *ord = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int)), *gs = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    int *tok = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(int)), ng = 0;
    float *r = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float)), *a = xmalloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int i = 0; i < n; i++) ord[i] = i;
    g_recs = all;
    qsort(ord, (size_t)n, sizeof(int), by_group);
    for (int i = 0; i < n; i++) {
        const float *x = all + (size_t)ord[i] * REC;
        if (i == 0 || rec_gid(x) != rec_gid(all + (size_t)ord[i - 1] * REC)) gs[ng++] = 0;
        gs[ng - 1]++;
        r[i] = x[3];
        tok[i] = (int)x[4];
    }
    int rc = adv_compute(k->est, r, tok, gs, ng, k->norm_by_std, ADV_GRPO_EPS, a, err);
    for (int i = 0; !rc && i < n; i++) adv_seq[ord[i]] = a[i];
    xfree(ord); xfree(gs); xfree(tok); xfree(r); xfree(a);
    return rc;
}

/* reinforce_plus_plus: this rank's returns (adv_rfpp_returns) into k->adv, then whitened with the batch's counted-token
 * mean and unbiased variance, each summed over the ranks (verl_F.masked_whiten). */
static int token_advantages(Learner *L, Dapo__TrainBatch *const *mb, int nm, float *scratch, char err[ERR_LEN]) {
    KlReward *k = &L->klr;
    double mine[2] = {0, 0}, *all = xmalloc((size_t)2 * L->world * sizeof(double));
    uint8_t *m = xmalloc((size_t)model_max_tokens(L->m) + 1);
    for (int kk = 0; kk < nm; kk++) {
        const Dapo__TrainBatch *tb = mb[kk];
        long rs = 0;
        for (size_t i = 0; i + 1 < tb->n_offsets; i++) {
            int n = (int)(tb->offsets[i + 1] - tb->offsets[i] - tb->prompt_lengths[i]), cnt;
            seq_kld(L, kk, tb, rs, n, scratch, &cnt);
            for (int t = 0; t < n; t++) {
                m[t] = tb->response_mask[rs + t] > 0.5f;
                scratch[t] = (t == n - 1 ? tb->scores[i] : 0.0f) - (float)k->beta * scratch[t];   /* token rewards */
            }
            adv_rfpp_returns(scratch, m, n, k->gamma, k->adv[kk] + rs);
            for (int t = 0; t < n; t++) { mine[0] += m[t] ? k->adv[kk][rs + t] : 0.0; mine[1] += m[t]; }
            rs += n;
        }
    }
    double S = 0, N = 0, V = 0, vmine;
    int rc = gather_doubles(L, mine, 2, all, err);
    for (int r = 0; !rc && r < L->world; r++) { S += all[2 * r]; N += all[2 * r + 1]; }
    if (!rc && N < 2) rc = err_set(err, ERR_INVAL, "reinforce_plus_plus: whitening needs at least two response tokens "
                                   "in the batch (it has %.0f)", N);
    double mean = S / (N + 1e-8);
    vmine = 0;
    for (int kk = 0; !rc && kk < nm; kk++)
        for (long t = 0; t < L->old_n[kk]; t++)
            if (mb[kk]->response_mask[t] > 0.5f) vmine += (k->adv[kk][t] - mean) * (k->adv[kk][t] - mean);
    if (!rc) rc = gather_doubles(L, &vmine, 1, all, err);
    for (int r = 0; !rc && r < L->world; r++) V += all[r];
    double var = V / (N + 1e-8) * (N / (N - 1)), inv = 1.0 / sqrt(var + 1e-8);
    for (int kk = 0; !rc && kk < nm; kk++)
        for (long t = 0; t < L->old_n[kk]; t++)
            k->adv[kk][t] = mb[kk]->response_mask[t] > 0.5f ? (float)((k->adv[kk][t] - mean) * inv) : 0.0f;
    xfree(all);
    xfree(m);
    return rc;
}

/* Every rank's records gathered into *all (compacted, rank order); *first: this rank's first. Returns the count, or
 * < 0 (err set) when a collective failed. */
static int gather_records(Learner *L, const float *rec, int n, float **all, int *first, char err[ERR_LEN]) {
    int W = L->world;
    double mine = n, *cnt = xmalloc((size_t)W * sizeof(double));
    int rc = gather_doubles(L, &mine, 1, cnt, err), cap = 0, total = 0;
    *first = 0;
    for (int r = 0; r < W; r++) {
        if ((int)cnt[r] > cap) cap = (int)cnt[r];
        if (r < L->rank) *first += (int)cnt[r];
        total += (int)cnt[r];
    }
    float *buf = xcalloc((size_t)(W * cap > 0 ? W * cap : 1) * REC, sizeof(float));
    memcpy(buf + (size_t)L->rank * cap * REC, rec, (size_t)n * REC * sizeof(float));
    if (!rc && L->coll && W > 1 && coll_allgather(L->coll, buf, (long)cap * REC, err)) rc = ERR_COLLECTIVE;
    *all = xmalloc((size_t)(total > 0 ? total : 1) * REC * sizeof(float));
    for (int r = 0, o = 0; !rc && r < W; o += (int)cnt[r], r++)
        memcpy(*all + (size_t)o * REC, buf + (size_t)r * cap * REC, (size_t)cnt[r] * REC * sizeof(float));
    xfree(buf);
    xfree(cnt);
    return rc ? rc : total;
}

/* critic/advantages/mean|max|min over the batch's counted tokens (this rank's, then every rank's) */
static int adv_stats(Learner *L, Dapo__TrainBatch *const *mb, int nm, char err[ERR_LEN]) {
    KlReward *k = &L->klr;
    double mine[4] = {0, 0, -INFINITY, INFINITY}, *all = xmalloc((size_t)4 * L->world * sizeof(double));
    for (int kk = 0; kk < nm; kk++)
        for (long t = 0; t < L->old_n[kk]; t++) {
            if (!(mb[kk]->response_mask[t] > 0.5f)) continue;
            double a = k->adv[kk][t];
            mine[0] += a;
            mine[1] += 1;
            mine[2] = fmax(mine[2], a);
            mine[3] = fmin(mine[3], a);
        }
    if (!mine[1]) mine[2] = mine[3] = 0;              /* no counted token: nothing to report (the pieces stay finite) */
    int rc = gather_doubles(L, mine, 4, all, err);
    double s = 0, n = 0, mx = -INFINITY, mn = INFINITY;
    for (int r = 0; r < L->world; r++) {
        s += all[4 * r];
        n += all[4 * r + 1];
        if (all[4 * r + 1] > 0) { mx = fmax(mx, all[4 * r + 2]); mn = fmin(mn, all[4 * r + 3]); }
    }
    k->adv_mean = n > 0 ? s / n : 0;
    k->adv_max = n > 0 ? mx : 0;
    k->adv_min = n > 0 ? mn : 0;
    xfree(all);
    return rc;
}

int klreward_step(Learner *L, Dapo__TrainBatch *const *mb, int nm, char err[ERR_LEN]) {
    KlReward *k = &L->klr;
    klreward_free_step(k);
    k->beta = k->use_kl ? k->value : 0.0;
    int S = 0;
    for (int kk = 0; kk < nm; kk++) {
        if (mb[kk]->n_scores != mb[kk]->n_offsets - 1)
            return err_set(err, ERR_INVAL, "train batch: %zu scores for %zu sequences (the coordinator sends each "
                           "response's reward with algorithm.use_kl_in_reward; is it an older build?)", mb[kk]->n_scores,
                           mb[kk]->n_offsets - 1);
        S += (int)mb[kk]->n_offsets - 1;
    }
    k->adv = xcalloc((size_t)nm, sizeof *k->adv);
    k->n_adv = nm;
    for (int kk = 0; kk < nm; kk++) k->adv[kk] = xcalloc((size_t)(L->old_n[kk] > 0 ? L->old_n[kk] : 1), sizeof(float));
    float *rec = xmalloc((size_t)(S > 0 ? S : 1) * REC * sizeof(float));
    float *scratch = xmalloc((size_t)model_max_tokens(L->m) * sizeof(float)), *all = NULL;
    local_records(L, mb, nm, rec, scratch);
    int first = 0, rc = 0, total = gather_records(L, rec, S, &all, &first, err);
    if (total < 0) rc = total;
    double kl = 0, rw = 0;
    for (int i = 0; i < total; i++) { kl += all[(size_t)i * REC + 5]; rw += all[(size_t)i * REC + 3]; }
    k->current_kl = total > 0 ? kl / total : 0;
    k->rewards_mean = total > 0 ? rw / total : 0;
    if (!rc && k->est == ADV_REINFORCE_PP) {
        rc = token_advantages(L, mb, nm, scratch, err);
    } else if (!rc) {
        float *adv = xmalloc((size_t)(total > 0 ? total : 1) * sizeof(float));
        rc = outcome_advantages(k, all, total, adv, err);
        for (int kk = 0, s = first; !rc && kk < nm; kk++) {
            long rs = 0;
            for (size_t i = 0; i + 1 < mb[kk]->n_offsets; i++, s++) {
                long n = (long)(mb[kk]->offsets[i + 1] - mb[kk]->offsets[i] - mb[kk]->prompt_lengths[i]);
                for (long t = rs; t < rs + n; t++) k->adv[kk][t] = mb[kk]->response_mask[t] > 0.5f ? adv[s] : 0.0f;
                rs += n;
            }
        }
        xfree(adv);
    }
    if (!rc) rc = adv_stats(L, mb, nm, err);
    if (!rc && k->use_kl && k->adaptive) {           /* verl's AdaptiveKLController.update(current_kl, n_steps = bsz) */
        double e = k->current_kl / k->target - 1.0;
        e = e < -0.2 ? -0.2 : e > 0.2 ? 0.2 : e;
        k->value *= 1.0 + e * total / k->horizon;
        if (!(k->value > 0 && isfinite(k->value)))    /* config_validate keeps the multiplier positive */
            rc = err_set(err, ERR_INVAL, "algorithm.kl_ctrl: the adaptive coefficient left (0, inf): %g", k->value);
    }
    xfree(rec);
    xfree(scratch);
    xfree(all);
    return rc;
}

void klreward_metrics(const KlReward *k, Metrics *ms) {
    if (!k->on) return;
    if (k->use_kl) {
        metrics_set(ms, "actor/reward_kl_penalty", k->current_kl);
        metrics_set(ms, "actor/reward_kl_penalty_coeff", k->beta);
    }
    metrics_set(ms, "critic/rewards/mean", k->rewards_mean);
    metrics_set(ms, "critic/advantages/mean", k->adv_mean);
    metrics_set(ms, "critic/advantages/max", k->adv_max);
    metrics_set(ms, "critic/advantages/min", k->adv_min);
}
