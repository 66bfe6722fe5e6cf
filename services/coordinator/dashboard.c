/* services/coordinator/dashboard.c: the HTTP routes of the coordinator: /api/status (JSON).
 * Not yet here: the HTML page, /api/metrics, /metrics and the control endpoints (issue 8). */
#include <jansson.h>
#include <string.h>

#include "core/clock.h"
#include "core/err.h"
#include "coord.h"

static void reply_json(HttpResponse *r, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    http_reply(r, 200, "application/json", s ? s : "{}");
    free(s);
}

static json_t *status_json(Coord *c) {
    int64_t now = clock_ms();
    json_t *workers = json_array();
    for (int i = 0; i < c->nworkers; i++) {
        WorkerEntry *w = &c->workers[i];
        json_array_append_new(workers, json_pack("{s:s, s:s, s:s, s:I, s:f, s:i, s:i, s:i, s:f, s:i, s:s}",
            "id", w->id, "role", role_name(w->role), "state", life_name(w->life),
            "policy_version", (json_int_t)w->policy_version, "last_heartbeat_s", (now - w->last_seen_ms) / 1000.0,
            "capacity", (int)w->capacity, "credit", (int)w->credit, "busy", (int)w->busy, "load", w->load,
            "rank", (int)w->rank, "build", w->build_info));
    }
    json_t *alive = json_object();
    static const Dapo__Role roles[] = {DAPO__ROLE__ROLE_ROLLOUT, DAPO__ROLE__ROLE_VERIFIER, DAPO__ROLE__ROLE_LEARNER};
    for (int i = 0; i < 3; i++)
        json_object_set_new(alive, role_name(roles[i]), json_integer(registry_count(c, roles[i], WORKER_ALIVE)));
    /* group accounting (DESIGN.md §7): every group in exactly one state; the states add up to "created" */
    json_t *groups = json_object();
    json_int_t created = 0;
    for (int s = 0; s < GS_COUNT; s++) {
        json_object_set_new(groups, group_state_name((GroupState)s), json_integer((json_int_t)c->group_counts[s]));
        created += (json_int_t)c->group_counts[s];
    }
    json_object_set_new(groups, "created", json_integer(created));
    return json_pack("{s:s, s:I, s:I, s:f, s:o, s:o, s:I, s:I, s:I, s:o, s:s, s:s, s:b}", "run_id", c->run_id,
                     "step", (json_int_t)c->step, "policy_version", (json_int_t)c->policy_version,
                     "uptime_s", (now - c->started_ms) / 1000.0, "alive", alive, "workers", workers,
                     "messages_in", (json_int_t)c->msgs_in, "messages_bad", (json_int_t)c->msgs_bad,
                     "heap_bytes", (json_int_t)xmalloc_used(), "groups", groups,
                     "phase", phase_name(engine_phase(c)), "status", c->status_line, "paused", c->paused);
}

void dashboard_handle(void *coord, const HttpRequest *req, HttpResponse *resp) {
    Coord *c = coord;
    if (strcmp(req->path, "/api/status") == 0) {
        if (strcmp(req->method, "GET") != 0) { http_reply(resp, 405, "text/plain", "GET only\n"); return; }
        reply_json(resp, status_json(c));
        return;
    }
    http_reply(resp, 404, "text/plain", "not found\n");
}
