/* services/verifier/main.c: dapo-verifier — scores responses for the coordinator (docs/design.md §1, issue 3).
 * Registers through the shared worker protocol with capacity cluster.verifier_capacity responses (one credit per
 * response), takes ScoreRequest batches, scores them on a thread pool (scoring.c: math_dapo rules by data_source,
 * a per-item deadline, the soft overlong penalty), returns ScoreResults as each request finishes, and gives the
 * credit back. Cancel drops a request. Bad input never stops it: a malformed frame is dropped by the worker
 * layer, an item that cannot be scored gets score -1 and an error string.
 * The scorer is one of three (scoring.h): the built-in math_dapo rules (default), a Python reward function
 * (custom_reward_function.path: reward_model.num_workers python3 processes, pyreward.h) or a remote reward server
 * (reward_model.remote.url, remote.h); with either of the last two a timeout, crash or out-of-memory item scores
 * reward_model.error_score and carries its outcome back to the coordinator. */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "net/daemon.h"
#include "scoring.h"

typedef struct {
    Daemon     d;
    ScorePool *pool;
    uint32_t   held;          /* responses held (their credit is out) */
    uint64_t   requests, items;
} Verifier;

static int on_work(void *ud, NetMsg *m) {
    Verifier *v = ud;
    switch (m->type) {
    case DAPO__MSG_TYPE__MSG_SCORE_REQUEST: {
        Dapo__ScoreRequest *req = (Dapo__ScoreRequest *)m->msg;
        m->msg = NULL;                                  /* the pool owns it now */
        v->held += (uint32_t)req->n_items;
        v->requests++;
        v->items += req->n_items;
        log_debug("request %llu: %zu items", (unsigned long long)req->request_id, req->n_items);
        score_pool_submit(v->pool, req);
        break;
    }
    case DAPO__MSG_TYPE__MSG_CANCEL: {
        Dapo__Cancel *c = (Dapo__Cancel *)m->msg;
        for (size_t i = 0; i < c->n_items; i++) score_pool_cancel(v->pool, c->items[i]->item_id, c->items[i]->attempt);
        break;
    }
    case DAPO__MSG_TYPE__MSG_CONTROL:
        break;                                          /* nothing to pause or checkpoint here */
    default:
        daemon_reply_unsupported(&v->d, m);
    }
    worker_set_status(v->d.worker, v->held, -1);
    return 0;
}

/* Sends finished results and returns their credit. Polls again soon while work is in flight. */
static int on_idle(void *ud) {
    Verifier *v = ud;
    Dapo__ScoreResult *r;
    uint32_t n;
    while (score_pool_take(v->pool, &r, &n)) {
        if (r) {
            int rc = worker_send(v->d.worker, DAPO__MSG_TYPE__MSG_SCORE_RESULT, &r->base);
            if (rc) log_warn("score result %llu not sent: %s", (unsigned long long)r->request_id, err_str(rc));
            score_result_free(r);
        }
        v->held -= n < v->held ? n : v->held;
        worker_add_credit(v->d.worker, n);
    }
    worker_set_status(v->d.worker, v->held, -1);
    return score_pool_pending(v->pool) ? 2 : 100;
}

int main(int argc, char **argv) {
    static Verifier v;
    char err[ERR_LEN];
    int rc = daemon_init(&v.d, argc, argv, DAPO__ROLE__ROLE_VERIFIER, "verifier", err);
    if (rc == 0) rc = daemon_take_run_config(&v.d, DAPO__ROLE__ROLE_VERIFIER, err);
    if (rc == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)      /* before any thread (remote.h) */
        rc = err_set(err, ERR_IO, "libcurl: curl_global_init failed");
    int cap = v.d.cfg.verifier_capacity;
    if (rc == 0) rc = daemon_connect(&v.d, DAPO__ROLE__ROLE_VERIFIER, (uint32_t)cap, 0, err);
    if (rc == 0) {
        const Config *c = &v.d.cfg;
        int threads = c->verifier_threads > 0 ? c->verifier_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        PyWorkerSpec py = {.python = c->custom_reward_python, .path = c->custom_reward_path,
                           .name = c->custom_reward_name, .memory_mb = c->reward_worker_memory_mb,
                           .start_timeout_s = 60};
        RemoteSpec remote = {.url = c->remote_url, .timeout_s = c->remote_timeout_s,
                             .max_retries = c->remote_max_retries, .retry_backoff_s = c->remote_retry_backoff_s};
        int external = c->custom_reward_path[0] || c->remote_url[0];
        ScorePoolOpts o = {.threads = external ? c->reward_num_workers : threads,
                           .timeout_s = c->reward_timeout_s, .error_score = c->reward_error_score,
                           .py = c->custom_reward_path[0] ? &py : NULL, .remote = c->remote_url[0] ? &remote : NULL,
                           .remote_batch_size = c->remote_batch_size};
        if (o.py && access(o.py->path, R_OK)) {
            rc = err_set(err, ERR_NOTFOUND, "custom_reward_function.path: cannot read %s: %s", o.py->path,
                         strerror(errno));
        } else if (!(v.pool = score_pool_new(&o, err))) {
            rc = ERR_IO;
        } else if (o.remote) {
            log_info("%d remote reward clients (%s, %d items per POST, %.3g s timeout, %d retries), capacity %d "
                     "responses", o.threads, remote.url, o.remote_batch_size, remote.timeout_s, remote.max_retries, cap);
        } else if (o.py) {
            log_info("%d Python reward workers (%s: %s from %s, %d MB each), capacity %d responses, deadline %.2f s "
                     "per item", o.threads, py.python, py.name, py.path, c->reward_worker_memory_mb, cap, o.timeout_s);
        } else {
            log_info("%d scoring threads, capacity %d responses, deadline %.2f s per item", o.threads, cap,
                     o.timeout_s);
        }
    }
    if (rc == 0) rc = daemon_run(&v.d, on_work, on_idle, &v, err);
    if (rc < 0) log_error("%s", err);
    if (v.pool) {
        uint64_t n[5];
        score_pool_outcomes(v.pool, n);
        log_info("scored %llu items in %llu requests: %llu timeouts, %llu crashes, %llu out of memory, %llu errors",
                 (unsigned long long)v.items, (unsigned long long)v.requests, (unsigned long long)n[1],
                 (unsigned long long)n[2], (unsigned long long)n[3], (unsigned long long)n[4]);
    }
    score_pool_free(v.pool);
    daemon_close(&v.d, rc < 0 ? "error" : "shutdown");
    curl_global_cleanup();
    return rc < 0 ? 1 : 0;
}
