/* common/model/checkpoint.h: learner checkpoints (docs/design.md §7, issue 7): the model as a Hugging Face directory that
 * transformers loads, the AdamW state, and the training counters, written atomically, with the newest
 * `max_keep` kept. Layout (verl's, so tools that know verl's tree find things where they expect):
 *   ROOT/global_step_N/actor/huggingface/{config.json, generation_config.json, model.safetensors}   fp32 weights
 *   ROOT/global_step_N/actor/optim.safetensors   "exp_avg" [n_params], "exp_avg_sq" [n_params] fp32 (slab order)
 *   or, with the state sharded over W learner ranks (state.json "optim_shards": W; issue 39):
 *   ROOT/global_step_N/optim_shards/rank_R_of_W.safetensors   "exp_avg", "exp_avg_sq" of rank R's pieces of the flat
 *                                                 vector, one per FSDP unit (model.h; model_unit_piece) back to back
 *                                                 (metadata layout "units", n_params; an earlier layout kept one range
 *                                                 per rank, metadata lo, hi: still read), each written by its rank (a
 *                                                 shared trainer.default_local_dir); the checkpoint is complete once
 *                                                 state.json and all W shards exist. The weights are the fp32
 *                                                 huggingface/ export, which rank 0 writes from the gathered copy.
 *   ROOT/global_step_N/actor/state.json          {"format": "dapo-learner-checkpoint", "version": 1, "step": N,
 *                                                 "adam_step", "policy_version", "rng_seed", "rng_counter",
 *                                                 "data_epoch", "data_cursor", "n_params"; "optim_shards" W when
 *                                                 sharded, "kl_ctrl_value" with algorithm.use_kl_in_reward}
 * Atomicity: everything is written into ROOT/global_step_N/.actor.tmp-<pid>, each file fsynced, then the directory is
 * renamed to `actor` and the parent fsynced; a checkpoint counts only when actor/state.json exists, so a crash or a
 * full disk leaves the previous checkpoints as they were (the temp directory is removed and the error reported).
 * Only `actor/` is ours: the coordinator may keep its own files in global_step_N/.
 * Weights and optimizer state are fp32 bit-for-bit, so resume is exact (same bits as an uninterrupted run).
 * Any W reads any W' (re-sharding on load: checkpoint_load_optim_range / _shard read pieces from any layout).
 * Not here: which rank owns which range (services/learner/shard.h), bf16 export (model_save), the coordinator's state. */
#ifndef DAPO_CHECKPOINT_H
#define DAPO_CHECKPOINT_H

#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

#define CHECKPOINT_VERSION 1
/* ROOT/latest_checkpointed_iteration.txt: the step of the last checkpoint written (verl's marker), so a run restarted
 * in a directory that holds newer steps of an earlier run (trainer.resume_mode disable) resumes its own last one. */
#define CHECKPOINT_LATEST_FILE "latest_checkpointed_iteration.txt"

typedef struct {
    long     step;            /* global steps completed (verl global_steps); names the directory */
    long     adam_step;       /* optimizer steps taken (bias correction); restored into Model.adam_step */
    int64_t  policy_version;  /* weights version the rollouts know these weights by */
    uint64_t rng_seed;        /* counter-based RNG (core/rng.h): the seed and the next counter are the whole state */
    uint64_t rng_counter;
    long     data_epoch;      /* dapo-sft: data epoch and position in it (0 for the learner daemon) */
    long     data_cursor;
    int      optim_shards;    /* 0: actor/optim.safetensors; W > 0: the optimizer state is in W shard files (see top) */
    double   kl_ctrl_value;   /* the learner's KL-in-reward controller (algorithm.kl_ctrl); 0: none ("kl_ctrl_value",
                                 written only when > 0) */
} CheckpointState;

