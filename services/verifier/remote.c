/* services/verifier/remote.c: the remote reward client (see remote.h). */
#include "remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

#define MAX_BODY (64u << 20)      /* a reply larger than this is refused */

struct RemoteReward {
    RemoteSpec spec;              /* url owned */
    CURL      *curl;
};

typedef struct { char *s; size_t n; int too_big; } Body;

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud) {
    Body *b = ud;
    size_t k = size * nmemb;
    if (b->n + k > MAX_BODY) { b->too_big = 1; return 0; }
    b->s = xrealloc(b->s, b->n + k + 1);
    memcpy(b->s + b->n, p, k);
    b->n += k;
    b->s[b->n] = 0;
    return k;
}

RemoteReward *remote_new(const RemoteSpec *spec, char err[ERR_LEN]) {
    RemoteReward *r = xcalloc(1, sizeof *r);
    r->spec = *spec;
    r->spec.url = xstrdup(spec->url);
    r->curl = curl_easy_init();
    if (!r->curl) {
        remote_free(r);
        err_set(err, ERR_NOMEM, "reward_model.remote: libcurl cannot create a handle");
        return NULL;
    }
    return r;
}

void remote_free(RemoteReward *r) {
    if (!r) return;
    if (r->curl) curl_easy_cleanup(r->curl);
    xfree((char *)r->spec.url);
    xfree(r);
}

static char *request_body(const char *prompt, size_t plen, const RemoteItem *it, int n) {
    json_t *q = json_array(), *p = json_array(), *l = json_array();
    for (int i = 0; i < n; i++) {
        char *joined = xmalloc(plen + it[i].response_len + 1);
        if (plen) memcpy(joined, prompt, plen);
        if (it[i].response_len) memcpy(joined + plen, it[i].response, it[i].response_len);
        json_array_append_new(q, reward_json_text(joined, plen + it[i].response_len));
        xfree(joined);
        json_array_append_new(p, reward_json_text(prompt, plen));
        json_array_append_new(l, reward_json_text(it[i].ground_truth, it[i].ground_truth_len));
    }
    json_t *o = json_pack("{s:o, s:o, s:o}", "query", q, "prompts", p, "labels", l);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* Reads a 200 reply into out[n]; 0, or ERR_DECODE with why. */
static int parse_reply(const Body *b, int n, PyScore *out, char why[ERR_LEN]) {
    json_error_t je;
    json_t *j = b->s ? json_loadb(b->s, b->n, 0, &je) : NULL;
    json_t *rw = json_object_get(j, "rewards"), *sc = json_object_get(j, "scores"), *ex = json_object_get(j, "extra_logs");
    int rc = 0;
    if (!json_is_array(rw) || json_array_size(rw) != (size_t)n)
        rc = err_set(why, ERR_DECODE, "the reply has no \"rewards\" list of %d numbers", n);
    for (int i = 0; !rc && i < n; i++) {
        json_t *v = json_array_get(rw, (size_t)i), *s = json_is_array(sc) ? json_array_get(sc, (size_t)i) : NULL;
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            rc = err_set(why, ERR_DECODE, "rewards[%d] is not a finite number", i);
        else {
            out[i].score = json_number_value(v);
            out[i].has_acc = 1;
            out[i].acc = (json_is_number(s) ? json_number_value(s) : out[i].score) > 0;
        }
    }
    const char *k;
    json_t *arr;
    json_object_foreach(ex, k, arr)
        for (int i = 0; !rc && i < n && json_is_array(arr); i++) {
            json_t *v = json_array_get(arr, (size_t)i);
            if (json_is_number(v) && out[i].n_extra < PYR_MAX_EXTRA) {
                out[i].extra_key[out[i].n_extra] = xstrdup(k);
                out[i].extra_val[out[i].n_extra++] = json_number_value(v);
            }
        }
    json_decref(j);
    return rc;
}

/* One POST. 0 (out filled), or the outcome to report with why; *retry says whether trying again may help. */
static int post_once(RemoteReward *r, const char *body, int n, PyScore *out, int *retry, char why[ERR_LEN]) {
    Body b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    CURL *c = r->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, r->spec.url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    long ms = (long)ceil(r->spec.timeout_s * 1000);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms < 1 ? 1L : ms);          /* 0 would mean no timeout at all */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    int outcome = PYR_OK;
    *retry = 0;
    if (cc == CURLE_OPERATION_TIMEDOUT) {
        outcome = PYR_TIMEOUT;
        *retry = 1;
        err_set(why, ERR_TIMEOUT, "timeout: no reply from %s within %.3g s", r->spec.url, r->spec.timeout_s);
    } else if (cc != CURLE_OK) {
        outcome = PYR_ERROR;
        *retry = !b.too_big;
        err_set(why, ERR_IO, "%s: %s", r->spec.url, b.too_big ? "reply over 64 MiB" : curl_easy_strerror(cc));
    } else if (status != 200) {
        outcome = PYR_ERROR;
        *retry = status == 429 || status >= 500;
        err_set(why, ERR_IO, "%s: HTTP %ld", r->spec.url, status);
    } else if (parse_reply(&b, n, out, why)) {
        outcome = PYR_ERROR;
    }
    xfree(b.s);
    return outcome;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

int remote_score(RemoteReward *r, const char *prompt, size_t prompt_len, const RemoteItem *items, int n, PyScore *out) {
    for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
    char *body = request_body(prompt, prompt_len, items, n);
    char why[ERR_LEN] = "cannot encode the request";
    int outcome = PYR_ERROR, posts = 0, retry = 0;
    double backoff = r->spec.retry_backoff_s;
    for (int t = 0; body && t <= r->spec.max_retries; t++) {
        if (t) { sleep_s(backoff); backoff *= 2; }
        for (int i = 0; i < n; i++) pyscore_clear(&out[i]);
        posts++;
        outcome = post_once(r, body, n, out, &retry, why);
        if (outcome == PYR_OK || !retry) break;
        log_warn("remote reward: %s (try %d of %d)", why, t + 1, r->spec.max_retries + 1);
    }
    free(body);
    for (int i = 0; i < n; i++) {
        out[i].outcome = (PyOutcome)outcome;
        if (outcome != PYR_OK) {
            pyscore_clear(&out[i]);
            out[i].outcome = (PyOutcome)outcome;
            snprintf(out[i].err, sizeof out[i].err, "%s", why);
        }
    }
    return posts;
}
