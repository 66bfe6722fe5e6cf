/* tests/unit/dapo_fixture.h: reader for the binary reference files written by
 * tests/reference/make_dapo_fixtures.py (format in that script: magic "DAPOFX01", u32 count, then per tensor
 * a 48-byte name, u32 dtype (1 f32, 2 i32, 3 f64), u32 element count, the elements). Header-only, static,
 * for the test programs of common/dapo; fails the current cmocka test on any inconsistency. */
#ifndef DAPO_TEST_FIXTURE_H
#define DAPO_TEST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FX_F32 = 1, FX_I32 = 2, FX_F64 = 3 };

/* make_dapo_fixtures.py's KL_NAMES: the KL estimators' names, by the index its files store */
__attribute__((unused)) static const char *const FX_KL_NAMES[] = {
    "kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "kl+", "k1+", "abs+", "mse+", "k2+", "low_var_kl+", "k3+"};

typedef struct {
    char     name[49];
    uint32_t dtype, n;
    void    *data;
} FxTensor;

typedef struct {
    int       n;
    FxTensor *t;
} Fixture;

static void fx_path(char *out, size_t cap, const char *rel) {
    const char *root = getenv("DAPO_ROOT");
    snprintf(out, cap, "%s/%s", root && *root ? root : ".", rel);
}

/* 0 on success; -1 with a message on stderr (missing file, bad magic, truncated). */
static int fx_load(const char *rel, Fixture *fx) {
    char path[4096];
    fx_path(path, sizeof path, rel);
    memset(fx, 0, sizeof *fx);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "fixture %s: cannot open\n", path); return -1; }
    char magic[8];
    uint32_t count = 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "DAPOFX01", 8) != 0 || fread(&count, 4, 1, f) != 1 ||
        count > 100000) {
        fprintf(stderr, "fixture %s: bad header (regenerate with tests/reference/make_dapo_fixtures.py)\n", path);
        fclose(f);
        return -1;
    }
    fx->t = calloc(count ? count : 1, sizeof *fx->t);
    for (uint32_t i = 0; i < count; i++) {
        FxTensor *t = &fx->t[i];
        uint32_t hdr[2];
        if (fread(t->name, 1, 48, f) != 48 || fread(hdr, 4, 2, f) != 2 || hdr[0] < 1 || hdr[0] > 3 ||
            hdr[1] > (1u << 26)) {
            fprintf(stderr, "fixture %s: bad tensor header %u\n", path, i);
            goto fail;
        }
        t->name[48] = 0;
        t->dtype = hdr[0];
        t->n = hdr[1];
        size_t es = t->dtype == FX_F64 ? 8 : 4;
        t->data = malloc(es * t->n + 1);
        fx->n = (int)i + 1;
        if (fread(t->data, es, t->n, f) != t->n) { fprintf(stderr, "fixture %s: truncated\n", path); goto fail; }
    }
    fclose(f);
    return 0;
fail:
    fclose(f);
    for (int i = 0; i < fx->n; i++) free(fx->t[i].data);
    free(fx->t);
    memset(fx, 0, sizeof *fx);
    return -1;
}

static void fx_free(Fixture *fx) {
    for (int i = 0; i < fx->n; i++) free(fx->t[i].data);
    free(fx->t);
    memset(fx, 0, sizeof *fx);
}

/* The tensor called name with the given dtype, or NULL (the caller asserts). */
static const FxTensor *fx_get(const Fixture *fx, const char *name, uint32_t dtype) {
    for (int i = 0; i < fx->n; i++)
        if (strcmp(fx->t[i].name, name) == 0 && fx->t[i].dtype == dtype) return &fx->t[i];
    fprintf(stderr, "fixture: no tensor %s of dtype %u\n", name, dtype);
    return NULL;
}

#endif
