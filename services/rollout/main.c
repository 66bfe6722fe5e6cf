/* services/rollout/main.c: dapo-rollout — generates response groups for the coordinator (docs/design.md §1, issue 6).
 *
 *   dapo-rollout [--config FILE] [key.path=value ...] [--id NAME] [--load DIR] [--version V]
 *
 * Loads the policy from actor_rollout_ref.model.path (or --load DIR, e.g. a learner checkpoint directory) as
 * policy version 0 (or --version V), the tokenizer from data.tokenizer (default: the model directory),
 * and registers with the coordinator through the shared worker protocol: capacity = rollout.max_num_seqs
 * sequences (one credit per sequence: a GenerateGroup of n costs n), capacity_tokens = the KV cache in positions
 * (rollout.kv_cache_tokens; 0 = max_num_seqs x (max_prompt_length + max_response_length), at most 2^18).
 * Each GenerateGroup becomes n sequences of the engine (model/generate.h, sample index i = 0..n-1 keyed into
 * the RNG with the group's seed and id); the engine runs one bounded step (rollout.max_num_batched_tokens rows)
 * per loop turn, so heartbeats go on during long prefills. Credit comes back as each sequence finishes; the
 * GroupResult goes out as soon as the group's last sequence finishes (token ids, full-vocabulary log-probs,
 * finish reasons, text decoded with special tokens skipped, each response's policy_version = the weights that
 * generated it, the group's = the oldest of them). Cancel drops the group's sequences, frees their cache and returns the credit.
 * Weights: when the coordinator's version (Welcome/Heartbeat) is newer than ours, weights.c fetches it from
 * cluster.weights; once staged, no new sequence starts, running ones finish, then the weights are swapped,
 * WeightAck goes to the coordinator and heartbeats report the new version. Bad messages are answered with an
 * ErrorReply or a GroupResult carrying an error; the daemon never exits on them.
 * Prefix sharing (rollout.enable_prefix_caching, default true): the n sequences of a group copy their prompt's
 * K/V from the first one instead of computing it (model/generate.h); the engine's counters (prefill positions
 * computed vs shared) are logged once per policy version and at exit.
 * Threads: cluster.rollout_threads (0 = all cores) for OpenMP and OpenBLAS. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "settings/settings.h"
#include "core/threads_env.h"
#include "model/generate.h"
#include "model/probe.h"
#include "net/daemon.h"
#include "tokenizer/tokenizer.h"
#include "weights.h"

typedef struct {
    uint64_t  tag, group_id;
    uint32_t  attempt, n, got, credited;
    char     *run_id;
    int64_t   step;
    GenResult *res;            /* [n] by sample index */
    int64_t   *version;        /* [n] the oldest policy version of each sample's tokens (set when it finishes: without
                                  rollout.partial_rollout weights swap only while no sequence is in progress, so one
                                  version made all of it; with it, GenResult.versions has each token's) */
    double    t0;
} Group;

typedef struct {
    Daemon       d;
    Model       *m;
    Tokenizer   *tok;
    GenEngine   *eng;
    WeightFetch *wf;
    int64_t      version;
    uint32_t     weights_inc;  /* the run incarnation the loaded weights belong to */
    uint32_t     fetch_inc;    /* the run's incarnation when the last fetch began */
    int          refetch;      /* the run rolled back: load the coordinator's version whatever its number */
    Group      **g;
    int          ng, capg;
    uint64_t     next_tag;
    uint32_t     held;         /* sequences whose credit is out */
    int          paused;
    int          paused_session; /* the coordinator session (worker_sessions) that paused us: a pause ends with it
                                  * (a coordinator stopping pauses its workers; once it is back, the new session
                                  * dispatches again; issue 19's pod run found rollouts held paused for ever) */
    long         groups_done, tokens_done;
    GenStats     logged;       /* engine counters at the last log_engine_stats */
} Rollout;

static void group_free(Group *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n; i++) gen_result_free(&g->res[i]);
    xfree(g->res);
    xfree(g->version);
    xfree(g->run_id);
    xfree(g);
}

static void give_credit(Rollout *r, uint32_t n) {
    if (!n) return;
    r->held -= n < r->held ? n : r->held;
    worker_add_credit(r->d.worker, n);
}

