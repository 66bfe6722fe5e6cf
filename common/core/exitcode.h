/* common/core/exitcode.h: the exit statuses a dapo daemon gives its supervisor (tools/dapo-supervise.c, Kubernetes)
 * beyond 0 (done) and 1 (failed), so that what the supervisor does next is decided by the code, never by log text. */
#ifndef DAPO_CORE_EXITCODE_H
#define DAPO_CORE_EXITCODE_H

#define DAPO_EXIT_RESTART 75   /* start me again at once (a learner told to reload the last checkpoint) */
#define DAPO_EXIT_STOPPED 76   /* the coordinator stopped as asked, but the run did not end well: without a checkpoint of
                                  the last steps (stopped twice, or its stop outlasted cluster.stop_timeout_s), or after
                                  the run had failed. The supervisor ends the run, failed, and does not restart it (a
                                  failed run's coordinator that exits on its own, or is killed, is restarted and resumes
                                  from the last checkpoint both sides hold) */

#endif
