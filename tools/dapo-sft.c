/* tools/dapo-sft.c: supervised fine-tuning (issue 7) — used to warm-start the tiny default model before DAPO.
 * Data: JSONL lines {"prompt": "text" | [{"role", "content"}, ...], "response": "text"} or the verl schema
 * (data_source, prompt messages, reward_model.ground_truth) with the response in extra_info.solution. Prompts go
 * through the same path as the RL prompts (io/dataset.h: chat template with the generation prompt, then
 * data.max_prompt_length with data.filter_overlong_prompts / data.truncation), so SFT and DAPO see identical prompt
 * tokens; the response is tokenized and ends with the tokenizer's EOS. Examples longer than
 * data.max_prompt_length + data.max_response_length are dropped (counted).
 * Loss: mean negative log-likelihood over the response tokens of the batch (verl's SFT trainer, token-mean), prompt
 * tokens get no loss. Batches: --batch sequences per optimizer step, through the learner's training path
 * (model/seqpack.h: chunks that fit the activation slab, packed back to back without padding; gradients accumulate). Order: a Philox-seeded shuffle per epoch, so a run is
 * reproducible and resumes exactly (the cursor is in the checkpoint). Optimizer: AdamW with
 * actor_rollout_ref.actor.optim.* (or the flags below), warm-up + constant/cosine schedule, grad clip.
 * Model: actor_rollout_ref.model.path (or --model); a directory with only config.json starts from random weights
 * (normal(0, initializer_range), seeded). Tokenizer: data.tokenizer_path, else the model directory.
 * Eval hook (--val FILE, every --eval-every steps and at the end; --stop-acc A stops at the first evaluation whose
 * greedy accuracy reaches A; --max-time S stops after the first step ending S seconds after the start, evaluation
 * time included, for a wall-clock-matched control): held-out response NLL, and with a ground truth,
 * greedy accuracy of up to --eval-max prompts scored by the verifier's rules (reward/reward.h).
 * Output: --out DIR gets the final Hugging Face model (config.json, model.safetensors fp32) plus the tokenizer files;
 * --save-every K writes learner-format checkpoints to DIR/checkpoints (model/checkpoint.h); --resume continues from the
 * newest one.
 * Not here: multi-rank SFT, sequence packing across examples with masks, LoRA. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "settings/settings.h"
#include "core/cliarg.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/threads_env.h"
#include "dapo/val_metrics.h"
#include "io/dataset.h"
#include "model/adamw.h"
#include "model/checkpoint.h"
#include "model/generate.h"
#include "model/model.h"
#include "model/seqpack.h"
#include "reward/reward.h"
#include "tokenizer/tokenizer.h"

/* The examples as the learner's sequence set (model/seqpack.h): prompt + response (EOS included) back to back. */
typedef struct {
    int32_t  *ids;             /* [n_ids] every example's tokens */
    size_t    n_ids, cap_ids;
    uint32_t *offsets;         /* [n + 1] example i is ids[offsets[i] .. offsets[i+1]) */
    uint32_t *prompt_lengths;  /* [n] */
    char    **gt, **src;       /* [n] ground truth / data source for the accuracy eval ("" when none) */
    int       n, cap;
    long      dropped_long, dropped_bad;
} Examples;

static SeqSet seqs_of(const Examples *e) {
    return (SeqSet){ .input_ids = e->ids, .offsets = e->offsets, .prompt_lengths = e->prompt_lengths, .n_seqs = e->n };
}

typedef struct {
    const char *data, *val, *out, *model;
    long  steps;
    int   epochs, batch, warmup, eval_every, eval_max, save_every, log_every, resume, schedule_cosine;
    double lr, min_lr_ratio, clip, wd, beta2;
    double warmup_ratio;   /* warmup < 0: warmup_ratio x the total steps (actor.optim.lr_warmup_steps_ratio, verl) */
    double stop_acc;       /* > 0: stop at the first evaluation whose held-out greedy accuracy reaches it */
    double max_time_s;     /* > 0: stop after the first step that ends this many seconds (wall clock) after the start */
    unsigned long seed;
} Opts;