static void send_error_result(Rollout *r, const Dapo__GenerateGroup *gg, const char *why) {
    Dapo__GroupResult res = DAPO__GROUP_RESULT__INIT;
    res.run_id = gg->run_id;
    res.step = gg->step;
    res.policy_version = r->version;
    res.group_id = gg->group_id;
    res.attempt = gg->attempt;
    res.error = (char *)why;
    int rc = worker_send(r->d.worker, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &res.base);
    if (rc) log_warn("error result for group %llu not sent: %s", (unsigned long long)gg->group_id, err_str(rc));
    log_warn("group %llu attempt %u refused: %s", (unsigned long long)gg->group_id, gg->attempt, why);
}

static int find_group(const Rollout *r, uint64_t id, uint32_t attempt) {
    for (int i = 0; i < r->ng; i++)
        if (r->g[i]->group_id == id && r->g[i]->attempt == attempt) return i;
    return -1;
}

static void drop_group(Rollout *r, int i) {
    group_free(r->g[i]);
    r->g[i] = r->g[--r->ng];
}

static void on_generate(Rollout *r, const Dapo__GenerateGroup *gg) {
    uint32_t n = gg->n;
    r->held += n;                        /* the coordinator took n credits for it */
    char why[ERR_LEN];
    if (find_group(r, gg->group_id, gg->attempt) >= 0) {
        log_warn("group %llu attempt %u is already being generated: duplicate dropped",
                 (unsigned long long)gg->group_id, gg->attempt);
        give_credit(r, n);
        return;
    }
    const Dapo__SamplingParams *sp = gg->sampling;
    const char *bad = n == 0 ? "n is 0" : n > 65536 ? "n above 65536" : !sp ? "no sampling parameters"
                    : sp->max_tokens == 0 ? "sampling.max_tokens is 0" : gg->n_prompt_token_ids == 0 ? "empty prompt"
                    : gg->n_prompt_token_ids > (1u << 24) ? "prompt too long"
                    : !(sp->top_p > 0 && sp->top_p <= 1) ? "sampling.top_p not in (0, 1]"
                    : !sp->greedy && !(sp->temperature > 0 && sp->temperature <= 100) ? "sampling.temperature not in "
                                                                                          "(0, 100] (sampled)" : NULL;
    if (bad) {
        send_error_result(r, gg, bad);
        give_credit(r, n);
        return;
    }
    Group *g = xcalloc(1, sizeof *g);
    g->tag = ++r->next_tag;
    g->group_id = gg->group_id;
    g->attempt = gg->attempt;
    g->n = n;
    g->run_id = xstrdup(gg->run_id ? gg->run_id : "");
    g->step = gg->step;
    g->res = xcalloc(n, sizeof(GenResult));
    g->version = xcalloc(n, sizeof(int64_t));
    g->t0 = clock_s();
    GenRequest q = {
        .tag = g->tag, .seed = gg->seed, .group_id = gg->group_id, .prompt = gg->prompt_token_ids,
        .n_prompt = (int)gg->n_prompt_token_ids, .max_tokens = (int)(sp->max_tokens > (1u << 30) ? 1u << 30 : sp->max_tokens),
        .sp = { .temperature = sp->temperature, .top_p = sp->top_p, .top_k = sp->top_k, .greedy = sp->greedy },
        .stop_ids = sp->stop_token_ids, .n_stop = (int)sp->n_stop_token_ids,
    };
    for (uint32_t i = 0; i < n; i++) {
        q.sample = i;
        int rc = gen_engine_add(r->eng, &q, NULL, why);
        if (rc) {
            gen_engine_cancel(r->eng, g->tag);
            send_error_result(r, gg, why);
            give_credit(r, n);
            group_free(g);
            return;
        }
    }
    XGROW(r->g, r->ng, r->capg, 16);
    r->g[r->ng++] = g;
    log_debug("group %llu attempt %u: %u x %zu-token prompt", (unsigned long long)g->group_id, g->attempt, n,
              gg->n_prompt_token_ids);
}

static void on_cancel(Rollout *r, const Dapo__Cancel *c) {
    for (size_t k = 0; k < c->n_items; k++) {
        int i = find_group(r, c->items[k]->item_id, c->items[k]->attempt);
        if (i < 0) continue;
        Group *g = r->g[i];
        int dropped = gen_engine_cancel(r->eng, g->tag);
        give_credit(r, g->n - g->credited);
        log_info("group %llu attempt %u cancelled (%d sequences dropped)%s%s", (unsigned long long)g->group_id,
                 g->attempt, dropped, c->reason && *c->reason ? ": " : "", c->reason ? c->reason : "");
        drop_group(r, i);
    }
}

