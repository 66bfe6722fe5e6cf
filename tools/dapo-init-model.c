/* tools/dapo-init-model.c: makes a freshly initialised Hugging Face model directory from a config.json — the
 * start of the tiny default model before its SFT warm start — with the tokenizer files copied in, so the
 * directory is complete (transformers loads it as it is).
 *
 *   dapo-init-model --config CONFIG.json --tokenizer DIR --out DIR [--seed S] [--std 0.02]
 *
 * Weights: norms 1, everything else N(0, std^2) (model_init_random), saved in fp32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fsutil.h"
#include "core/log.h"
#include "model/model.h"

static int copy_file(const char *from_dir, const char *name, const char *to_dir, int required, char err[ERR_LEN]) {
    char src[2048], dst[2048];
    snprintf(src, sizeof src, "%s/%s", from_dir, name);
    snprintf(dst, sizeof dst, "%s/%s", to_dir, name);
    size_t len;
    char *data = fs_read_all(src, (size_t)1 << 30, &len, err);
    if (!data) return required ? ERR_IO : 0;
    int rc = fs_write_atomic(dst, data, len, err);
    xfree(data);
    return rc;
}

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-init-model --config CONFIG.json --tokenizer DIR --out DIR [--seed S] [--std 0.02]\n"
               "  --help, -h   print this text and exit\n");
}

int main(int argc, char **argv) {
    log_init("init-model", LL_INFO);
    const char *config = NULL, *tok = NULL, *out = NULL;
    uint64_t seed = 1;
    float std = 0.02f;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--std") && i + 1 < argc) std = strtof(argv[++i], NULL);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else { config = NULL; break; }
    }
    if (!config || !tok || !out || !(std > 0)) {
        usage(stderr);
        return 2;
    }
    char err[ERR_LEN];
    size_t len;
    char *json = fs_read_all(config, 1 << 20, &len, err);
    ModelOptions opt = {.max_tokens = 16};
    Model *m = json ? model_create(json, &opt, err) : NULL;
    xfree(json);
    if (!m) { log_error("%s", err); return 1; }
    model_init_random(m, seed, std);
    int rc = model_save(m, out, ST_F32, err);
    if (!rc) rc = copy_file(tok, "tokenizer.json", out, 1, err);
    if (!rc) rc = copy_file(tok, "tokenizer_config.json", out, 0, err);
    if (rc) log_error("%s", err);
    else log_info("%s: %ld parameters, seed %llu, std %g", out, model_n_params(m), (unsigned long long)seed, std);
    model_free(m);
    return rc ? 1 : 0;
}
