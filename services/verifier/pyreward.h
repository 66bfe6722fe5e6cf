/* services/verifier/pyreward.h: one Python reward worker — a long-lived `python3` process that runs the user's
 * reward function (verl's custom_reward_function.path / .name: compute_score(data_source, solution_str,
 * ground_truth, extra_info) returning a float or a dict with "score"), owned by one scoring thread (scoring.c).
 *
 * The verifier imports no Python: it spawns the configured interpreter with the host script embedded from
 * static/reward_host.py and speaks length-prefixed JSON (4-byte little-endian length, UTF-8 JSON) over two pipes.
 * The rules that keep a bad function from stalling or corrupting a run (issue 20):
 *   - a hard deadline per item: past it the process is killed (SIGKILL) and replaced; the item is a TIMEOUT;
 *   - RLIMIT_AS per worker (memory_mb): a MemoryError, or death by SIGKILL not sent by us, is MEMORY; the process is
 *     replaced;
 *   - any other death (a segfault, an exit) is CRASH for that item only; the process is replaced;
 *   - an exception or a return value that is not a finite number / a dict with a numeric "score" is ERROR; the
 *     process is kept.
 * The child gets PR_SET_PDEATHSIG = SIGKILL, so no interpreter outlives the thread that started it, and a process
 * group of its own, killed whole whenever the worker is reaped, so processes the function started go with it (when
 * the verifier itself is SIGKILLed, only the interpreter dies; what the function forked is then left running).
 * Not here: the pool and the score arithmetic (scoring.c), the host script's side (static/reward_host.py). */
#ifndef DAPO_VERIFIER_PYREWARD_H
#define DAPO_VERIFIER_PYREWARD_H

#include <stddef.h>

#include "core/err.h"

typedef struct {
    const char *python;          /* interpreter, e.g. "python3" or a venv's bin/python3 (PATH lookup) */
    const char *path, *name;     /* the reward file and the function in it */
    long        memory_mb;       /* RLIMIT_AS of the worker; <= 0: no limit */
    double      start_timeout_s; /* a (re)started worker must say ready within this */
} PyWorkerSpec;

typedef enum { PYR_OK = 0, PYR_TIMEOUT, PYR_CRASH, PYR_MEMORY, PYR_ERROR } PyOutcome;

#define PYR_MAX_EXTRA 16

/* One item's result. pred and the extra names are owned (pyscore_clear frees them). */
typedef struct {
    PyOutcome outcome;
    double    score;             /* valid when outcome == PYR_OK */
    int       has_acc, acc;      /* the dict's "acc", when it has one */
    char     *pred;              /* the dict's "pred", or NULL */
    int       n_extra;           /* the dict's other numeric values (at most PYR_MAX_EXTRA; later ones dropped) */
    char     *extra_key[PYR_MAX_EXTRA];
    double    extra_val[PYR_MAX_EXTRA];
    char      err[ERR_LEN];      /* why, when outcome != PYR_OK */
} PyScore;

typedef struct PyWorker PyWorker;

/* Starts one worker and waits for it to say ready. spec's strings are copied. NULL with err set when the
 * interpreter cannot be run or the file cannot be loaded (the host's own message, e.g. a SyntaxError). */
PyWorker *pyworker_new(const PyWorkerSpec *spec, char err[ERR_LEN]);

/* Scores one item within timeout_s seconds (from when it is sent). Strings are bytes [len]; invalid UTF-8 is
 * replaced by U+FFFD before it reaches JSON. extra_info_json is a JSON object text (borrowed) or NULL. Always
 * fills *out (call pyscore_clear after); a worker that died or was killed is restarted before returning (when that
 * fails, the next call tries again). Returns out->outcome. */
PyOutcome pyworker_score(PyWorker *w, const char *data_source, const char *solution, size_t solution_len,
                         const char *ground_truth, size_t ground_truth_len, const char *extra_info_json,
                         double timeout_s, PyScore *out);

void pyscore_clear(PyScore *s);

/* Kills (SIGKILL) and reaps the process; NULL is a no-op. */
void pyworker_free(PyWorker *w);

/* Processes started so far, by all workers (first starts and restarts). */
unsigned long pyworker_starts(void);

const char *pyoutcome_name(PyOutcome o);

/* A JSON string (new reference) of the bytes s[0..n) with invalid UTF-8 replaced by U+FFFD; s NULL is "". For every
 * text the verifier sends to an external scorer (the Python workers, the remote server). */
struct json_t *reward_json_text(const char *s, size_t n);   /* "ok", "timeout", "crash", "memory", "error" */

#endif
