/* tools/dapo-memory.c: the memory report of a learner rank (issue 39): bytes per rank of parameters, gradients, AdamW
 * state and activations for a run's config — the model's config.json (actor_rollout_ref.model.path: a model directory
 * or only a config.json, e.g. configs/shapes/qwen2.5-32b), cluster.num_learners (W), fsdp_config.fsdp_size,
 * model.enable_gradient_checkpointing, and the micro-batch's tokens (ppo_micro_batch_size_per_gpu x (max_prompt_length
 * + max_response_length), or ppo_max_token_len_per_gpu with use_dynamic_bsz; at most 8,192 rows, as the learner
 * sizes its activation slab) — exactly as the learner sizes them (settings_learner_model, model_plan).
 *
 *   dapo-memory [--config FILE] [key=value ...]
 *
 * Prints one table (MiB and GiB per rank, and the whole over W ranks). Counted: the model's slabs, and with sharding
 * (fsdp_size -1, services/learner/shard.h) the rank's 1/W of the master weights, gradients and AdamW moments plus the
 * windows a unit is gathered into. Said separately: rank 0's copies (the weight server's published weights, and with
 * sharding the gathered weights it publishes and exports). Not counted: the process itself (code, libraries, ZeroMQ,
 * OpenMP threads: ~0.1 GiB) and the TrainBatch shards queued; the report says so. tests/integration/longtest_memory.c
 * checks the plan against the measured peak RSS of the 0.5B shape at W = 1, 2, 4. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include "core/config.h"
#include "core/log.h"
#include "model/model.h"
#include "settings/settings.h"

static char *read_config_json(const char *path) {
    char p[4200];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(p, sizeof p, "%s/config.json", path);
    else snprintf(p, sizeof p, "%s", path);             /* a config.json itself */
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    char *buf = xmalloc((size_t)(16 << 20) + 1);
    size_t n = fread(buf, 1, 16 << 20, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* Bytes of the *.safetensors files in dir (0 when there are none: a shape's config.json alone). */
static double weight_file_bytes(const char *dir) {
    char p[4400];
    double sum = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (n > 12 && !strcmp(e->d_name + n - 12, ".safetensors") && stat(p, &sb) == 0) sum += (double)sb.st_size;
    }
    closedir(d);
    return sum;
}

static void row(const char *what, size_t bytes, int world) {
    printf("  %-28s %12.1f MiB %8.2f GiB   x %d ranks = %8.2f GiB\n", what, bytes / 1048576.0, bytes / 1073741824.0,
           world, bytes * (double)world / 1073741824.0);
}

int main(int argc, char **argv) {
    log_init("memory", LL_WARN);
    if (config_help_wanted(argc, argv)) {
        printf("usage: dapo-memory [--config FILE] [key=value ...]\n"
               "  bytes per learner rank of parameters, gradients, AdamW state and activations for the run's config\n"
               "  (actor_rollout_ref.model.path: a model directory or a config.json; cluster.num_learners;\n"
               "  actor_rollout_ref.actor.fsdp_config.fsdp_size; actor_rollout_ref.model.enable_gradient_checkpointing;\n"
               "  the micro-batch sizes; actor_rollout_ref.actor.use_kl_loss: the reference policy's weights)\n");
        return 0;
    }
    Config c;
    int print = CONFIG_PRINT_NONE;
    char err[ERR_LEN];
    memset(&c, 0, sizeof c);
    if (config_from_cli(&c, &argc, argv, &print, err)) { fprintf(stderr, "dapo-memory: %s\n", err); config_free(&c); return 2; }
    int W = c.num_learners;
    ModelOptions mo;
    ModelPlan p;
    char *json = c.model_path[0] ? read_config_json(c.model_path) : NULL;
    int rc = json ? 0 : err_set(err, ERR_IO, "actor_rollout_ref.model.path '%s': no config.json there", c.model_path);
    if (!rc) rc = settings_learner_model(&c, W, &mo, err);
    if (!rc) rc = model_plan(json, &mo, &p, err);
    xfree(json);
    if (rc) { fprintf(stderr, "dapo-memory: %s\n", err); config_free(&c); return 1; }
    int sh = mo.shard_world > 1;
    /* actor.use_kl_loss: the reference policy's fp32 weights (services/learner/ref.h), whole or this rank's pieces */
    size_t ref = !c.use_kl_loss && !c.use_kl_in_reward ? 0 : sh ? p.shard_bytes / 2 : (size_t)p.n_params * 4;
    size_t total = p.params_bytes + p.grads_bytes + p.adam_bytes + p.shard_bytes + p.acts_bytes + ref;
    printf("model %s: %ld parameters (%.3g B); %d learner rank%s, %s, activations for %d tokens%s\n",
           c.model_path, p.n_params, p.n_params / 1e9, W, W > 1 ? "s" : "",
           !sh ? (W > 1 ? "model and optimizer state whole on every rank (fsdp_size 1)" : "one rank holds everything")
               : mo.keep_params ? "fully sharded (fsdp_size -1, reshard_after_forward false: every layer's parameters "
                                  "kept from forward to backward)"
                                : "fully sharded (fsdp_size -1: FSDP full shard, one layer gathered at a time)",
           mo.max_tokens, mo.recompute ? " (gradient checkpointing)" : "");
    printf("per learner rank:\n");
    if (sh) {
        row("fp32 master weights (1/W)", p.shard_bytes / 2, W);
        row("gradient accumulator (1/W)", p.shard_bytes / 2, W);
        row("AdamW m, v (fp32, 1/W each)", p.adam_bytes, W);
        row(mo.keep_params ? "parameter windows (all layers)" : "parameter windows", p.params_bytes, W);
        row("gradient windows", p.grads_bytes, W);
    } else {
        row("parameters (fp32)", p.params_bytes, W);
        row("gradients (fp32)", p.grads_bytes, W);
        row("AdamW m, v (fp32)", p.adam_bytes, W);
    }
    if (ref) row(sh ? "reference weights (1/W)" : "reference weights (fp32)", ref, W);   /* use_kl_loss */
    row("activations", p.acts_bytes, W);
    row("total", total, W);
    if (sh) printf("  windows: the embedding, one decoder layer (or all of them) and the final norm / LM head, each "
                   "gathered whole when used\n");
    double file = weight_file_bytes(c.model_path);
    if (file <= 0) file = p.n_params * 4.0;             /* a shape: fp32 weights, as dapo's checkpoints hold them */
    /* loading: the slabs are zeroed when made (resident), then the weights file is mapped and read (all of it; a sharded
     * rank its pieces, whose pages are ~1/W of it, into state it has not touched yet) and unmapped */
    double peak = sh ? (double)total : (double)total + file, copy = p.n_params * 4.0;
    printf("while loading: the weights file (%.2f GiB) is mapped and %s read, then unmapped\n", file / 1073741824.0,
           sh ? "this rank's pieces of it" : "all of it (on top of the zeroed slabs)");
    printf("rank 0 also holds: the weight server's published copy (%.2f GiB)%s\n", copy / 1073741824.0,
           sh ? " and the gathered fp32 weights it publishes and exports (as much again)" : "");
    printf("not counted: the process (~0.1 GiB), queued TrainBatch shards\n");
    printf("peak per rank: rank 0 %.3f GiB (%.3f GiB without the weight server), other ranks %.3f GiB\n",
           (peak + copy * (sh ? 2 : 1)) / 1073741824.0, (peak + (sh ? copy : 0)) / 1073741824.0, peak / 1073741824.0);
    config_free(&c);
    return 0;
}