static void usage(const char *argv0, FILE *f) {
    fprintf(f,
            "usage: %s [--config FILE] [key.path=value ...] --data FILE[,FILE...] --out DIR --model DIR [--val FILE]\n"
            "       [--steps N | --epochs E] [--batch SEQS] [--lr LR] [--warmup STEPS] [--schedule constant|cosine]\n"
            "       [--min-lr-ratio R] [--clip NORM] [--weight-decay WD] [--beta2 B2] [--eval-every K] [--eval-max N]\n"
            "       [--stop-acc A] [--max-time SECONDS (0: no limit, the default)]\n"
            "       [--save-every K] [--resume] [--log-every K] [--seed S] [--print-config] [--help]\n"
            "--model DIR may instead be given as actor_rollout_ref.model.path=DIR; a directory with only config.json\n"
            "starts from random weights.\n", argv0);
}

static void examples_free(Examples *e) {
    for (int i = 0; i < e->n; i++) { xfree(e->gt[i]); xfree(e->src[i]); }
    xfree(e->ids); xfree(e->offsets); xfree(e->prompt_lengths); xfree(e->gt); xfree(e->src);
    memset(e, 0, sizeof *e);
}

/* Appends one example: prompt p[np] then response r[nr]. */
static int examples_add(Examples *e, const int32_t *p, int np, const int32_t *r, size_t nr, const char *gt,
                        const char *src, char err[ERR_LEN]) {
    size_t len = (size_t)np + nr;
    if (e->n_ids + len > UINT32_MAX)
        return err_set(err, ERR_TOO_BIG, "more than %u tokens of examples in one file set", UINT32_MAX);
    if (e->n + 1 >= e->cap) {
        e->cap = e->cap ? 2 * e->cap : 256;
        e->offsets = xrealloc(e->offsets, (size_t)(e->cap + 1) * sizeof *e->offsets);
        e->prompt_lengths = xrealloc(e->prompt_lengths, (size_t)e->cap * sizeof *e->prompt_lengths);
        e->gt = xrealloc(e->gt, (size_t)e->cap * sizeof *e->gt);
        e->src = xrealloc(e->src, (size_t)e->cap * sizeof *e->src);
    }
    while (e->n_ids + len > e->cap_ids) {
        e->cap_ids = e->cap_ids ? 2 * e->cap_ids : 65536;
        e->ids = xrealloc(e->ids, e->cap_ids * sizeof *e->ids);
    }
    memcpy(e->ids + e->n_ids, p, (size_t)np * sizeof(int32_t));
    memcpy(e->ids + e->n_ids + np, r, nr * sizeof(int32_t));
    e->offsets[e->n] = (uint32_t)e->n_ids;
    e->n_ids += len;
    e->offsets[e->n + 1] = (uint32_t)e->n_ids;
    e->prompt_lengths[e->n] = (uint32_t)np;
    e->gt[e->n] = xstrdup(gt ? gt : "");
    e->src[e->n] = xstrdup(src ? src : "");
    e->n++;
    return 0;
}

