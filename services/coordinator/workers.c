/* services/coordinator/workers.c: queries of the worker table (coord.h WorkerEntry): find by routing id, count by
 * role and life, names. No side effects; the table is changed by registry.c only. */
#include <string.h>

#include "coord.h"

const char *role_name(Dapo__Role r) {
    switch (r) {
    case DAPO__ROLE__ROLE_ROLLOUT: return "rollout";
    case DAPO__ROLE__ROLE_VERIFIER: return "verifier";
    case DAPO__ROLE__ROLE_LEARNER: return "learner";
    case DAPO__ROLE__ROLE_COORDINATOR: return "coordinator";
    default: return "unknown";
    }
}

const char *life_name(WorkerLife l) {
    static const char *names[] = {"alive", "lost", "gone"};
    return (unsigned)l < 3 ? names[l] : "?";
}

WorkerEntry *registry_find(Coord *c, const uint8_t *rid, size_t rid_len) {
    for (int i = 0; i < c->nworkers; i++)
        if (c->workers[i].rid_len == rid_len && memcmp(c->workers[i].rid, rid, rid_len) == 0) return &c->workers[i];
    return NULL;
}

int registry_count(const Coord *c, Dapo__Role role, WorkerLife life) {
    int n = 0;
    for (int i = 0; i < c->nworkers; i++) n += c->workers[i].role == role && c->workers[i].life == life;
    return n;
}
