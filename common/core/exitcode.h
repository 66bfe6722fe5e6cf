/* common/core/exitcode.h: the exit statuses a dapo daemon gives its supervisor (tools/dapo-supervise.c, Kubernetes)
 * beyond 0 (done) and 1 (failed), so that what the supervisor does next is decided by the code, never by log text. */
#ifndef DAPO_CORE_EXITCODE_H
#define DAPO_CORE_EXITCODE_H

#define DAPO_EXIT_RESTART 75   /* start me again at once (a learner told to reload the last checkpoint) */
#define DAPO_EXIT_STOPPED 76   /* stopped as asked, but without a checkpoint of the last steps (the coordinator stopped
                                  twice, or its stop outlasted cluster.stop_timeout_s): the run ends, failed; the next
                                  start resumes from the last checkpoint both sides hold; not restarted */

#endif