/* Writes ROOT/global_step_<st->step>/actor (see top) from a train-mode model (params, adam_m, adam_v) and points
 * CHECKPOINT_LATEST_FILE at it, then, when
 * max_keep > 0, removes the oldest complete checkpoints older than it beyond max_keep (never the one just written;
 * newer steps belong to an earlier run and are left alone, with a warning). An existing
 * checkpoint of the same step is replaced only after the new one is complete. Returns 0, or ERR_IO naming the failing
 * file and errno text (e.g. "No space left on device"); on failure nothing of the new checkpoint remains and older
 * ones are untouched. ERR_INVAL for a model without optimizer state (unless st->optim_shards > 0: then no optimizer
 * file is written here; each rank writes its shard with checkpoint_save_optim_shard). */
int checkpoint_save(const char *root, const Model *m, const CheckpointState *st, int max_keep, char err[ERR_LEN]);

/* checkpoint_save with the weights taken from params[n_params] (the flat layout) instead of the model's slab: how rank 0
 * of a sharded run (ModelOptions.shard_world > 1: the model holds windows) exports the copy it gathered. */
int checkpoint_save_params(const char *root, const Model *m, const float *params, const CheckpointState *st,
                           int max_keep, char err[ERR_LEN]);

/* Rank `rank` of `world`'s optimizer shard of step `step`: mom and var hold its pieces of every FSDP unit of m
 * (model_unit_piece(m, u, rank, world), u in order, back to back; the layout of services/learner/shard.h). Written to
 * ROOT/global_step_<step>/optim_shards/rank_<rank>_of_<world>.safetensors (temp file + fsync + rename; the directories
 * are made). 0 or ERR_IO / ERR_INVAL. */
int checkpoint_save_optim_shard(const char *root, long step, const Model *m, int rank, int world, const float *mom,
                                const float *var, char err[ERR_LEN]);

/* Reads [lo, hi) of the flat Adam moments of the checkpoint in dir (ROOT/global_step_N or its actor/) into mom and var
 * (hi - lo floats each), whichever layout it was written in and whatever W; m gives the parameter count and the units.
 * 0, or ERR_IO / ERR_INVAL (another n_params, a shard missing or of the wrong size; named). */
int checkpoint_load_optim_range(const char *dir, const Model *m, long lo, long hi, float *mom, float *var,
                                char err[ERR_LEN]);
/* The same into rank `rank` of `world`'s pieces (the layout checkpoint_save_optim_shard writes): re-sharding. */
int checkpoint_load_optim_shard(const char *dir, const Model *m, int rank, int world, float *mom, float *var,
                                char err[ERR_LEN]);
/* The Hugging Face directory of the checkpoint in dir (ROOT/global_step_N or its actor/) into out (n bytes). */
void checkpoint_model_dir(const char *dir, char *out, size_t n);

/* Finds the checkpoint to resume under root: the one CHECKPOINT_LATEST_FILE names when it is complete, else the newest
 * complete one (a directory written before the marker existed); writes "ROOT/global_step_N" into path (n bytes) and
 * N into *step. 0, or ERR_NOTFOUND (no checkpoint; not an error for resume_mode auto) / ERR_IO. */
int checkpoint_find_latest(const char *root, char *path, size_t n, long *step, char err[ERR_LEN]);

/* Loads a checkpoint directory (ROOT/global_step_N or its actor/ subdirectory): the model in the given options (train
 * mode to get the optimizer state back), the AdamW moments (when opt->train and the model holds them: with
 * opt->shard_world > 1 the caller reads its range, checkpoint_load_optim_range) and *st. Caller frees with model_free.
 * NULL on error: ERR_IO / ERR_DECODE (state.json missing or malformed), ERR_VERSION (a newer format: the message says
 * which dapo wrote it), ERR_INVAL (optimizer state of another size). */
Model *checkpoint_load(const char *dir, const ModelOptions *opt, CheckpointState *st, char err[ERR_LEN]);

/* Reads only state.json of a checkpoint directory. 0 or an error as checkpoint_load. */
int checkpoint_read_state(const char *dir, CheckpointState *st, char err[ERR_LEN]);

/* rm -rf path (no symlinks followed). 0 or ERR_IO. For pruning and tests. */
int checkpoint_remove_tree(const char *path, char err[ERR_LEN]);

#endif