static int on_work(void *ud, NetMsg *m) {
    Rollout *r = ud;
    char err[ERR_LEN];
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_GENERATE_GROUP:
        on_generate(r, (const Dapo__GenerateGroup *)m->msg);
        break;
    case DAPO__MSG_TYPE__MSG_CANCEL:
        on_cancel(r, (const Dapo__Cancel *)m->msg);
        break;
    case DAPO__MSG_TYPE__MSG_WEIGHT_UPDATE:     /* normally on the weight channel; accepted here too */
        if (wfetch_chunk(r->wf, (const Dapo__WeightUpdate *)m->msg, err) < 0) log_warn("weights: %s", err);
        break;
    case DAPO__MSG_TYPE__MSG_CONTROL: {
        const Dapo__Control *c = (const Dapo__Control *)m->msg;
        if (c->cmd == DAPO__CONTROL_CMD__CONTROL_PAUSE) {
            r->paused = 1;
            r->paused_session = worker_sessions(r->d.worker);
        } else if (c->cmd == DAPO__CONTROL_CMD__CONTROL_RESUME) {
            r->paused = 0;
        }
        log_info("control %d%s", (int)c->cmd, r->paused ? " (paused: no new sequences start)" : "");
        break;
    }
    default:
        daemon_reply_unsupported(&r->d, m);
    }
    worker_set_status(r->d.worker, r->held, r->version);
    return 0;
}

static void send_group(Rollout *r, int gi) {
    Group *g = r->g[gi];
    Dapo__Response *resp = xcalloc(g->n, sizeof *resp), **rp = xcalloc(g->n, sizeof *rp);
    TokBuf *text = xcalloc(g->n, sizeof *text);
    int64_t oldest = g->n ? g->version[0] : r->version;
    for (uint32_t i = 0; i < g->n; i++) {
        dapo__response__init(&resp[i]);
        GenResult *x = &g->res[i];
        resp[i].token_ids = x->tokens;
        resp[i].n_token_ids = (size_t)x->n;
        resp[i].logprobs = x->logprobs;
        resp[i].n_logprobs = (size_t)x->n;
        resp[i].finish_reason = (char *)gen_finish_name(x->finish);
        resp[i].policy_version = g->version[i];
        resp[i].token_versions = x->versions;
        resp[i].n_token_versions = (size_t)x->n;
        if (g->version[i] < oldest) oldest = g->version[i];
        tokenizer_decode(r->tok, x->tokens, (size_t)x->n, true, &text[i]);
        resp[i].text.data = (uint8_t *)text[i].v;
        resp[i].text.len = text[i].n;
        rp[i] = &resp[i];
        r->tokens_done += x->n;
    }
    Dapo__GroupResult res = DAPO__GROUP_RESULT__INIT;
    res.run_id = g->run_id;
    res.step = g->step;
    res.policy_version = oldest;
    res.group_id = g->group_id;
    res.attempt = g->attempt;
    res.responses = rp;
    res.n_responses = g->n;
    res.gen_seconds = clock_s() - g->t0;
    int rc = worker_send(r->d.worker, DAPO__MSG_TYPE__MSG_GROUP_RESULT, &res.base);
    if (rc) log_warn("group %llu result not sent: %s", (unsigned long long)g->group_id, err_str(rc));
    log_debug("group %llu attempt %u done in %.2f s", (unsigned long long)g->group_id, g->attempt, res.gen_seconds);
    for (uint32_t i = 0; i < g->n; i++) tok_buf_free(&text[i]);
    xfree(text);
    xfree(resp);
    xfree(rp);
    r->groups_done++;
    drop_group(r, gi);
}

static void collect(Rollout *r) {
    GenResult x;
    while (gen_engine_take(r->eng, &x)) {
        int gi = -1;
        for (int i = 0; i < r->ng; i++) if (r->g[i]->tag == x.tag) { gi = i; break; }
        if (gi < 0 || x.sample >= r->g[gi]->n) { gen_result_free(&x); continue; }
        Group *g = r->g[gi];
        gen_result_free(&g->res[x.sample]);
        g->res[x.sample] = x;
        int64_t oldest = r->version;                 /* the version it started with (partial rollouts: its tokens
                                                        may span several, GenResult.versions) */
        for (int k = 0; k < x.n; k++) if (x.versions[k] < oldest) oldest = x.versions[k];
        g->version[x.sample] = oldest;
        g->got++;
        g->credited++;
        give_credit(r, 1);
        if (g->got == g->n) send_group(r, gi);
    }
}