/* One JSONL line -> example. 0 added, 1 dropped (counted), < 0 fatal. */
static int parse_example(const char *line, size_t len, Tokenizer *tok, const DatasetOptions *dopt, int max_len,
                         int32_t eos, Examples *out, char err[ERR_LEN]) {
    json_error_t je;
    json_t *o = json_loadb(line, len, JSON_ALLOW_NUL, &je);
    if (!json_is_object(o)) { json_decref(o); out->dropped_bad++; return 1; }
    json_t *p = json_object_get(o, "prompt"), *r = json_object_get(o, "response");
    if (!json_is_string(r)) r = json_object_get(json_object_get(o, "extra_info"), "solution");
    if (!json_is_string(r) || !(json_is_string(p) || json_is_array(p))) { json_decref(o); out->dropped_bad++; return 1; }
    /* normalise to the verl schema so io/dataset renders the prompt exactly as the RL run does */
    json_t *row = json_deep_copy(o);
    if (json_is_string(p)) json_object_set_new(row, "prompt", json_pack("[{s:s, s:O}]", "role", "user", "content", p));
    if (!json_is_object(json_object_get(row, "reward_model")))
        json_object_set_new(row, "reward_model", json_pack("{s:s, s:s}", "ground_truth", "", "style", "rule"));
    else if (!json_object_get(json_object_get(row, "reward_model"), "ground_truth"))
        json_object_set_new(json_object_get(row, "reward_model"), "ground_truth", json_string(""));
    char *text = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    DatasetItem it;
    memset(&it, 0, sizeof it);
    int rc = text ? dataset_parse_line(text, strlen(text), tok, dopt, &it, err) : ERR_NOMEM;
    free(text);
    if (rc == 1 || rc == ERR_DECODE) { json_decref(o); out->dropped_bad += rc != 1; out->dropped_long += rc == 1; return 1; }
    if (rc < 0) { json_decref(o); return rc; }
    TokIds resp = {0};
    rc = tokenizer_encode(tok, json_string_value(r), json_string_length(r), &resp, err);
    if (!rc) tok_ids_push(&resp, eos);
    if (!rc && it.n_ids + (int)resp.n > max_len) { out->dropped_long++; rc = 1; }
    if (!rc) rc = examples_add(out, it.ids, it.n_ids, resp.v, resp.n, it.ground_truth, it.data_source, err);
    tok_ids_free(&resp);
    dataset_item_free(&it);
    json_decref(o);
    return rc;
}

static int load_examples(const char *paths, Tokenizer *tok, const DatasetOptions *dopt, int max_len, int32_t eos,
                         Examples *out, char err[ERR_LEN]) {
    char *list = xstrdup(paths), *save = NULL;
    int rc = 0;
    for (char *path = strtok_r(list, ",", &save); path && !rc; path = strtok_r(NULL, ",", &save)) {
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) { rc = err_set(err, ERR_INVAL, "%s: is a directory, not a JSONL file", path); break; }
        FILE *f = fopen(path, "rb");
        if (!f) { rc = err_set(err, ERR_IO, "%s: cannot open: %s", path, strerror(errno)); break; }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        long ln = 0;
        while ((n = getline(&line, &cap, f)) > 0 && !rc) {
            ln++;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
            if (n == 0) continue;
            char e2[ERR_LEN];
            int r = parse_example(line, (size_t)n, tok, dopt, max_len, eos, out, e2);
            if (r < 0) rc = err_set(err, r, "%s:%ld: %s", path, ln, e2);
        }
        free(line);
        fclose(f);
    }
    xfree(list);
    return rc;
}

/* Epoch permutation from the seed (core/rng.h rng_permutation: the coordinator's shuffle, another tag). */
static void shuffle(int *perm, int n, unsigned long seed, long epoch) {
    rng_permutation(perm, n, (uint64_t)seed, (uint64_t)epoch, 0x5f7);
}

/* One pass over examples through the learner's path (model/seqpack.h): response NLL summed, response tokens counted,
 * and when train the gradient of scale * sum(logp) added (scale = -1 / (response tokens of the batch): token-mean NLL,
 * verl's SFT loss). */
typedef struct {
    int    train;
    double scale, nll;
    long   ntok;
} NllPass;

static int nll_chunk(SeqPack *p, SeqChunk *c, void *ud, char err[ERR_LEN]) {
    NllPass *a = ud;
    int rc = seqpack_forward(p, c, 0, err);
    if (rc) return rc;
    for (int j = 0; j < c->R; j++) {
        a->nll -= c->logp[j];
        c->dlogp[j] = (float)a->scale;
    }
    a->ntok += c->R;
    return a->train ? seqpack_backward(p, c, c->dlogp, NULL, err) : 0;
}

