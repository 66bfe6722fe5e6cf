/* services/coordinator/persist.h: the run directory's files, written by the event loop (run.c) only (persist.c). */
#ifndef DAPO_COORD_PERSIST_H
#define DAPO_COORD_PERSIST_H

#include "coord.h"

/* Carries out one file action of the outbox (OUT_METRICS_ROW, OUT_METRICS_TRUNCATE, OUT_EVENT_LINE, OUT_CKPT_FILE).
 * 0; for OUT_CKPT_FILE ERR_IO (err names the file and why) when coordinator.json could not be written — the previous
 * file is then intact. Metrics and event writes log their failures and return 0 (the run goes on). */
int  persist_carry(Coord *c, const OutAction *a, char err[ERR_LEN]);
/* coordinator.json written at once (the start of a resume, before the loop runs): 0 or ERR_IO. */
int  persist_ckpt_now(const Coord *c, const char *text, char err[ERR_LEN]);
/* The cron: rewrites trainer.default_local_dir/run_seconds every 5 s (while events.jsonl is open). */
void persist_run_seconds(Coord *c);
/* A resume's start: every row of metrics.jsonl with a "step" into the history (the dashboard's curves); the resume
 * decision (ckpt.c) then drops the rows after the step it resumes. */
void persist_read_history(Coord *c);

/* The start (run.c, before the first event): */
/* The whole file at path (xmalloc'd, NUL-terminated, in *text): 0, ERR_NOTFOUND when it does not exist, ERR_IO. */
int  persist_read_file(const char *path, char **text, char err[ERR_LEN]);
/* Locks trainer.default_local_dir (coordinator.lock, flock, our pid in it) for this process: ERR_INVAL naming the
 * other coordinator's pid when a live one holds it (after waiting cluster.lock_wait_s), ERR_IO when the file cannot
 * be made. */
int  persist_lock(Coord *c, char err[ERR_LEN]);
/* A run that resumes nothing: an earlier run's metrics.jsonl is renamed aside (and this run takes an incarnation of
 * its own: the earlier run's rollouts may still hold its later versions). */
void persist_set_aside_metrics(Coord *c);
/* Opens trainer.default_local_dir/events.jsonl (issue 33): a run that resumes (a checkpoint, or a restart by the
 * supervisor) reads its events back into the list and its run seconds (the largest "run_s" there and in
 * run_seconds); a fresh run sets an earlier run's file aside (events-before-<unix s>-<pid>.jsonl) and starts with
 * "run started". Events recorded before the call keep their place after the ones read back (their lines are
 * queued). 0 or ERR_IO (the file cannot be written: the caller goes on without it, the dashboard keeps its list in
 * memory). */
int  persist_events_open(Coord *c, char err[ERR_LEN]);

#endif
