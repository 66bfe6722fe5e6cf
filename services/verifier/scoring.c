/* services/verifier/scoring.c: the scoring pool (see scoring.h). One mutex guards the job list; each thread owns
 * a RewardWs (scratch) or a Python worker and takes one item at a time, so a long item never holds up the others. */
#include "scoring.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "dapo/overlong.h"
#include "reward/reward.h"

#define PRED_MAX 4096          /* bytes of a Python / remote reward's "pred" kept */

typedef struct Job {
    Dapo__ScoreRequest *req;
    Dapo__Score       **scores;     /* [n_items], filled by the threads */
    size_t              next;       /* next item to start */
    size_t              running;    /* items being scored now */
    size_t              done;
    int                 cancelled;
    struct Job         *nxt;
} Job;

struct ScorePool {
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    Job            *head, *tail;
    pthread_t      *th;
    int             nthreads, stop, pending;
    double          timeout_s, error_score;
    PyWorker      **py;             /* [n_py] when the Python path is on, else NULL */
    RemoteReward  **rr;             /* [n_py] when the remote path is on, else NULL */
    int             n_py, next_py;  /* workers / clients; the next thread's, handed out at thread start */
    int             batch;          /* items per remote call */
    uint64_t        outcomes[5];    /* items by Dapo__RewardOutcome */
};

/* Built-in scorer: fills s's result fields; returns its outcome. */
static int score_builtin(RewardWs *ws, const Dapo__ScoreItem *it, double timeout_s, Dapo__Score *s, double *score) {
    int64_t deadline = math_dapo_now_ns() + (int64_t)(timeout_s * 1e9);
    RewardResult r;
    reward_score(ws, it->data_source, (const char *)it->response_text.data, it->response_text.len,
                 (const char *)it->ground_truth.data, it->ground_truth.len, it->strict_box, deadline, &r);
    s->acc = r.acc;
    s->has_pred = r.has_pred;
    s->pred.len = r.has_pred ? r.pred_len : 0;
    s->pred.data = xmalloc(s->pred.len + 1);
    if (s->pred.len) memcpy(s->pred.data, r.pred, s->pred.len);
    s->error = xstrdup(r.error ? r.err : "");
    *score = r.score;
    return r.error == ERR_TIMEOUT ? DAPO__REWARD_OUTCOME__REWARD_TIMEOUT
         : r.error ? DAPO__REWARD_OUTCOME__REWARD_ERROR : DAPO__REWARD_OUTCOME__REWARD_OK;
}

/* An external call's result (Python worker or remote server) into s; returns its outcome (PyOutcome and
 * Dapo__RewardOutcome agree). Moves r's extra names. */
static int fill_from_call(PyScore *r, const Dapo__ScoreItem *it, double error_score, Dapo__Score *s, double *score) {
    if (r->outcome == PYR_OK && !(fabs(r->score) <= FLT_MAX)) {          /* the wire's float cannot hold it */
        r->outcome = PYR_ERROR;
        snprintf(r->err, sizeof r->err, "bad_return: score %g is outside the float range", r->score);
    }
    if (r->pred && strlen(r->pred) > PRED_MAX) r->pred[PRED_MAX] = 0;    /* a prediction is a short answer */
    int ok = r->outcome == PYR_OK;
    *score = ok ? r->score : error_score;
    s->acc = ok && (r->has_acc ? r->acc : r->score > 0);
    s->has_pred = r->pred != NULL;
    s->pred.len = r->pred ? strlen(r->pred) : 0;
    s->pred.data = xmalloc(s->pred.len + 1);
    if (s->pred.len) memcpy(s->pred.data, r->pred, s->pred.len);
    s->error = xstrdup(ok ? "" : r->err);
    s->n_extra_keys = s->n_extra_values = (size_t)r->n_extra;
    s->extra_keys = r->n_extra ? xcalloc((size_t)r->n_extra, sizeof *s->extra_keys) : NULL;
    s->extra_values = r->n_extra ? xcalloc((size_t)r->n_extra, sizeof *s->extra_values) : NULL;
    for (int i = 0; i < r->n_extra; i++) {
        s->extra_keys[i] = r->extra_key[i];             /* moved */
        r->extra_key[i] = NULL;
        s->extra_values[i] = fabs(r->extra_val[i]) <= FLT_MAX ? r->extra_val[i] : NAN;   /* dropped downstream */
    }
    int outcome = (int)r->outcome;
    if (!ok) log_warn("item %llu (%s): %s", (unsigned long long)it->item_id, pyoutcome_name(r->outcome), r->err);
    pyscore_clear(r);
    return outcome;
}