static int run_examples(SeqPack *p, const Examples *ex, const int *idx, int n, NllPass *a, char err[ERR_LEN]) {
    SeqSet set = seqs_of(ex);
    return seqpack_for_chunks(p, &set, idx, n, 1.0f, nll_chunk, a, NULL, err);
}

/* Held-out NLL per response token, and greedy accuracy on up to max_acc examples with a ground truth (-1: none). */
static int evaluate(Model *m, SeqPack *s, Tokenizer *tok, const Examples *val, int max_acc, int max_resp, int max_len,
                    double *nll_tok, double *acc, char err[ERR_LEN]) {
    int *idx = xmalloc((size_t)(val->n ? val->n : 1) * sizeof(int));
    for (int i = 0; i < val->n; i++) idx[i] = i;
    NllPass np = {0};
    int rc = run_examples(s, val, idx, val->n, &np, err);
    xfree(idx);
    if (rc) return rc;
    *nll_tok = np.ntok ? np.nll / (double)np.ntok : 0;
    *acc = -1;
    int n = 0;
    for (int i = 0; i < val->n && n < max_acc; i++) n += val->gt[i][0] != 0;
    if (!n) return 0;
    GenOptions go = {.max_num_seqs = n < 64 ? n : 64, .kv_cache_tokens = (long)(n < 64 ? n : 64) * (max_len + 16),
                     .max_batch_tokens = 1024};
    GenEngine *g = gen_engine_new(m, &go, err);
    if (!g) return ERR_INVAL;
    int added = 0, done = 0;
    ValAgg agg;                 /* greedy = one response per prompt: mean@1 over every held-out prompt */
    val_agg_init(&agg, 1);
    for (int i = 0; i < val->n && added < n; i++) {
        if (!val->gt[i][0]) continue;
        GenRequest r = {.tag = (uint64_t)i, .prompt = val->ids + val->offsets[i], .n_prompt = (int)val->prompt_lengths[i],
                        .max_tokens = max_resp,
                        .sp = {.temperature = 1, .top_p = 1, .greedy = 1}};
        uint64_t id;
        if ((rc = gen_engine_add(g, &r, &id, err))) break;
        added++;
    }
    RewardWs *ws = reward_ws_new();
    while (!rc && done < added) {
        if ((rc = gen_engine_step(g, err)) < 0) break;
        rc = 0;
        GenResult res;
        while (gen_engine_take(g, &res) == 1) {
            const char *gt = val->gt[res.tag], *src = val->src[res.tag];
            TokBuf text = {0};
            tokenizer_decode(tok, res.tokens, (size_t)res.n, true, &text);
            RewardResult rr;
            reward_score(ws, src, text.v ? text.v : "", text.n, gt, strlen(gt), false, 0, &rr);
            float a1 = rr.acc ? 1.0f : 0.0f;
            val_agg_add(&agg, "", &a1, NULL, 1);
            tok_buf_free(&text);
            gen_result_free(&res);
            done++;
        }
    }
    reward_ws_free(ws);
    gen_engine_free(g);
    if (!rc) *acc = added ? val_agg_overall_mean(&agg) : -1;
    val_agg_free(&agg);
    return rc;
}

static int copy_file(const char *from, const char *to, char err[ERR_LEN]) {
    size_t n;
    char *d = fs_read_all(from, 64 << 20, &n, err);
    if (!d) return ERR_IO;
    int rc = fs_write_atomic(to, d, n, err);
    xfree(d);
    return rc;
}

