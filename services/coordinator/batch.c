/* services/coordinator/batch.c: the training batch of a step, built as a plan before it is sent (batch.h). */
#include "batch.h"

#include <math.h>
#include <string.h>

#include "dapo/advantages.h"
#include "dapo/overlong.h"
#include "settings/settings.h"

/* The policy version that generated response r of group g: its own (rollouts set it), or the group's (the oldest of
 * its responses) where a sender left it out. */
static int64_t behaviour_version(const Group *g, const Dapo__Response *r) {
    return r->policy_version > g->version ? r->policy_version : g->version;
}

/* r's tokens came from more than one policy version (a sequence continued across a weight swap). */
static int spans_versions(const Dapo__Response *r) {
    for (size_t k = 1; k < r->n_token_versions && k < r->n_token_ids; k++)
        if (r->token_versions[k] != r->token_versions[0]) return 1;
    return 0;
}

/* slime's mask-offpolicy-in-partial-rollout: the tokens of r sampled before its last weight swap (a prefix: versions
 * only grow along a response), 0 when one version made it all. */
static uint32_t sampled_before_swap(const Dapo__Response *r) {
    size_t n = r->n_token_versions < r->n_token_ids ? r->n_token_versions : r->n_token_ids, k = 0;
    if (!n) return 0;
    while (k < n && r->token_versions[k] != r->token_versions[n - 1]) k++;
    return (uint32_t)k;
}

/* steps 5 and the token counts: over the shards in order (the first epoch's pass of the old send loop) */
static void plan_totals(BatchPlan *p) {
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    long long n = 0;
    p->batch_tokens = 0;
    for (int k = 0; k < p->lay.n_mini * p->world; k++) {
        const LayoutShard *sh = &p->lay.shard[k];
        long long t = 0;
        for (int j = 0; j < sh->n_seq; j++) {
            const TbwSeq *r = &p->row[sh->seq[j]];
            t += r->n_prompt + (long long)r->n_resp;
            long long live = (long long)r->n_resp - (r->mask_prefix < r->n_resp ? r->mask_prefix : r->n_resp);
            if (r->mask != 0.0f && live > 0) {
                sum += (double)r->adv * (double)live;
                n += live;
                if (r->adv < mn) mn = r->adv;
                if (r->adv > mx) mx = r->adv;
            }
        }
        p->shard_tokens[k] = t;
        p->batch_tokens += t;
    }
    p->adv_mean = n ? sum / (double)n : 0;
    p->adv_min = n ? mn : 0;
    p->adv_max = n ? mx : 0;
}

int batch_plan_build(const Config *cfg, Group *const *batch, const DatasetItem *const *items, int nb, BatchPlan *p,
                     char err[ERR_LEN]) {
    memset(p, 0, sizeof *p);
    int n = cfg->rollout_n, nseq = nb * n;
    p->nseq = nseq;
    p->world = cfg->num_learners;
    int *gsize = xmalloc((size_t)(nb ? nb : 1) * sizeof(int));
    float *reward = xmalloc((size_t)(nseq ? nseq : 1) * sizeof(float));
    int *resp_tok = xmalloc((size_t)(nseq ? nseq : 1) * sizeof(int)), *cost = xmalloc((size_t)(nseq ? nseq : 1) * sizeof(int));
    p->adv = xmalloc((size_t)(nseq ? nseq : 1) * sizeof(float));
    p->row = xmalloc((size_t)(nseq ? nseq : 1) * sizeof *p->row);
    for (int b = 0, s = 0; b < nb; b++) {
        gsize[b] = batch[b]->n;
        for (int i = 0; i < batch[b]->n; i++, s++) {
            const Dapo__Response *r = batch[b]->result->responses[i];
            reward[s] = batch[b]->score[i];
            int masked = overlong_filter_masked(cfg->overlong_filtering, r->finish_reason);
            uint32_t older = cfg->mask_offpolicy_partial ? sampled_before_swap(r) : 0;
            resp_tok[s] = masked ? 0 : (int)(r->n_token_ids - older);
            cost[s] = items[b]->n_ids + (int)r->n_token_ids;
            p->row[s] = (TbwSeq){.prompt = items[b]->ids, .n_prompt = (uint32_t)items[b]->n_ids,
                                 .resp = r->token_ids, .n_resp = (uint32_t)r->n_token_ids,
                                 .logprobs = r->logprobs, .n_logprobs = (uint32_t)r->n_logprobs,
                                 .mask = masked && r->n_token_ids ? 0.0f : 1.0f, .group_id = batch[b]->id,
                                 .behaviour_version = behaviour_version(batch[b], r)};
            p->row[s].mask_prefix = older;
            if (spans_versions(r))                   /* partial rollouts: each token's own version to the learner */
                p->row[s].token_versions = r->token_versions, p->row[s].n_token_versions = (uint32_t)r->n_token_ids;
        }
    }
    int rc = adv_compute(settings_adv_estimator(cfg), reward, resp_tok, gsize, nb, cfg->norm_adv_by_std_in_grpo,
                         ADV_GRPO_EPS, p->adv, err);
    if (!rc) rc = layout_build(gsize, nb, resp_tok, cost, cfg->ppo_mini_batch_size, cfg->num_learners, &p->lay, err);
    xfree(gsize); xfree(resp_tok); xfree(cost);
    if (rc) {
        xfree(reward);
        batch_plan_free(p);
        return rc;
    }
    for (int s = 0; s < nseq; s++) {
        p->row[s].adv = p->adv[s];
        p->row[s].score = reward[s];
    }
    xfree(reward);
    p->shard_tokens = xcalloc((size_t)(p->lay.n_mini * p->world > 0 ? p->lay.n_mini * p->world : 1), sizeof(long long));
    plan_totals(p);
    return 0;
}

void batch_plan_free(BatchPlan *p) {
    if (!p) return;
    layout_free(&p->lay);
    xfree(p->adv);
    xfree(p->row);
    xfree(p->shard_tokens);
    memset(p, 0, sizeof *p);
}

void batch_plan_shard_rows(const BatchPlan *p, int k, TbwSeq *out) {
    const LayoutShard *sh = &p->lay.shard[k];
    for (int j = 0; j < sh->n_seq; j++) out[j] = p->row[sh->seq[j]];
}