static void score_free(Dapo__Score *s) {
    xfree(s->pred.data);
    xfree(s->error);
    for (size_t i = 0; i < s->n_extra_keys; i++) xfree(s->extra_keys[i]);
    xfree(s->extra_keys);
    xfree(s->extra_values);
    xfree(s);
}

static Dapo__Score *score_new(const Dapo__ScoreItem *it) {
    Dapo__Score *s = xmalloc(sizeof *s);
    dapo__score__init(s);
    s->item_id = it->item_id;
    s->attempt = it->attempt;
    return s;
}

/* The result fields are set: records the outcome and adds the soft overlong penalty to score. */
static void score_finish(const Dapo__ScoreRequest *req, const Dapo__ScoreItem *it, int outcome, double score,
                         Dapo__Score *s) {
    s->outcome = (Dapo__RewardOutcome)outcome;
    float penalty = 0;
    if (req->overlong_buffer_enable) {
        char err[ERR_LEN];
        if (overlong_penalty(it->response_length, req->max_response_length, req->overlong_buffer_len,
                             req->overlong_penalty_factor, &penalty, err)) {
            xfree(s->error);
            s->error = xstrdup(err);
            penalty = 0;
        }
    }
    s->overlong_penalty = penalty;
    s->score = (float)score + penalty;
}

/* What one thread owns: exactly one of ws (built in), py (a Python worker), rr (a remote client). */
typedef struct { RewardWs *ws; PyWorker *py; RemoteReward *rr; } Scorer;

/* Scores items [i0, i0 + k) of req into out[k] (k > 1 only for the remote path: one POST), outcomes into oc[k]. */
static void score_range(const ScorePool *p, const Scorer *sc, const Dapo__ScoreRequest *req, size_t i0, size_t k,
                        Dapo__Score **out, int *oc) {
    double score[REMOTE_MAX_BATCH];
    if (sc->rr) {
        RemoteItem items[REMOTE_MAX_BATCH] = {{0}};
        PyScore r[REMOTE_MAX_BATCH];
        for (size_t q = 0; q < k; q++) {
            const Dapo__ScoreItem *it = req->items[i0 + q];
            items[q] = (RemoteItem){(const char *)it->response_text.data, it->response_text.len,
                                    (const char *)it->ground_truth.data, it->ground_truth.len};
        }
        remote_score(sc->rr, (const char *)req->prompt_text.data, req->prompt_text.len, items, (int)k, r);
        for (size_t q = 0; q < k; q++) {
            out[q] = score_new(req->items[i0 + q]);
            oc[q] = fill_from_call(&r[q], req->items[i0 + q], p->error_score, out[q], &score[q]);
        }
    } else {
        const Dapo__ScoreItem *it = req->items[i0];
        out[0] = score_new(it);
        if (sc->py) {
            char extra[96];
            snprintf(extra, sizeof extra, "{\"response_length\": %u}", it->response_length);
            PyScore r;
            pyworker_score(sc->py, it->data_source, (const char *)it->response_text.data, it->response_text.len,
                           (const char *)it->ground_truth.data, it->ground_truth.len, extra, p->timeout_s, &r);
            oc[0] = fill_from_call(&r, it, p->error_score, out[0], &score[0]);
        } else {
            oc[0] = score_builtin(sc->ws, it, p->timeout_s, out[0], &score[0]);
        }
    }
    for (size_t q = 0; q < k; q++) score_finish(req, req->items[i0 + q], oc[q], score[q], out[q]);
}

static void *thread_main(void *arg) {
    ScorePool *p = arg;
    pthread_mutex_lock(&p->mu);
    Scorer sc = {0};
    if (p->py) sc.py = p->py[p->next_py++];
    else if (p->rr) sc.rr = p->rr[p->next_py++];
    else sc.ws = reward_ws_new();
    size_t batch = sc.rr ? (size_t)p->batch : 1;
    for (;;) {
        Job *j = p->head;
        while (j && (j->cancelled || j->next >= j->req->n_items)) j = j->nxt;
        if (!j) {
            if (p->stop) break;
            pthread_cond_wait(&p->cv, &p->mu);
            continue;
        }
        size_t i = j->next, k = j->req->n_items - i < batch ? j->req->n_items - i : batch;
        j->next += k;
        j->running += k;
        pthread_mutex_unlock(&p->mu);
        Dapo__Score *out[REMOTE_MAX_BATCH];
        int oc[REMOTE_MAX_BATCH];
        score_range(p, &sc, j->req, i, k, out, oc);
        pthread_mutex_lock(&p->mu);
        for (size_t q = 0; q < k; q++) {
            j->scores[i + q] = out[q];
            p->outcomes[oc[q] >= 0 && oc[q] < 5 ? oc[q] : 4]++;
        }
        j->running -= k;
        j->done += k;
    }
    pthread_mutex_unlock(&p->mu);
    if (sc.ws) reward_ws_free(sc.ws);
    return NULL;
}