static int parse_opts(int argc, char **argv, Opts *o, char err[ERR_LEN]) {
    /* numeric flags: name, bounds, where (int, long, double or unsigned long) */
    struct { const char *flag; double lo, hi; int *i; long *l; double *d; unsigned long *u; } num[] = {
        {.flag = "--steps", 0, 1e12, .l = &o->steps}, {.flag = "--epochs", 0, 1e6, .i = &o->epochs},
        {.flag = "--batch", 1, 1 << 24, .i = &o->batch}, {.flag = "--lr", 0, 10, .d = &o->lr},
        {.flag = "--warmup", 0, 1e9, .i = &o->warmup}, {.flag = "--min-lr-ratio", 0, 1, .d = &o->min_lr_ratio},
        {.flag = "--clip", 0, 1e9, .d = &o->clip}, {.flag = "--weight-decay", 0, 10, .d = &o->wd},
        {.flag = "--beta2", 0, 1, .d = &o->beta2}, {.flag = "--eval-every", 0, 1e9, .i = &o->eval_every},
        {.flag = "--eval-max", 0, 1e9, .i = &o->eval_max}, {.flag = "--stop-acc", 0, 1, .d = &o->stop_acc},
        {.flag = "--max-time", 0, 1e9, .d = &o->max_time_s},
        {.flag = "--save-every", 0, 1e9, .i = &o->save_every}, {.flag = "--log-every", 0, 1e9, .i = &o->log_every},
        {.flag = "--seed", 0, 1.8e19, .u = &o->seed},
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--resume")) { o->resume = 1; continue; }
        if (!v) return err_set(err, ERR_INVAL, "%s needs a value", a);
        i++;
        size_t k = 0;
        while (k < sizeof num / sizeof num[0] && strcmp(a, num[k].flag)) k++;
        if (k < sizeof num / sizeof num[0]) {
            double x = 0;
            if (cli_number(a, v, num[k].lo, num[k].hi, &x, err)) return ERR_INVAL;
            if (num[k].i) *num[k].i = (int)x;
            else if (num[k].l) *num[k].l = (long)x;
            else if (num[k].d) *num[k].d = x;
            else *num[k].u = (unsigned long)x;
        } else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--val")) o->val = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--schedule")) {
            if (strcmp(v, "cosine") && strcmp(v, "constant"))
                return err_set(err, ERR_INVAL, "--schedule: '%s' is neither constant nor cosine", v);
            o->schedule_cosine = !strcmp(v, "cosine");
        } else return err_set(err, ERR_INVAL, "unknown argument '%s'", a);
    }
    if (!o->data) return err_set(err, ERR_INVAL, "--data FILE is required (the training JSONL)");
    if (!o->out) return err_set(err, ERR_INVAL, "--out DIR is required (where the model is written)");
    return 0;
}

/* Model from a directory: weights when it has them, else random from its config.json. */
static Model *open_model(const char *dir, const ModelOptions *mo, unsigned long seed, char err[ERR_LEN]) {
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    struct stat sb;
    char q[4200];
    snprintf(q, sizeof q, "%s.index.json", p);
    if (stat(p, &sb) == 0 || stat(q, &sb) == 0) return model_load(dir, mo, err);
    snprintf(p, sizeof p, "%s/config.json", dir);
    size_t n;
    char *cfg = fs_read_all(p, 1 << 20, &n, err);
    if (!cfg) return NULL;
    Model *m = model_create(cfg, mo, err);
    double std = 0.02;
    json_t *j = json_loads(cfg, 0, NULL);
    if (json_is_number(json_object_get(j, "initializer_range"))) std = json_number_value(json_object_get(j, "initializer_range"));
    json_decref(j);
    xfree(cfg);
    if (m) {
        model_init_random(m, seed, (float)std);
        log_info("sft: %s has no weights: random init N(0, %g^2), seed %lu", dir, std, seed);
    }
    return m;
}

/* What one SFT run works on (main builds it; sft_train reads it). */
typedef struct {
    const Opts   *o;
    const Config *c;
    Model        *m;
    SeqPack      *s;
    const Examples *tr, *val;
    Tokenizer    *tok;
    int           max_len;
    const char   *ckdir;
    CheckpointState st;       /* where a resume starts (step, epoch, cursor) */
} SftRun;

/* The training loop: batches of --batch examples in the epoch's shuffled order, mean response NLL, grad clip, AdamW
 * with the LR schedule, a JSON log line every --log-every steps, evaluation every --eval-every steps (and at the end;
 * --stop-acc stops early), checkpoints every --save-every steps. */
