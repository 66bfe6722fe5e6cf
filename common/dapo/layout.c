/* common/dapo/layout.c: mini-batch cut, equal-count token-balanced sharding, micro-batch split (layout.h).
 * Deterministic: every tie is broken by index, so the coordinator and a test get the same layout.
 * Not here: anything about the messages that carry shards. */
#include "dapo/layout.h"

#include <stdlib.h>
#include <string.h>

/* Sort key for "largest first, then lower index first". */
typedef struct { long long w; int i; } WIdx;

static int widx_cmp(const void *a, const void *b) {
    const WIdx *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void layout_free(Layout *l) {
    if (!l) return;
    xfree(l->shard);
    xfree(l->pool);
    memset(l, 0, sizeof *l);
}

int layout_build(const int *group_size, int n_groups, const int *resp_tokens, const int *cost_tokens,
                 int mini_groups, int world, Layout *out, char err[ERR_LEN]) {
    if (!out) return err_set(err, ERR_INVAL, "layout_build: NULL out");
    memset(out, 0, sizeof *out);
    if (n_groups < 0 || mini_groups < 1 || world < 1 || (n_groups > 0 && (!group_size || !resp_tokens)))
        return err_set(err, ERR_INVAL, "layout_build: bad arguments (groups %d, mini-batch %d groups, world %d)",
                       n_groups, mini_groups, world);
    long long n_seq = 0;
    for (int g = 0; g < n_groups; g++) {
        if (group_size[g] < 1) return err_set(err, ERR_INVAL, "layout_build: group %d has size %d", g, group_size[g]);
        n_seq += group_size[g];
        if (n_seq > 1 << 30) return err_set(err, ERR_INVAL, "layout_build: too many sequences");
    }
    for (long long i = 0; i < n_seq; i++)
        if (resp_tokens[i] < 0 || (cost_tokens && cost_tokens[i] < 0))
            return err_set(err, ERR_INVAL, "layout_build: negative token count for sequence %lld", i);
    const int n_mini = (n_groups + mini_groups - 1) / mini_groups;
    /* Check divisibility of every mini-batch before allocating anything. */
    for (int m = 0, g0 = 0; m < n_mini; m++, g0 += mini_groups) {
        int g1 = g0 + mini_groups < n_groups ? g0 + mini_groups : n_groups, cnt = 0;
        for (int g = g0; g < g1; g++) cnt += group_size[g];
        if (cnt % world)
            return err_set(err, ERR_INVAL, "mini-batch %d holds %d sequences, not divisible by %d learner ranks "
                           "(ppo_mini_batch_size x rollout.n must be a multiple of the number of learners)",
                           m, cnt, world);
    }
    out->n_mini = n_mini;
    out->world = world;
    out->shard = xcalloc((size_t)n_mini * world + 1, sizeof *out->shard);
    out->pool = xmalloc(((size_t)n_seq + 1) * sizeof *out->pool);
    WIdx *order = xmalloc(((size_t)n_seq + 1) * sizeof *order);
    int s0 = 0, pool_at = 0;
    for (int m = 0, g0 = 0; m < n_mini; m++, g0 += mini_groups) {
        int g1 = g0 + mini_groups < n_groups ? g0 + mini_groups : n_groups, cnt = 0;
        for (int g = g0; g < g1; g++) cnt += group_size[g];
        long long gtok = 0;
        for (int i = 0; i < cnt; i++) {
            int s = s0 + i;
            gtok += resp_tokens[s];
            order[i].w = cost_tokens ? cost_tokens[s] : resp_tokens[s];
            order[i].i = s;
        }
        qsort(order, (size_t)cnt, sizeof *order, widx_cmp);
        const int per = cnt / world;
        LayoutShard *sh = out->shard + (size_t)m * world;
        for (int r = 0; r < world; r++) {
            sh[r].mini = m;
            sh[r].rank = r;
            sh[r].seq = out->pool + pool_at + r * per;
            sh[r].global_tokens = gtok;
            sh[r].global_seqs = cnt;
        }
        for (int i = 0; i < cnt; i++) {
            int best = -1;
            for (int r = 0; r < world; r++)
                if (sh[r].n_seq < per && (best < 0 || sh[r].cost < sh[best].cost)) best = r;
            int s = order[i].i;
            sh[best].seq[sh[best].n_seq++] = s;
            sh[best].cost += order[i].w;
            sh[best].tokens += resp_tokens[s];
        }
        for (int r = 0; r < world; r++) qsort(sh[r].seq, (size_t)sh[r].n_seq, sizeof(int), int_cmp);
        pool_at += cnt;
        s0 += cnt;
    }
    xfree(order);
    return 0;
}

void layout_micro_free(LayoutMicro *m) {
    if (!m) return;
    xfree(m->off);
    xfree(m->idx);
    memset(m, 0, sizeof *m);
}

int layout_micro_fixed(int n, int micro_bsz, LayoutMicro *out, char err[ERR_LEN]) {
    if (!out) return err_set(err, ERR_INVAL, "layout_micro_fixed: NULL out");
    memset(out, 0, sizeof *out);
    if (n < 0 || micro_bsz < 1)
        return err_set(err, ERR_INVAL, "layout_micro_fixed: n %d, micro batch size %d (must be >= 1)", n, micro_bsz);
    int k = (n + micro_bsz - 1) / micro_bsz;
    out->n_micro = k;
    out->off = xmalloc(((size_t)k + 1) * sizeof(int));
    out->idx = xmalloc(((size_t)n + 1) * sizeof(int));
    for (int j = 0; j <= k; j++) out->off[j] = j * micro_bsz < n ? j * micro_bsz : n;
    for (int i = 0; i < n; i++) out->idx[i] = i;
    return 0;
}

typedef struct { int first; int start; } MicroOrder;

static int micro_order_cmp(const void *a, const void *b) {
    const MicroOrder *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

/* Largest-first into the lightest bin (ties: lower bin). Returns the heaviest bin's load. */
static long long pack_bins(const WIdx *order, int n, int k, long long *load, int *bin_of) {
    for (int b = 0; b < k; b++) load[b] = 0;
    for (int i = 0; i < n; i++) {
        int best = 0;
        for (int b = 1; b < k; b++)
            if (load[b] < load[best]) best = b;
        load[best] += order[i].w;
        bin_of[order[i].i] = best;
    }
    long long mx = 0;
    for (int b = 0; b < k; b++) if (load[b] > mx) mx = load[b];
    return mx;
}

int layout_micro_dynamic(const int *tokens, int n, int max_tokens, LayoutMicro *out, char err[ERR_LEN]) {
    if (!out) return err_set(err, ERR_INVAL, "layout_micro_dynamic: NULL out");
    memset(out, 0, sizeof *out);
    if (n < 0 || max_tokens < 1 || (n > 0 && !tokens))
        return err_set(err, ERR_INVAL, "layout_micro_dynamic: n %d, max tokens %d", n, max_tokens);
    long long total = 0;
    for (int i = 0; i < n; i++) {
        if (tokens[i] < 0) return err_set(err, ERR_INVAL, "layout_micro_dynamic: sequence %d has %d tokens", i, tokens[i]);
        if (tokens[i] > max_tokens)
            return err_set(err, ERR_INVAL, "sequence %d has %d tokens, more than ppo_max_token_len_per_gpu = %d",
                           i, tokens[i], max_tokens);
        total += tokens[i];
    }
    if (n == 0) {
        out->off = xcalloc(1, sizeof(int));
        out->idx = xcalloc(1, sizeof(int));
        return 0;
    }
    WIdx *order = xmalloc((size_t)n * sizeof *order);
    for (int i = 0; i < n; i++) { order[i].w = tokens[i]; order[i].i = i; }
    qsort(order, (size_t)n, sizeof *order, widx_cmp);
    long long *load = xmalloc((size_t)n * sizeof *load);
    int *bin_of = xmalloc((size_t)n * sizeof *bin_of);
    int k = (int)((total + max_tokens - 1) / max_tokens);
    if (k < 1) k = 1;
    if (k > n) k = n;
    /* The fewest micro-batches LPT can fit under the cap: try k, k+1, ... a few times (the usual case ends
     * here), then binary-search up to n (n always fits: one sequence each). */
    int steps = 0;
    while (pack_bins(order, n, k, load, bin_of) > max_tokens && k < n && ++steps < 8) k++;
    if (steps == 8 && pack_bins(order, n, k, load, bin_of) > max_tokens) {
        int lo = k, hi = n;   /* lo fails, hi fits */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (pack_bins(order, n, mid, load, bin_of) > max_tokens) lo = mid; else hi = mid;
        }
        k = hi;
        pack_bins(order, n, k, load, bin_of);
    }
    /* Bins -> micro-batches ordered by their first sequence; sequences ascending inside. */
    int *cnt = xcalloc((size_t)k, sizeof *cnt);
    for (int i = 0; i < n; i++) cnt[bin_of[i]]++;
    MicroOrder *mo = xmalloc((size_t)k * sizeof *mo);
    int used = 0;
    for (int b = 0; b < k; b++) {
        if (!cnt[b]) continue;
        mo[used].first = n;
        for (int i = 0; i < n; i++) if (bin_of[i] == b) { mo[used].first = i; break; }
        mo[used].start = b;   /* bin id, reused as a tag */
        used++;
    }
    qsort(mo, (size_t)used, sizeof *mo, micro_order_cmp);
    out->n_micro = used;
    out->off = xmalloc(((size_t)used + 1) * sizeof(int));
    out->idx = xmalloc((size_t)n * sizeof(int));
    int at = 0;
    for (int j = 0; j < used; j++) {
        out->off[j] = at;
        for (int i = 0; i < n; i++) if (bin_of[i] == mo[j].start) out->idx[at++] = i;
    }
    out->off[used] = at;
    xfree(order); xfree(load); xfree(bin_of); xfree(cnt); xfree(mo);
    return 0;
}
