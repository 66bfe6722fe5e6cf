/* common/model/checkpoint.c: atomic learner checkpoints (see checkpoint.h for the layout and the rules).
 * Not here: when to checkpoint (the learner daemon and dapo-sft decide), the coordinator's state. */
#define _XOPEN_SOURCE 700
#include "model/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsutil.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "model/model_internal.h"

#define CHECKPOINT_FORMAT "dapo-learner-checkpoint"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p) ? -1 : 0;
}

int checkpoint_remove_tree(const char *path, char err[ERR_LEN]) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return errno == ENOENT ? 0 : err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    if (nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return err_set(err, ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    return 0;
}

static int fsync_path(const char *path, int dir, char err[ERR_LEN]) {
    int fd = open(path, (dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    int bad = fsync(fd) != 0 && !(dir && errno == EINVAL);
    int e = errno;
    close(fd);
    return bad ? err_set(err, ERR_IO, "fsync %s: %s", path, strerror(e)) : 0;
}

/* fsync every regular file of dir (one level) and dir itself. */
static int fsync_dir_files(const char *dir, char err[ERR_LEN]) {
    DIR *d = opendir(dir);
    if (!d) return err_set(err, ERR_IO, "%s: %s", dir, strerror(errno));
    struct dirent *e;
    int rc = 0;
    char p[4096];
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) rc = fsync_path(p, 0, err);
    }
    closedir(d);
    return rc ? rc : fsync_path(dir, 1, err);
}

static int write_state(const char *path, const CheckpointState *st, long n_params, char err[ERR_LEN]) {
    json_t *o = json_pack("{s:s, s:i, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:I}", "format", CHECKPOINT_FORMAT, "version",
                          CHECKPOINT_VERSION, "step", (json_int_t)st->step, "adam_step", (json_int_t)st->adam_step,
                          "policy_version", (json_int_t)st->policy_version, "rng_seed", "", "rng_counter", "",
                          "data_epoch", (json_int_t)st->data_epoch, "data_cursor", (json_int_t)st->data_cursor,
                          "n_params", (json_int_t)n_params);
    if (!o) return err_set(err, ERR_NOMEM, "checkpoint: json_pack");
    char u[32];                                   /* 64-bit unsigned values as decimal strings: JSON ints are signed */
    snprintf(u, sizeof u, "%" PRIu64, st->rng_seed);
    json_object_set_new(o, "rng_seed", json_string(u));
    snprintf(u, sizeof u, "%" PRIu64, st->rng_counter);
    json_object_set_new(o, "rng_counter", json_string(u));
    if (st->optim_shards > 0) json_object_set_new(o, "optim_shards", json_integer(st->optim_shards));
    if (st->kl_ctrl_value > 0) json_object_set_new(o, "kl_ctrl_value", json_real(st->kl_ctrl_value));
    char *text = json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(o);
    if (!text) return err_set(err, ERR_NOMEM, "checkpoint: json_dumps");
    int rc = fs_write_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

static int parse_step_dir(const char *name, long *step) {
    if (strncmp(name, "global_step_", 12) != 0 || !name[12]) return 0;
    char *end;
    long v = strtol(name + 12, &end, 10);
    if (*end || v < 0) return 0;
    *step = v;
    return 1;
}

static void shard_path(const char *step_dir, int rank, int world, char *out, size_t n) {
    snprintf(out, n, "%s/optim_shards/rank_%d_of_%d.safetensors", step_dir, rank, world);
}

/* state.json is there, and with a sharded optimizer every shard too. missing (NULL: not wanted): the first file that
 * is not, or "". */
static int complete_why(const char *root, const char *name, char *missing, size_t mn) {
    char p[4400], d[4096];
    if (missing) missing[0] = 0;
    snprintf(p, sizeof p, "%s/%s/actor/state.json", root, name);
    if (access(p, R_OK) != 0) {
        if (missing) snprintf(missing, mn, "%s", p);
        return 0;
    }
    json_t *o = json_load_file(p, 0, NULL);
    int W = (int)json_integer_value(json_object_get(o, "optim_shards"));
    json_decref(o);
    snprintf(d, sizeof d, "%s/%s", root, name);
    for (int r = 0; r < W; r++) {
        shard_path(d, r, W, p, sizeof p);
        if (access(p, R_OK) != 0) {
            if (missing) snprintf(missing, mn, "%s", p);
            return 0;
        }
    }
    return 1;
}

static int complete(const char *root, const char *name) { return complete_why(root, name, NULL, 0); }

static int cmp_long_desc(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Complete checkpoint steps under root, newest first (xmalloc'd; *n entries). */
static long *list_steps(const char *root, int *n) {
    *n = 0;
    DIR *d = opendir(root);
    if (!d) return NULL;
    long *v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long s;
        if (!parse_step_dir(e->d_name, &s) || !complete(root, e->d_name)) continue;
        XGROW(v, *n, cap, 16);
        v[(*n)++] = s;
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_long_desc);
    return v;
}

static void prune(const char *root, long keep_step, int max_keep) {
    int n;
    long *v = list_steps(root, &n);
    int kept = 1;                                 /* the checkpoint just written */
    for (int i = 0; i < n; i++) {
        if (v[i] == keep_step) continue;
        if (v[i] > keep_step) {                   /* an earlier run's (resume_mode disable, resume_path): not ours to
                                                   * delete, and not counted against this run's max_keep */
            log_warn("checkpoint: global_step_%ld is newer than this run's step %ld (an earlier run's): left alone",
                     v[i], keep_step);
            continue;
        }
        if (kept < max_keep) { kept++; continue; }
        char p[4096], e[ERR_LEN];
        snprintf(p, sizeof p, "%s/global_step_%ld/actor", root, v[i]);
        if (checkpoint_remove_tree(p, e)) { log_warn("checkpoint prune: %s", e); continue; }
        snprintf(p, sizeof p, "%s/global_step_%ld/optim_shards", root, v[i]);
        if (checkpoint_remove_tree(p, e)) log_warn("checkpoint prune: %s", e);
        snprintf(p, sizeof p, "%s/global_step_%ld", root, v[i]);
        rmdir(p);                                 /* fails (kept) while the coordinator still has files there */
        log_info("checkpoint: removed global_step_%ld (trainer.max_actor_ckpt_to_keep = %d)", v[i], max_keep);
    }
    xfree(v);
}

int checkpoint_save(const char *root, const Model *m, const CheckpointState *st, int max_keep, char err[ERR_LEN]) {
    return checkpoint_save_params(root, m, NULL, st, max_keep, err);
}

int checkpoint_save_params(const char *root, const Model *m, const float *params, const CheckpointState *st,
                           int max_keep, char err[ERR_LEN]) {
    if (!m || !st || !root || !root[0]) return err_set(err, ERR_INVAL, "checkpoint_save: bad arguments");
    if ((!m->adam_m || !m->adam_v) && st->optim_shards <= 0)
        return err_set(err, ERR_INVAL, "checkpoint_save: the model has no optimizer state (train mode)");
    char step_dir[4096], tmp[4200], hf[4300], path[4400], final[4200], old[4300];
    snprintf(step_dir, sizeof step_dir, "%s/global_step_%ld", root, st->step);
    snprintf(tmp, sizeof tmp, "%s/.actor.tmp-%d", step_dir, (int)getpid());
    snprintf(final, sizeof final, "%s/actor", step_dir);
    int rc = fs_mkdir_p(step_dir, err);
    if (rc) return rc;
    checkpoint_remove_tree(tmp, err);                   /* leftovers of a crashed attempt by a process with our pid */
    if (mkdir(tmp, 0755) != 0) return err_set(err, ERR_IO, "%s: %s", tmp, strerror(errno));
    snprintf(hf, sizeof hf, "%s/huggingface", tmp);
    rc = model_save_params(m, params, hf, ST_F32, err);
    if (!rc && st->optim_shards <= 0) {
        float *hm = model__host_slab(m, MODEL_ADAM_M, 1), *hv = model__host_slab(m, MODEL_ADAM_V, 1);
        StWriteTensor t[2] = {{.name = "exp_avg", .ndim = 1, .shape = {m->n_params}, .f32 = hm},
                              {.name = "exp_avg_sq", .ndim = 1, .shape = {m->n_params}, .f32 = hv}};
        const char *meta[] = {"format", "pt", "dapo_checkpoint_version", "1"};
        snprintf(path, sizeof path, "%s/optim.safetensors", tmp);
        rc = st_write(path, t, 2, ST_F32, meta, 2, err);
        model__host_slab_done((Model *)m, MODEL_ADAM_M, hm, 0);
        model__host_slab_done((Model *)m, MODEL_ADAM_V, hv, 0);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/state.json", tmp);
        rc = write_state(path, st, m->n_params, err);
    }
    if (!rc) rc = fsync_dir_files(hf, err);
    if (!rc) rc = fsync_dir_files(tmp, err);
    if (!rc) {                                    /* same step again: move the old one aside only now */
        snprintf(old, sizeof old, "%s/.actor.old-%d", step_dir, (int)getpid());
        if (access(final, F_OK) == 0 && rename(final, old) != 0)
            rc = err_set(err, ERR_IO, "%s: %s", final, strerror(errno));
        if (!rc && rename(tmp, final) != 0) rc = err_set(err, ERR_IO, "rename %s: %s", tmp, strerror(errno));
        if (!rc) {
            char e2[ERR_LEN];
            checkpoint_remove_tree(old, e2);
            rc = fsync_path(step_dir, 1, err);
            if (!rc) rc = fsync_path(root, 1, err);
        }
    }
    if (rc) {
        char e2[ERR_LEN], why[ERR_LEN];
        snprintf(why, sizeof why, "%s", err);
        checkpoint_remove_tree(tmp, e2);
        rmdir(step_dir);                          /* only if empty */
        long prev = -1;
        char p[4096];
        if (checkpoint_find_latest(root, p, sizeof p, &prev, e2)) prev = -1;
        if (prev >= 0)
            return err_set(err, ERR_IO, "checkpoint of step %ld not written, global_step_%ld kept: %s", st->step, prev, why);
        return err_set(err, ERR_IO, "checkpoint of step %ld not written (no earlier checkpoint): %s", st->step, why);
    }
    char mark[4200], text[32];
    snprintf(mark, sizeof mark, "%s/%s", root, CHECKPOINT_LATEST_FILE);
    snprintf(text, sizeof text, "%ld", st->step);
    rc = fs_write_atomic(mark, text, strlen(text), err);
    if (rc) return rc;
    if (max_keep > 0) prune(root, st->step, max_keep);
    return 0;
}

/* The step named by ROOT/latest_checkpointed_iteration.txt when it is a complete checkpoint; -1 otherwise. */
static long marked_step(const char *root) {
    char p[4200], name[64], text[32] = "";
    snprintf(p, sizeof p, "%s/%s", root, CHECKPOINT_LATEST_FILE);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    if (!fgets(text, sizeof text, f)) text[0] = 0;
    fclose(f);
    text[strcspn(text, " \r\n")] = 0;
    snprintf(name, sizeof name, "global_step_%s", text);
    long step;
    char missing[4400];
    if (!parse_step_dir(name, &step)) return -1;
    if (complete_why(root, name, missing, sizeof missing)) return step;
    log_warn("checkpoint: %s/%s (named by %s) is incomplete, %s is missing: resuming from the newest complete one",
             root, name, CHECKPOINT_LATEST_FILE, missing);
    return -1;
}

int checkpoint_find_latest(const char *root, char *path, size_t n, long *step, char err[ERR_LEN]) {
    long marked = marked_step(root);
    if (marked >= 0) {
        *step = marked;
        snprintf(path, n, "%s/global_step_%ld", root, marked);
        return 0;
    }
    int k;
    long *v = list_steps(root, &k);
    if (!k) {
        xfree(v);
        return err_set(err, ERR_NOTFOUND, "no complete checkpoint (global_step_N/actor) under %s", root);
    }
    *step = v[0];
    snprintf(path, n, "%s/global_step_%ld", root, v[0]);
    xfree(v);
    return 0;
}

/* dir may be ROOT/global_step_N or ROOT/global_step_N/actor: writes the actor dir into out. */
static void actor_dir(const char *dir, char *out, size_t n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/state.json", dir);
    if (access(p, F_OK) == 0) snprintf(out, n, "%s", dir);
    else snprintf(out, n, "%s/actor", dir);
}

static int get_u64(json_t *o, const char *key, uint64_t *v) {
    json_t *x = json_object_get(o, key);
    if (json_is_integer(x)) { *v = (uint64_t)json_integer_value(x); return 0; }
    if (!json_is_string(x)) return -1;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(json_string_value(x), &end, 10);
    if (*end || errno) return -1;
    *v = u;
    return 0;
}

int checkpoint_read_state(const char *dir, CheckpointState *st, char err[ERR_LEN]) {
    char ad[4096], p[4200];
    actor_dir(dir, ad, sizeof ad);
    snprintf(p, sizeof p, "%s/state.json", ad);
    json_error_t je;
    json_t *o = json_load_file(p, 0, &je);
    if (!o) return err_set(err, access(p, F_OK) ? ERR_IO : ERR_DECODE, "%s: %s", p, je.text);
    memset(st, 0, sizeof *st);
    const char *fmt = json_string_value(json_object_get(o, "format"));
    json_t *ver = json_object_get(o, "version");
    int rc = 0;
    if (!fmt || strcmp(fmt, CHECKPOINT_FORMAT) != 0 || !json_is_integer(ver))
        rc = err_set(err, ERR_DECODE, "%s: not a dapo learner checkpoint (format '%s')", p, fmt ? fmt : "");
    else if (json_integer_value(ver) != CHECKPOINT_VERSION)
        rc = err_set(err, ERR_VERSION, "%s: checkpoint format version %lld, this dapo reads version %d: resume with the "
                     "dapo build that wrote it, or start from its huggingface/ weights (actor_rollout_ref.model.path)",
                     p, (long long)json_integer_value(ver), CHECKPOINT_VERSION);
    uint64_t seed = 0, ctr = 0;
    json_t *s = json_object_get(o, "step"), *a = json_object_get(o, "adam_step"), *v = json_object_get(o, "policy_version");
    if (!rc && (!json_is_integer(s) || !json_is_integer(a) || !json_is_integer(v) || get_u64(o, "rng_seed", &seed) ||
                get_u64(o, "rng_counter", &ctr)))
        rc = err_set(err, ERR_DECODE, "%s: step, adam_step, policy_version, rng_seed or rng_counter missing or not a number", p);
    if (!rc) {
        st->step = (long)json_integer_value(s);
        st->adam_step = (long)json_integer_value(a);
        st->policy_version = (int64_t)json_integer_value(v);
        st->rng_seed = seed;
        st->rng_counter = ctr;
        st->data_epoch = (long)json_integer_value(json_object_get(o, "data_epoch"));
        st->data_cursor = (long)json_integer_value(json_object_get(o, "data_cursor"));
        st->optim_shards = (int)json_integer_value(json_object_get(o, "optim_shards"));
        json_t *kv = json_object_get(o, "kl_ctrl_value");
        st->kl_ctrl_value = json_is_number(kv) ? json_number_value(kv) : 0;
        if (kv && !(json_is_number(kv) && st->kl_ctrl_value > 0 && isfinite(st->kl_ctrl_value)))
            rc = err_set(err, ERR_DECODE, "%s: kl_ctrl_value is not a positive number", p);
        if (st->optim_shards < 0 || st->optim_shards > 1 << 20)
            rc = err_set(err, ERR_DECODE, "%s: optim_shards %d is not a number of ranks", p, st->optim_shards);
    }
    json_decref(o);
    return rc;
}

Model *checkpoint_load(const char *dir, const ModelOptions *opt, CheckpointState *st, char err[ERR_LEN]) {
    char ad[4096], p[4200];
    if (checkpoint_read_state(dir, st, err)) return NULL;
    actor_dir(dir, ad, sizeof ad);
    snprintf(p, sizeof p, "%s/huggingface", ad);
    Model *m = model_load(p, opt, err);
    if (!m) return NULL;
    if (!opt->train) return m;
    m->adam_step = st->adam_step;
    if (!m->adam_m) return m;      /* sharded: the caller reads its pieces (checkpoint_model_dir, _load_optim_shard) */
    float *hm = model__host_slab(m, MODEL_ADAM_M, 0), *hv = model__host_slab(m, MODEL_ADAM_V, 0);
    int rc = checkpoint_load_optim_range(dir, m, 0, m->n_params, hm, hv, err);
    model__host_slab_done(m, MODEL_ADAM_M, hm, !rc);
    model__host_slab_done(m, MODEL_ADAM_V, hv, !rc);
    if (rc) {
        char why[ERR_LEN];
        snprintf(why, sizeof why, "%s", err);
        err_set(err, rc, "%s: optimizer state: %s", ad, why);
        model_free(m);
        return NULL;
    }
    return m;
}

/* One piece of the flat vector: [lo, hi) stored at `pos` floats into a file's tensors (source) or a caller's arrays
 * (target). */
typedef struct { long lo, hi, pos; } Piece;

/* Rank `rank` of `world`'s pieces, one per FSDP unit (model_unit_piece), back to back: returns the floats in all. */
static long unit_pieces(const Model *m, int rank, int world, Piece *p) {
    long pos = 0;
    for (int u = 0; u < model_n_units(m); u++) {
        model_unit_piece(m, u, rank, world, &p[u].lo, &p[u].hi);
        p[u].pos = pos;
        pos += p[u].hi - p[u].lo;
    }
    return pos;
}

int checkpoint_save_optim_shard(const char *root, long step, const Model *m, int rank, int world, const float *mom,
                                const float *var, char err[ERR_LEN]) {
    if (!root || !m || rank < 0 || rank >= world)
        return err_set(err, ERR_INVAL, "checkpoint_save_optim_shard: bad arguments (rank %d of %d)", rank, world);
    char dir[4200], path[4400], c[24], rk[16], wd[16];
    snprintf(dir, sizeof dir, "%s/global_step_%ld/optim_shards", root, step);
    int rc = fs_mkdir_p(dir, err);
    if (rc) return rc;
    snprintf(dir, sizeof dir, "%s/global_step_%ld", root, step);
    shard_path(dir, rank, world, path, sizeof path);
    Piece *p = xcalloc((size_t)model_n_units(m), sizeof *p);
    long k = unit_pieces(m, rank, world, p);
    xfree(p);
    snprintf(c, sizeof c, "%ld", model_n_params(m));
    snprintf(rk, sizeof rk, "%d", rank);
    snprintf(wd, sizeof wd, "%d", world);
    static const float none[1] = {0};
    StWriteTensor t[2] = {{.name = "exp_avg", .ndim = 1, .shape = {k}, .f32 = k > 0 ? mom : none},
                          {.name = "exp_avg_sq", .ndim = 1, .shape = {k}, .f32 = k > 0 ? var : none}};
    const char *meta[] = {"format", "pt", "dapo_checkpoint_version", "1", "layout", "units", "n_params", c,
                          "rank", rk, "world", wd};
    return st_write(path, t, 2, ST_F32, meta, 6, err);
}

/* Copies, from one file whose tensors hold the source pieces src[0..ns), every overlap with the target pieces
 * tgt[0..nt) into mom / var. want: the floats the file's tensors must hold. */
static int copy_pieces(const char *path, const Piece *src, int ns, long want, const Piece *tgt, int nt, float *mom,
                       float *var, char err[ERR_LEN]) {
    SafeTensors *s = st_open(path, err);
    if (!s) return ERR_IO;
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        const StTensor *t = st_find(s, k ? "exp_avg_sq" : "exp_avg");
        if (!t || t->dtype != ST_F32 || t->numel != want) {
            rc = err_set(err, ERR_INVAL, "%s: %s missing, not F32 or not of %ld floats", path, k ? "exp_avg_sq" : "exp_avg",
                         want);
            break;
        }
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < nt; j++) {
                long from = src[i].lo > tgt[j].lo ? src[i].lo : tgt[j].lo, to = src[i].hi < tgt[j].hi ? src[i].hi : tgt[j].hi;
                if (from < to)
                    memcpy((k ? var : mom) + tgt[j].pos + (from - tgt[j].lo),
                           (const float *)t->data + src[i].pos + (from - src[i].lo), (size_t)(to - from) * sizeof(float));
            }
    }
    st_close(s);
    return rc;
}

/* Fills the target pieces from the checkpoint in dir, whatever layout and W it was written with: actor/optim.safetensors
 * (the whole vector), shard files of FSDP units (metadata layout "units") or of one range each (lo, hi: the first
 * sharded layout). */
static int load_pieces(const char *dir, const Model *m, const Piece *tgt, int nt, float *mom, float *var,
                       char err[ERR_LEN]) {
    CheckpointState st;
    int rc = checkpoint_read_state(dir, &st, err);
    if (rc) return rc;
    long n = model_n_params(m);
    char ad[4096], p[4400], step_dir[4200];
    actor_dir(dir, ad, sizeof ad);
    if (st.optim_shards <= 0) {
        snprintf(p, sizeof p, "%s/optim.safetensors", ad);
        Piece all = {0, n, 0};
        return copy_pieces(p, &all, 1, n, tgt, nt, mom, var, err);
    }
    snprintf(step_dir, sizeof step_dir, "%s/..", ad);
    int W = st.optim_shards, U = model_n_units(m);
    Piece *src = xcalloc((size_t)U, sizeof *src);
    for (int r = 0; r < W && !rc; r++) {
        shard_path(step_dir, r, W, p, sizeof p);
        SafeTensors *f = st_open(p, err);
        if (!f) { rc = ERR_IO; break; }
        const char *layout = st_metadata(f, "layout"), *np = st_metadata(f, "n_params");
        const char *lo = st_metadata(f, "lo"), *hi = st_metadata(f, "hi");
        const char *fr = st_metadata(f, "rank"), *fw = st_metadata(f, "world");
        int units = layout && !strcmp(layout, "units");
        Piece one = {lo ? atol(lo) : 0, hi ? atol(hi) : 0, 0};
        if (!np || atol(np) != n) rc = err_set(err, ERR_INVAL, "%s: written for %s parameters, the model has %ld", p,
                                               np ? np : "an unknown number of", n);
        else if (!units && (!lo || !hi || one.lo < 0 || one.hi < one.lo || one.hi > n))
            rc = err_set(err, ERR_INVAL, "%s: neither FSDP units nor a valid range (lo, hi)", p);
        else if (units && (!fr || !fw || atoi(fr) != r || atoi(fw) != W))
            rc = err_set(err, ERR_INVAL, "%s: written by rank %s of %s, expected rank %d of %d (a shard file renamed or "
                         "copied from another run?)", p, fr ? fr : "?", fw ? fw : "?", r, W);
        st_close(f);
        if (rc) break;
        long want = units ? unit_pieces(m, r, W, src) : one.hi - one.lo;
        rc = copy_pieces(p, units ? src : &one, units ? U : 1, want, tgt, nt, mom, var, err);
    }
    xfree(src);
    return rc;
}

int checkpoint_load_optim_range(const char *dir, const Model *m, long lo, long hi, float *mom, float *var,
                                char err[ERR_LEN]) {
    if (lo < 0 || hi < lo || hi > model_n_params(m))
        return err_set(err, ERR_INVAL, "checkpoint_load_optim_range: [%ld, %ld) outside the %ld parameters", lo, hi,
                       model_n_params(m));
    Piece t = {lo, hi, 0};
    return load_pieces(dir, m, &t, 1, mom, var, err);
}

int checkpoint_load_optim_shard(const char *dir, const Model *m, int rank, int world, float *mom, float *var,
                                char err[ERR_LEN]) {
    if (rank < 0 || rank >= world)
        return err_set(err, ERR_INVAL, "checkpoint_load_optim_shard: rank %d of %d", rank, world);
    Piece *t = xcalloc((size_t)model_n_units(m), sizeof *t);
    unit_pieces(m, rank, world, t);
    int rc = load_pieces(dir, m, t, model_n_units(m), mom, var, err);
    xfree(t);
    return rc;
}

void checkpoint_model_dir(const char *dir, char *out, size_t n) {
    char ad[4096];
    actor_dir(dir, ad, sizeof ad);
    snprintf(out, n, "%s/huggingface", ad);
}