static int sft_train(const SftRun *r, char err[ERR_LEN]) {
    Opts o = *r->o;
    const Config c = *r->c;
    Model *m = r->m;
    SeqPack *s = r->s;
    const Examples tr = *r->tr, val = *r->val;
    if (o.batch > tr.n) {
        log_warn("sft: --batch %d is more than the %d training examples: each step takes all of them", o.batch, tr.n);
        o.batch = tr.n;
    }
    Tokenizer *tok = r->tok;
    int max_len = r->max_len, rc = 0;
    const char *ckdir = r->ckdir;
    CheckpointState st = r->st;
    long per_epoch = (tr.n + o.batch - 1) / o.batch;
    long total = o.steps > 0 ? o.steps : (long)(o.epochs > 0 ? o.epochs : 1) * per_epoch;
    if (o.warmup < 0) o.warmup = (int)(o.warmup_ratio * (double)total);            /* verl's lr_warmup_steps_ratio */
    AdamWConfig ac = adamw_defaults();
    ac.beta1 = (float)c.adam_beta1;
    ac.beta2 = (float)o.beta2;
    ac.eps = (float)c.adam_eps;
    ac.weight_decay = (float)o.wd;
    int *perm = xmalloc((size_t)tr.n * sizeof(int)), *bidx = xmalloc((size_t)o.batch * sizeof(int));
    long epoch = st.data_epoch, cursor = st.data_cursor;
    shuffle(perm, tr.n, o.seed, epoch);
    log_info("sft: %ld steps of %d sequences (%ld per epoch), lr %g (%s, %d warm-up), clip %g, wd %g", total, o.batch,
             per_epoch, o.lr, o.schedule_cosine ? "cosine" : "constant", o.warmup, o.clip, o.wd);
    double t_start = clock_s(), loss_acc = 0;
    int stopped = 0;
    long tok_acc = 0;
    for (long step = st.step; step < total && !rc; step++) {
        int nb = 0;
        long R = 0;
        while (nb < o.batch && nb < tr.n) {
            if (cursor >= tr.n) { epoch++; cursor = 0; shuffle(perm, tr.n, o.seed, epoch); }
            bidx[nb] = perm[cursor++];
            R += tr.offsets[bidx[nb] + 1] - tr.offsets[bidx[nb]] - tr.prompt_lengths[bidx[nb]];
            nb++;
        }
        model_grads_zero(m);
        NllPass np = {.train = 1, .scale = R ? -1.0 / (double)R : 0};
        rc = run_examples(s, &tr, bidx, nb, &np, err);
        if (rc) break;
        double nll = np.nll;
        long ntok = np.ntok;
        double norm = model_grad_norm(m);
        double lr = lr_at(o.schedule_cosine ? LR_COSINE : LR_CONSTANT, o.lr, step, o.warmup, total, o.min_lr_ratio);
        if (!isfinite(norm) || !isfinite(nll)) {
            log_warn("sft step %ld: non-finite loss or gradient norm: update skipped", step + 1);
        } else {
            if (o.clip > 0) model_grads_clip(m, o.clip);
            if ((rc = adamw_step(m, &ac, (float)lr, err))) break;
        }
        loss_acc += nll;
        tok_acc += ntok;
        long done = step + 1;
        if (o.log_every > 0 && (done % o.log_every == 0 || done == total)) {
            double el = clock_s() - t_start;
            printf("{\"step\": %ld, \"epoch\": %ld, \"loss\": %.6f, \"grad_norm\": %.4f, \"lr\": %.6g, \"elapsed_s\": %.2f}\n",
                   done, epoch, tok_acc ? loss_acc / (double)tok_acc : 0, norm, lr, el);
            fflush(stdout);
            loss_acc = 0;
            tok_acc = 0;
        }
        if (val.n && o.eval_every > 0 && done % o.eval_every == 0 && done < total) {
            double vn, acc;
            if ((rc = evaluate(m, s, tok, &val, o.eval_max, c.max_response_length, max_len, &vn, &acc, err))) break;
            printf("{\"step\": %ld, \"val/nll\": %.6f, \"val/greedy_acc\": %.4f}\n", done, vn, acc);
            fflush(stdout);
            if (o.stop_acc > 0 && acc >= o.stop_acc) {
                log_info("sft: stopping at step %ld: held-out greedy accuracy %.4f reached --stop-acc %g", done, acc,
                         o.stop_acc);
                stopped = 1;
                break;
            }
        }
        if (o.max_time_s > 0 && clock_s() - t_start >= o.max_time_s && done < total) {
            log_info("sft: stopping at step %ld: --max-time %g s reached (%.1f s)", done, o.max_time_s,
                     clock_s() - t_start);
            total = done;                                   /* the final evaluation below names this step */
        }
        if (o.save_every > 0 && done % o.save_every == 0) {
            CheckpointState cs = {.step = done, .adam_step = model_adam_step(m), .rng_seed = o.seed, .data_epoch = epoch,
                                  .data_cursor = cursor};
            if (checkpoint_save(ckdir, m, &cs, c.max_actor_ckpt_to_keep, err)) log_error("sft: %s", err);
        }
    }
    if (!rc && val.n && !stopped) {
        double vn, acc;
        rc = evaluate(m, s, tok, &val, o.eval_max, c.max_response_length, max_len, &vn, &acc, err);
        if (!rc) printf("{\"step\": %ld, \"val/nll\": %.6f, \"val/greedy_acc\": %.4f}\n", total, vn, acc);
    }
    xfree(perm);
    xfree(bidx);
    return rc;
}

