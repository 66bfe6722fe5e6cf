/* services/learner/main.c: dapo-learner — registers with the coordinator through the shared worker protocol, heartbeats,
 * and exits cleanly on SIGTERM (common/net/daemon.h).
 * Not yet here: the learner's work; messages it cannot handle yet are answered with an ErrorReply. */
#include "core/log.h"
#include "net/daemon.h"

static int on_work(void *ud, NetMsg *m) {
    daemon_reply_unsupported(ud, m);
    return 0;
}

int main(int argc, char **argv) {
    static Daemon d;
    char err[ERR_LEN];
    int rc = daemon_init(&d, argc, argv, DAPO__ROLE__ROLE_LEARNER, "learner", err);
    if (rc == 0) rc = daemon_connect(&d, DAPO__ROLE__ROLE_LEARNER, 1, 0, err);
    if (rc == 0) rc = daemon_run(&d, on_work, NULL, &d, err);
    if (rc < 0) log_error("%s", err);
    daemon_close(&d, rc < 0 ? "error" : "shutdown");
    return rc < 0 ? 1 : 0;
}