/* Logs the engine's work since the last call, i.e. on policy version `version` (called when the next version is
 * loaded, and at exit): prefill positions computed vs copied from a running sequence's shared prefix
 * (rollout.enable_prefix_caching). */
static void log_engine_stats(Rollout *r, int64_t version) {
    GenStats st;
    gen_engine_stats(r->eng, &st);
    long comp = st.prefill_rows - r->logged.prefill_rows, shared = st.prefill_shared - r->logged.prefill_shared;
    log_info("engine on policy version %lld: %ld steps, prefill positions computed %ld, shared %ld (%.1f%%, %ld "
             "sequences; %ld sequence-steps parked), decode rows %ld, preemptions %ld", (long long)version,
             st.steps - r->logged.steps, comp, shared,
             comp + shared > 0 ? 100.0 * shared / (double)(comp + shared) : 0.0,
             st.prefix_hits - r->logged.prefix_hits, st.prefix_parked - r->logged.prefix_parked,
             st.decode_rows - r->logged.decode_rows, st.preemptions - r->logged.preemptions);
    r->logged = st;
}

/* Test hook (issue 42): DAPO_TEST_CORRUPT_WEIGHTS=<worker id>=<tensor name> adds 0.5 to every element of that tensor of
 * this rollout's loaded copy after each swap — past the chunk checksums, as a weight-sync bug would — so a test sees the
 * weight probe catch it. Unset in production. */
static void test_corrupt(Rollout *r) {
    const char *spec = getenv("DAPO_TEST_CORRUPT_WEIGHTS"), *eq = spec ? strchr(spec, '=') : NULL;
    if (!eq || strncmp(spec, r->d.worker_id, (size_t)(eq - spec)) || r->d.worker_id[eq - spec]) return;
    int ti = model_tensor_index(r->m, eq + 1);
    float *p = model_host_slab(r->m, MODEL_PARAMS);
    if (ti < 0 || !p) { log_warn("DAPO_TEST_CORRUPT_WEIGHTS: no tensor %s here", eq + 1); return; }
    const ModelTensor *t = model_tensor(r->m, ti);
    for (long i = 0; i < t->numel; i++) p[t->offset + i] += 0.5f;
    log_warn("DAPO_TEST_CORRUPT_WEIGHTS: tensor %s of the loaded weights corrupted (a test)", t->name);
}

/* The weight probe (model/probe.h): the version just swapped in scores the probe sequence; the largest difference from
 * the log-probs the learner published with it, or -1 when there is nothing to compare (a version published without
 * them) or the probe could not be scored. *n_out: the values compared. */
static double probe_score(Rollout *r, int64_t v, int *n_out) {
    const float *want;
    int n = wfetch_probe(r->wf, &want);
    *n_out = n;
    if (n <= 0) return -1;
    SampleParams sp;
    settings_sample_params(&r->d.cfg, 0, &sp);
    float got[PROBE_TOKENS];
    char err[ERR_LEN];
    if (probe_logprobs(r->m, sp.temperature, n + 1, got, err) < 0) {
        log_warn("weight probe of version %lld not scored: %s", (long long)v, err);
        return -1;
    }
    return probe_diff(got, want, n);
}

/* The probe goes to the coordinator in the WeightAck (cluster.weights_probe_tolerance decides there). It scores the
 * weights as received, before the engine's rollout.dtype conversion: so the tolerance means the same with bf16 weight
 * storage (a transfer check), and what the rounding moves is logged beside it (bf16_probe_log). */
static void check_probe(Rollout *r, Dapo__WeightAck *ack) {
    int n;
    double d = probe_score(r, ack->version, &n);
    if (d < 0) return;
    ack->probe_values = (uint32_t)n;
    ack->probe_max_abs_diff = (float)d;
    log_info("weight probe of version %lld: max |log-prob - learner's| = %.3g over %d", (long long)ack->version, d, n);
}

/* After the engine rounded the weights to bf16 (rollout.dtype bfloat16): how far that moved the probe's log-probs
 * from the learner's fp32 ones (information: the rollout-vs-learner mismatch bf16 storage adds; the rollout_corr metrics
 * measures it on the training data). */
static void bf16_probe_log(Rollout *r, int64_t v) {
    int n;
    double d = r->d.cfg.rollout_dtype ? probe_score(r, v, &n) : -1;
    if (d >= 0)
        log_info("weight probe of version %lld with bf16 weights: max |log-prob - learner's fp32| = %.3g over %d",
                 (long long)v, d, n);
}