ScorePool *score_pool_new(const ScorePoolOpts *o, char err[ERR_LEN]) {
    int threads = o->threads > 0 ? o->threads : 1;
    ScorePool *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->timeout_s = o->timeout_s;
    p->error_score = o->error_score;
    p->th = xcalloc((size_t)threads, sizeof *p->th);
    p->batch = o->remote_batch_size < 1 ? 1 : o->remote_batch_size > REMOTE_MAX_BATCH ? REMOTE_MAX_BATCH
             : o->remote_batch_size;
    if (o->py || o->remote) {
        p->n_py = threads;
        if (o->py) p->py = xcalloc((size_t)threads, sizeof *p->py);
        else p->rr = xcalloc((size_t)threads, sizeof *p->rr);
        for (int i = 0; i < threads; i++)
            if (o->py ? !(p->py[i] = pyworker_new(o->py, err)) : !(p->rr[i] = remote_new(o->remote, err))) {
                score_pool_free(p);
                return NULL;
            }
    }
    for (int i = 0; i < threads; i++) {
        int rc = pthread_create(&p->th[i], NULL, thread_main, p);
        if (rc) {
            err_set(err, ERR_IO, "cannot start scoring thread %d: %s", i, strerror(rc));
            score_pool_free(p);
            return NULL;
        }
        p->nthreads++;
    }
    return p;
}

void score_pool_submit(ScorePool *p, Dapo__ScoreRequest *req) {
    Job *j = xcalloc(1, sizeof *j);
    j->req = req;
    j->scores = xcalloc(req->n_items ? req->n_items : 1, sizeof *j->scores);
    pthread_mutex_lock(&p->mu);
    if (p->tail) p->tail->nxt = j; else p->head = j;
    p->tail = j;
    p->pending++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

uint32_t score_pool_cancel(ScorePool *p, uint64_t request_id, uint32_t attempt) {
    uint32_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (Job *j = p->head; j; j = j->nxt)
        if (j->req->request_id == request_id && j->req->attempt == attempt && !j->cancelled) {
            j->cancelled = 1;
            n = (uint32_t)j->req->n_items;
        }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void job_free(Job *j) {
    for (size_t i = 0; i < j->req->n_items; i++)
        if (j->scores[i]) score_free(j->scores[i]);
    xfree(j->scores);
    protobuf_c_message_free_unpacked(&j->req->base, NULL);
    xfree(j);
}

int score_pool_take(ScorePool *p, Dapo__ScoreResult **out, uint32_t *n_items) {
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    Job *prev = NULL, *j = p->head;
    /* Finished: all items done, or cancelled with nothing still running. */
    while (j && !(j->running == 0 && (j->done == j->req->n_items || j->cancelled))) { prev = j; j = j->nxt; }
    if (j) {
        if (prev) prev->nxt = j->nxt; else p->head = j->nxt;
        if (p->tail == j) p->tail = prev;
        p->pending--;
    }
    pthread_mutex_unlock(&p->mu);
    if (!j) return 0;
    *n_items = (uint32_t)j->req->n_items;
    if (j->cancelled) { job_free(j); return 1; }
    Dapo__ScoreResult *r = xmalloc(sizeof *r);
    dapo__score_result__init(r);
    r->run_id = xstrdup(j->req->run_id);
    r->step = j->req->step;
    r->request_id = j->req->request_id;
    r->attempt = j->req->attempt;
    r->n_scores = j->req->n_items;
    r->scores = j->scores;                  /* moved */
    j->scores = NULL;
    protobuf_c_message_free_unpacked(&j->req->base, NULL);
    xfree(j);
    *out = r;
    return 1;
}

void score_result_free(Dapo__ScoreResult *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_scores; i++) score_free(r->scores[i]);
    xfree(r->scores);
    xfree(r->run_id);
    xfree(r);
}

int score_pool_pending(ScorePool *p) {
    pthread_mutex_lock(&p->mu);
    int n = p->pending;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void score_pool_outcomes(ScorePool *p, uint64_t out[5]) {
    pthread_mutex_lock(&p->mu);
    memcpy(out, p->outcomes, sizeof p->outcomes);
    pthread_mutex_unlock(&p->mu);
}

void score_pool_free(ScorePool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    for (Job *j = p->head; j; j = j->nxt) j->cancelled = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->th[i], NULL);
    for (Job *j = p->head, *n; j; j = n) { n = j->nxt; j->scores ? job_free(j) : (void)0; }
    for (int i = 0; i < p->n_py; i++) {
        if (p->py) pyworker_free(p->py[i]);
        if (p->rr) remote_free(p->rr[i]);
    }
    xfree(p->py);
    xfree(p->rr);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    xfree(p->th);
    xfree(p);
}
