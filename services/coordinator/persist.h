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

#endif