/* Weight versions: fetch what the coordinator holds (a newer version, or the current one again after a rollback: the
 * run's incarnation moved past the loaded weights'); swap once staged and nothing is in progress. */
static void weights_turn(Rollout *r) {
    int64_t want = worker_coordinator_version(r->d.worker);
    uint32_t inc = worker_coordinator_incarnation(r->d.worker);
    if (inc != r->fetch_inc) {                    /* the run's incarnation moved since the last fetch began */
        log_info("run incarnation %u (the loaded weights, policy version %lld, are of incarnation %u): loading policy "
                 "version %lld again", inc, (long long)r->version, r->weights_inc, (long long)want);
        wfetch_forget(r->wf);
        r->refetch = 1;
        r->fetch_inc = inc;
    }
    if (want >= 0 && (want > r->version || r->refetch)) wfetch_want(r->wf, want, r->refetch ? -1 : r->version);
    wfetch_poll(r->wf);
    int64_t ready = wfetch_ready(r->wf);
    if (ready < 0 || (ready <= r->version && !r->refetch)) return;
    int partial = r->d.cfg.partial_rollout && !r->refetch;   /* a rollback's weights: nothing continues across it */
    GenStats st;
    gen_engine_stats(r->eng, &st);
    if (!partial) {
        gen_engine_hold_new(r->eng, 1);
        if (st.in_progress) return;               /* running sequences finish on the old weights first */
    }
    int paused = partial && !r->d.cfg.partial_rollout_kv ? gen_engine_preempt_all(r->eng) : 0;
    int64_t v = wfetch_swap(r->wf, r->m);
    if (v < 0) return;
    test_corrupt(r);
    Dapo__WeightAck ack = DAPO__WEIGHT_ACK__INIT;
    ack.version = v;
    ack.worker_id = r->d.worker_id;
    check_probe(r, &ack);                         /* on the weights as received */
    gen_engine_reload_weights(r->eng);            /* rollout.dtype conversion; the engine's packed copy */
    bf16_probe_log(r, v);
    gen_engine_set_version(r->eng, v);
    if (partial && st.in_progress)
        log_info("policy version %lld swapped in under %d sequences in progress (%d paused, their K/V %s)", (long long)v,
                 st.in_progress, paused, r->d.cfg.partial_rollout_kv ? "kept from the old weights" : "recomputed");
    log_engine_stats(r, r->version);
    r->version = v;
    r->weights_inc = r->fetch_inc;
    r->refetch = 0;
    worker_set_incarnation(r->d.worker, r->weights_inc);
    gen_engine_hold_new(r->eng, r->paused);
    ack.incarnation = r->weights_inc;
    int rc = worker_send(r->d.worker, DAPO__MSG_TYPE__MSG_WEIGHT_ACK, &ack.base);
    if (rc) log_warn("weight ack not sent: %s", err_str(rc));
    worker_set_status(r->d.worker, r->held, r->version);
    log_info("policy version %lld loaded", (long long)v);
}

static int on_idle(void *ud) {
    Rollout *r = ud;
    char err[ERR_LEN];
    if (r->paused && worker_sessions(r->d.worker) != r->paused_session) {
        r->paused = 0;
        log_info("registered again: the pause of the previous coordinator session is over");
    }
    weights_turn(r);
    if (wfetch_ready(r->wf) <= r->version) gen_engine_hold_new(r->eng, r->paused);
    int rc = gen_engine_step(r->eng, err);
    if (rc < 0) log_error("rollout engine: %s", err);
    collect(r);
    worker_set_status(r->d.worker, r->held, r->version);
    GenStats st;
    gen_engine_stats(r->eng, &st);
    if (st.running > 0) return 0;
    return wfetch_busy(r->wf) || wfetch_ready(r->wf) > r->version ? 5 : 50;
}

/* Takes --load DIR and --version V out of argv (daemon_init refuses arguments it does not know). */
static int take_args(int *argc, char **argv, const char **load, int64_t *version) {
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--load") == 0 && i + 1 < *argc) *load = argv[++i];
        else if (strcmp(argv[i], "--version") == 0 && i + 1 < *argc) {
            char *end;
            long long v = strtoll(argv[++i], &end, 10);
            if (*end || v < 0) { fprintf(stderr, "--version: '%s' is not a version >= 0\n", argv[i]); return -1; }
            *version = v;
        } else argv[k++] = argv[i];
    }
    *argc = k;
    argv[k] = NULL;
    return 0;
}