/* The trained model and the tokenizer files beside it in out (transformers loads the directory). */
static int write_outputs(const char *out, const char *tdir, Model *m, char err[ERR_LEN]) {
    int rc = model_save(m, out, ST_F32, err);
    if (!rc) {
        const char *files[] = {"tokenizer.json", "tokenizer_config.json"};
        for (int i = 0; i < 2 && !rc; i++) {
            char from[4200], to[4200];
            snprintf(from, sizeof from, "%s/%s", tdir, files[i]);
            snprintf(to, sizeof to, "%s/%s", out, files[i]);
            struct stat sb;
            if (stat(from, &sb) == 0) rc = copy_file(from, to, err);
        }
    }
    return rc;
}

int main(int argc, char **argv) {
    threads_env_ensure(argv);
    log_init("sft", LL_INFO);
    Config c;
    int print = CONFIG_PRINT_NONE;
    char err[ERR_LEN];
    memset(&c, 0, sizeof c);
    if (config_help_wanted(argc, argv)) { usage(argv[0], stdout); return 0; }
    if (config_from_cli(&c, &argc, argv, &print, err)) { log_error("%s", err); config_free(&c); return 2; }
    if (print) {
        config_print_annotated(&c, stdout, print == CONFIG_PRINT_LOCAL);
        config_free(&c);
        return 0;
    }
    Opts o = {.batch = 128, .lr = c.lr, .warmup = c.lr_warmup_steps, .warmup_ratio = c.lr_warmup_steps_ratio,
              .clip = c.grad_clip, .wd = c.weight_decay, .beta2 = c.adam_beta2, .eval_max = 200, .log_every = 10,
              .min_lr_ratio = c.min_lr_ratio, .seed = (unsigned long)c.trainer_seed,
              .schedule_cosine = c.warmup_style == CFG_WARMUP_COSINE};
    int rc = parse_opts(argc, argv, &o, err);
    const char *mdir = o.model ? o.model : c.model_path;
    struct stat msb;
    /* the model directory gives the weights (or config.json) and, unless data.tokenizer is set, the tokenizer; a
     * --resume with data.tokenizer set can do without it (the checkpoint holds the model) */
    if (!rc && !mdir[0] && (!o.resume || !c.tokenizer_path[0]))
        rc = err_set(err, ERR_INVAL, "--model DIR is required (or actor_rollout_ref.model.path=DIR): a Hugging Face "
                     "model directory, or one with only config.json for a random start");
    else if (!rc && mdir[0] && (stat(mdir, &msb) != 0 || !S_ISDIR(msb.st_mode)))
        rc = err_set(err, ERR_INVAL, "--model: '%s' is not a directory", mdir);
    const Backend *be = rc ? NULL : settings_backend(&c, err);   /* trainer.device, refused here when unusable */
    if (!rc && !be) { log_error("%s", err); config_free(&c); return 2; }
    if (!rc && be != &backend_cpu && o.val) {          /* evaluation generates with the engine (generate.h) */
        log_error("trainer.device=%s: the held-out evaluation (--val) generates with the rollout engine, which runs on "
                  "the cpu backend only so far; drop --val or use trainer.device=cpu", be->name);
        config_free(&c);
        return 2;
    }
    if (rc) { usage(argv[0], stderr); log_error("%s", err); config_free(&c); return 2; }
    const char *tdir = c.tokenizer_path[0] ? c.tokenizer_path : mdir;
    Tokenizer *tok = tokenizer_load(tdir, err);
    DatasetOptions dopt;
    Examples tr = {0}, val = {0};
    Model *m = NULL;
    SeqPack *s = NULL;
    int max_len = c.max_prompt_length + c.max_response_length;
    if (!tok) rc = ERR_IO;
    if (!rc) rc = settings_dataset_options(&c, tok, &dopt, err);
    int32_t eos = tok ? tokenizer_special(tok)->eos : -1;
    /* the model's sizes come first: its slab holds a whole batch when it fits (up to 8192 tokens) */
    long want = (long)o.batch * max_len;
    if (want > 8192) want = 8192;
    if (want < max_len) want = max_len;
    ModelOptions mo = {.max_tokens = (int)want, .train = 1, .backend = be};
    CheckpointState st = {0};
    char ckdir[4200], path[4400];
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints", o.out);
    if (!rc) {
        long have;
        if (o.resume && checkpoint_find_latest(ckdir, path, sizeof path, &have, err) == 0) {
            m = checkpoint_load(path, &mo, &st, err);
            if (m) log_info("sft: resumed %s (step %ld, epoch %ld, cursor %ld)", path, st.step, st.data_epoch, st.data_cursor);
        } else {
            m = open_model(mdir, &mo, o.seed, err);
        }
        if (!m) rc = ERR_INVAL;
    }
    if (!rc && eos < 0) eos = model_config(m)->n_eos ? model_config(m)->eos_ids[0] : -1;
    if (!rc && eos < 0) rc = err_set(err, ERR_INVAL, "no EOS token: neither the tokenizer config nor the model config names one");
    if (!rc) rc = load_examples(o.data, tok, &dopt, max_len, eos, &tr, err);
    if (!rc && o.val) rc = load_examples(o.val, tok, &dopt, max_len, eos, &val, err);
    if (!rc && tr.n == 0) rc = err_set(err, ERR_INVAL, "%s: no usable example (%ld malformed, %ld too long)", o.data,
                                       tr.dropped_bad, tr.dropped_long);
    if (rc) goto out;
    log_info("sft: %d training examples (%ld malformed, %ld longer than %d tokens dropped), %d held-out", tr.n,
             tr.dropped_bad, tr.dropped_long, max_len, val.n);
    s = seqpack_new(m);                     /* the scratch of one chunk (run_examples) */
    double t_start = clock_s();
    rc = sft_train(&(SftRun){ .o = &o, .c = &c, .m = m, .s = s, .tr = &tr, .val = &val, .tok = tok,
                              .max_len = max_len, .ckdir = ckdir, .st = st }, err);
    if (!rc) rc = write_outputs(o.out, tdir, m, err);
    if (!rc) log_info("sft: model written to %s (%.1f s)", o.out, clock_s() - t_start);
out:
    if (rc) log_error("sft: %s", err);
    seqpack_free(s);
    examples_free(&tr);
    examples_free(&val);
    model_free(m);
    tokenizer_free(tok);
    config_free(&c);
    return rc ? 1 : 0;
}
