/* services/coordinator/view.h: what the dashboard and /metrics read (issue 35): a snapshot of the coordinator that
 * the event loop publishes (view_publish, run.c) before it hands an HTTP request to dashboard_handle, and releases
 * after. dashboard.c and panels.c see this and nothing of the Coord: the built parts (/api/status's object, the
 * /metrics text) are the view's own; the history, samples and config are borrowed from the state, valid while the
 * request is handled (no event runs in between: one thread). Control requests go back as callbacks that hand the
 * loop an event, as a socket message would. */
#ifndef DAPO_COORD_VIEW_H
#define DAPO_COORD_VIEW_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/metrics.h"
#include "http.h"

/* The latest sampled responses shown on the dashboard (a ring of COORD_SAMPLES). Strings owned (xmalloc). */
#define COORD_SAMPLES 16
typedef struct {
    long   step;
    char  *data_source, *prompt, *response, *ground_truth, *pred;   /* response text as bytes, NUL-terminated */
    float  score;
    int    acc;
    int    response_tokens;
    char   finish_reason[8];
} SampleView;

/* The response lengths of one step's trained batch: LEN_BINS equal bins over [0, max_len] tokens (the last bin
 * holds max_len itself, i.e. the truncated responses). Kept in memory for /api/response_lengths. */
#define LEN_BINS 20
typedef struct {
    long     step;
    int      max_len;
    uint32_t count[LEN_BINS];
} LengthHist;

typedef enum { VIEW_PAUSE = 0, VIEW_RESUME, VIEW_CHECKPOINT, VIEW_STOP } ViewControl;

typedef struct CoordView {
    json_t           *status;          /* /api/status's object (owned: view_release) */
    char             *prometheus;      /* /metrics, Prometheus text format 0.0.4 (owned, prometheus_len bytes) */
    size_t            prometheus_len;
    const char       *run_id;
    const Metrics    *history;         /* one metric set per finished step or validation, in order ("step" in each) */
    long              nhistory;
    const LengthHist *len_hist;        /* the trained responses' length histogram of each step */
    int               nlen_hist;
    const SampleView *samples;         /* a ring of COORD_SAMPLES; the newest at sample_next - 1 */
    int               nsamples, sample_next;
    const char       *config_yaml;     /* the resolved config, or NULL */
    const char       *token;           /* the controls' bearer token (cluster.token_file), or NULL: controls off */
    int               ready;           /* config, data and checkpoint loaded (/readyz) */
    int               failed;          /* the run failed (/healthz answers 503) */
    int               http_public;     /* off loopback with a token: every route needs it */
    int               paused;
    /* A control request, handed to the loop as an event (its actions carried out at once). 0, or (VIEW_CHECKPOINT)
     * why no checkpoint was asked, in err (ERR_UNSUPPORTED: no training run; ERR_AGAIN: resuming or no learner
     * rank 0). *paused (may be NULL): the state after it. */
    int  (*control)(void *ctx, ViewControl what, int *paused, char err[ERR_LEN]);
    void (*stop)(void *ctx);           /* the stop request (an HttpAfter: run after the answer is written) */
    void  *ctx;
} CoordView;

struct Coord;
/* view.c: fills v from the state (v's built parts are new: view_release frees them). */
void view_publish(struct Coord *c, CoordView *v);
void view_release(CoordView *v);
/* JSON strings from bytes that may be invalid UTF-8 (U+FFFD per maximal invalid subpart, as Python's
 * errors="replace"): jt_text cuts at max bytes on a code point boundary (*cut: whether it did; may be NULL);
 * jt_str takes a NUL-terminated string (NULL: ""); jt_num is null for a non-finite value. New references. */
json_t *jt_text(const char *s, size_t n, size_t max, int *cut);
json_t *jt_str(const char *s);
json_t *jt_num(double v);
/* prom.c: the /metrics text of the state (xmalloc'd, *len bytes, NUL-terminated). */
char *prom_text(const struct Coord *c, size_t *len);
/* panels.c: the dashboard's RL panels for history entries [since, since + limit): a JSON object (caller owns). */
json_t *coord_panels_json(const CoordView *v, long since, long limit);
/* dashboard.c: the HTTP routes, answered from v. */
void dashboard_handle(const CoordView *v, const HttpRequest *req, HttpResponse *resp);

#endif