static int setup(Rollout *r, const char *load, char err[ERR_LEN]) {
    const Config *c = &r->d.cfg;
    int threads = c->rollout_threads > 0 ? c->rollout_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1) threads = 1;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    const char *dir = load && *load ? load : c->model_path;
    if (!dir || !*dir) return err_set(err, ERR_INVAL, "actor_rollout_ref.model.path is empty (or pass --load DIR)");
    const Backend *be = settings_backend(c, err);
    if (!be) return ERR_UNSUPPORTED;
    if (gen_engine_supports(be, err)) return ERR_UNSUPPORTED;     /* before the weights go anywhere */
    ModelOptions mo = { .max_tokens = PROBE_TOKENS, .backend = be };   /* the engine keeps its own buffers; the model's
                                                                         own forward scores only the weight probe */
    r->m = model_load(dir, &mo, err);
    if (!r->m) return ERR_IO;
    const char *tdir = c->tokenizer_path && *c->tokenizer_path ? c->tokenizer_path : dir;
    r->tok = tokenizer_load(tdir, err);
    if (!r->tok) return ERR_IO;
    long per_seq = (long)c->max_prompt_length + c->max_response_length;
    long kv = c->kv_cache_tokens > 0 ? c->kv_cache_tokens : (long)c->max_num_seqs * per_seq;
    if (c->kv_cache_tokens <= 0 && kv > (1L << 18)) kv = per_seq > (1L << 18) ? per_seq : 1L << 18;
    GenOptions go = { .max_num_seqs = c->max_num_seqs, .kv_cache_tokens = kv,
                      .max_batch_tokens = c->max_num_batched_tokens, .batch_invariant = c->batch_invariant,
                      .no_prefix_sharing = !c->enable_prefix_caching,
                      .weight_dtype = c->rollout_dtype ? BK_BF16 : BK_F32,
                      .kv_dtype = c->kv_cache_dtype ? BK_BF16 : BK_F32 };
    r->eng = gen_engine_new(r->m, &go, err);
    if (!r->eng) return ERR_INVAL;
    gen_engine_set_version(r->eng, r->version);      /* each token carries it (GenResult.versions) */
    log_info("model %s (%s), tokenizer %s, %d threads (%s)", dir, model_config(r->m)->arch_name, tdir, threads,
             openblas_get_corename());
    return 0;
}

int main(int argc, char **argv) {
    threads_env_ensure(argv);
    static Rollout r;
    char err[ERR_LEN];
    const char *load = NULL;
    if (take_args(&argc, argv, &load, &r.version)) return 2;
    int rc = daemon_init(&r.d, argc, argv, DAPO__ROLE__ROLE_ROLLOUT, "rollout", err);
    if (rc == 0 && config_is_set(&r.d.cfg, "trainer.device"))      /* its own: refused before the coordinator */
        rc = settings_backend(&r.d.cfg, err) ? 0 : ERR_UNSUPPORTED;
    if (rc == 0) rc = daemon_take_run_config(&r.d, DAPO__ROLE__ROLE_ROLLOUT, err);
    if (rc == 1) { daemon_close(&r.d, "shutdown"); return 0; }
    if (rc == 0) rc = setup(&r, load, err);
    r.d.policy_version = r.version;                  /* the first Hello reports the loaded version */
    if (rc == 0)
        rc = daemon_connect(&r.d, DAPO__ROLE__ROLE_ROLLOUT, (uint32_t)r.d.cfg.max_num_seqs,
                            (uint64_t)gen_engine_capacity_tokens(r.eng), err);
    if (rc == 0) {
        worker_set_status(r.d.worker, 0, r.version);
        r.wf = wfetch_new(r.d.zctx, r.d.cfg.weights, r.d.worker_id, r.m, (int64_t)r.d.cfg.max_msg_mb << 20, &r.d.keys,
                          err);
        if (!r.wf) rc = ERR_IO;
    }
    if (rc == 0) rc = daemon_run(&r.d, on_work, on_idle, &r, err);
    if (rc < 0) log_error("%s", err);
    log_info("generated %ld groups, %ld response tokens", r.groups_done, r.tokens_done);
    if (r.eng) log_engine_stats(&r, r.version);
    for (int i = 0; i < r.ng; i++) group_free(r.g[i]);
    xfree(r.g);
    wfetch_free(r.wf);
    gen_engine_free(r.eng);
    tokenizer_free(r.tok);
    model_free(r.m);
    daemon_close(&r.d, rc < 0 ? "error" : "shutdown");
    return rc < 0 ? 1 : 0;
}
