/* tests/model_fixture.h: the transformers fixtures of the model tests (tests/reference/make_model_fixtures.py:
 * tests/data/model/<name>.fixture.safetensors: a packed batch, its log-probs and entropies, the loss weights w / u
 * and, per parameter, "grad.<hf name>" and "adamw.<hf name>"), loaded for test_model.c and
 * test_backend_conformance.c. Header-only, for cmocka tests (include after <cmocka.h>). */
#ifndef DAPO_TESTS_MODEL_FIXTURE_H
#define DAPO_TESTS_MODEL_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "io/safetensors.h"
#include "model/model.h"

/* "$DAPO_ROOT/tests/data/model/<rel>" into out. */
static void path_of(char *out, size_t n, const char *rel) {
    const char *root = getenv("DAPO_ROOT");
    snprintf(out, n, "%s/tests/data/model/%s", root && *root ? root : ".", rel);
}

typedef struct {
    SafeTensors *st;
    int N, S;
    int32_t *tokens, *targets, *cu;
    float *w, *u, *logp, *ent;
    float temperature;
} Fixture;

static void fixture_load(Fixture *f, const char *name) {
    char p[4096], rel[256], err[ERR_LEN];
    snprintf(rel, sizeof rel, "%s.fixture.safetensors", name);
    path_of(p, sizeof p, rel);
    f->st = st_open(p, err);
    if (!f->st) fail_msg("%s: %s", p, err);
    const StTensor *t = st_find(f->st, "tokens"), *c = st_find(f->st, "cu_seqlens");
    assert_non_null(t);
    assert_non_null(c);
    f->N = (int)t->numel;
    f->S = (int)c->numel - 1;
    f->tokens = malloc(f->N * sizeof(int32_t));
    f->targets = malloc(f->N * sizeof(int32_t));
    f->cu = malloc((f->S + 1) * sizeof(int32_t));
    f->w = malloc(f->N * sizeof(float));
    f->u = malloc(f->N * sizeof(float));
    f->logp = malloc(f->N * sizeof(float));
    f->ent = malloc(f->N * sizeof(float));
    assert_int_equal(st_read_i32(f->st, "tokens", f->tokens, f->N, err), 0);
    assert_int_equal(st_read_i32(f->st, "targets", f->targets, f->N, err), 0);
    assert_int_equal(st_read_i32(f->st, "cu_seqlens", f->cu, f->S + 1, err), 0);
    assert_int_equal(st_read_f32(f->st, "w", f->w, f->N, err), 0);
    assert_int_equal(st_read_f32(f->st, "u", f->u, f->N, err), 0);
    assert_int_equal(st_read_f32(f->st, "logp", f->logp, f->N, err), 0);
    assert_int_equal(st_read_f32(f->st, "entropy", f->ent, f->N, err), 0);
    f->temperature = strtof(st_metadata(f->st, "temperature"), NULL);
}

static void fixture_free(Fixture *f) {
    st_close(f->st);
    free(f->tokens); free(f->targets); free(f->cu); free(f->w); free(f->u); free(f->logp); free(f->ent);
}

static ModelBatch fixture_batch(const Fixture *f) {
    return (ModelBatch){ .n_tokens = f->N, .n_seqs = f->S, .tokens = f->tokens, .targets = f->targets,
                         .cu_seqlens = f->cu, .temperature = f->temperature };
}

#endif
