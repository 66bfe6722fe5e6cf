/* tools/dapo-gen-arith.c: the embedded default task — multi-step arithmetic word problems with integer answers,
 * in the verl / DAPO-Math-17k JSONL schema, with a worked solution for the SFT warm start.
 *
 *   dapo-gen-arith --split train|test [--n N] [--seed S] > file.jsonl
 *
 * A problem is a ± b ± c evaluated left to right (a, b, c in 0..99; docs/tiny-recipe.md measured this task),
 * told as one of a few short stories. The answer never goes below 0 (the stories count things), so a '-' step
 * takes away at most what there is. The worked solution (extra_info.solution) is "a+b=s. s-c=t.\nAnswer: t", the
 * form the verifier's `Answer:` rule reads. Splits are disjoint by construction: a problem (a, op1, b, op2, c)
 * belongs to the test split when a hash of it is 0 mod 8, so no held-out problem is ever trained on.
 * Deterministic for a given seed (Philox, common/core/rng.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

typedef struct {
    const char *plus, *minus;        /* phrases for "+ x" and "- x", with %d for x */
    const char *start, *question;    /* "%d" for a */
} Story;

static const Story stories[] = {
    {" He buys %d more.", " He gives away %d.", "Tom has %d apples.", " How many apples does Tom have now?"},
    {" %d more people get on.", " %d people get off.", "A bus carries %d people.", " How many people are on the bus now?"},
    {" She earns %d more.", " She spends %d.", "Mia has %d dollars.", " How many dollars does Mia have now?"},
    {" %d more birds land.", " %d birds fly away.", "There are %d birds on a tree.", " How many birds are on the tree now?"},
    {" The library gets %d new books.", " %d books are lent out.", "A shelf holds %d books.", " How many books are on the shelf now?"},
};
#define NSTORIES (sizeof stories / sizeof stories[0])

static uint32_t mix(uint32_t h, uint32_t v) {
    h ^= v + 0x9e3779b9u + (h << 6) + (h >> 2);
    return h * 0x85ebca6bu;
}

/* Test split membership of a problem (values x[0..k], operators op[1..k]): independent of the seed and the story.
 * For two operators it is the hash of (a, op1, b, op2, c), as before --ops existed. */
static int is_test(const int *x, const int *op, int k) {
    uint32_t h = mix(17, (uint32_t)x[0]);
    for (int i = 1; i <= k; i++) h = mix(mix(h, (uint32_t)op[i]), (uint32_t)x[i]);
    return ((h >> 13) & 7) == 0;
}

/* JSON string body of s (only ASCII appears here; quotes, backslashes and newlines escaped). */
static void json_escape(const char *s, char *out, size_t n) {
    size_t j = 0;
    for (; *s && j + 3 < n; s++) {
        if (*s == '"' || *s == '\\') { out[j++] = '\\'; out[j++] = *s; }
        else if (*s == '\n') { out[j++] = '\\'; out[j++] = 'n'; }
        else out[j++] = *s;
    }
    out[j] = 0;
}

#define MAX_OPS 8

/* One problem of candidate k: x[0..nops] the values, op[1..nops] the operators (1 plus, 0 minus), t the answer.
 * The draws for the first two operators are those of the two-operator task (so --ops 2 writes the same problems as
 * before the flag existed); further operators and the operator count take draws from positions 2.. of the stream. */
static int draw_problem(uint64_t seed, uint32_t k, int ops_min, int ops_max, int *x, int *op, int *story) {
    float u[4], v[4], w[4];
    rng_uniform4f(seed, 0xA817, k, 0, u);
    rng_uniform4f(seed, 0xA817, k, 1, v);
    int nops = ops_min;
    if (ops_max > ops_min) {
        rng_uniform4f(seed, 0xA817, k, 2, w);
        nops = ops_min + (int)(w[0] * (float)(ops_max - ops_min + 1));
        if (nops > ops_max) nops = ops_max;
    }
    x[0] = (int)(u[0] * 100);
    int s = x[0];
    for (int i = 1; i <= nops; i++) {
        float val, sign, adj;
        if (i == 1) { val = u[1]; sign = u[3]; adj = v[1]; }
        else if (i == 2) { val = u[2]; sign = v[0]; adj = v[2]; }
        else { rng_uniform4f(seed, 0xA817, k, (uint32_t)(1 + i), w); val = w[1]; sign = w[2]; adj = w[3]; }
        x[i] = (int)(val * 100);
        op[i] = sign < 0.5f;
        if (!op[i] && x[i] > s) x[i] = (int)(adj * (float)(s + 1));   /* take away at most what there is */
        s = op[i] ? s + x[i] : s - x[i];
    }
    *story = (int)(v[3] * NSTORIES) % NSTORIES;
    return nops;
}

/* A whole number of decimal digits only (no sign, space or exponent) in [lo, hi], ending at *end (or at the end
 * of s when end is NULL): 0, or -1 when s is not one. */
static int whole(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *out,
                 const char **end) {
    unsigned long long v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned long long d = (unsigned long long)(*p - '0');
        if (d > hi || v > (hi - d) / 10) return -1;                /* 10 v + d > hi: past hi, and no overflow */
        v = v * 10 + d;
    }
    if (p == s || v < lo || (end ? 0 : *p != 0)) return -1;
    if (end) *end = p;
    *out = v;
    return 0;
}

/* --ops K or MIN-MAX into [1, MAX_OPS]: 0, or -1. */
static int parse_ops(const char *s, int *lo, int *hi) {
    unsigned long long a, b;
    const char *p;
    if (whole(s, 1, MAX_OPS, &a, &p)) return -1;
    if (*p == 0) b = a;
    else if (*p != '-' || whole(p + 1, a, MAX_OPS, &b, NULL)) return -1;
    *lo = (int)a;
    *hi = (int)b;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-gen-arith --split train|test [--n N] [--seed S] [--ops K|MIN-MAX] > out.jsonl\n"
               "  --split train|test  which split (disjoint by construction)\n"
               "  --n N               problems to write (1..10000000, default 1000)\n"
               "  --seed S            Philox seed (default 1)\n"
               "  --ops K|MIN-MAX     operators per problem, 1..%d, uniform over MIN..MAX (default 2: the default\n"
               "                      task); the worked solution has one step per operator\n"
               "  --help, -h          print this text and exit\n", MAX_OPS);
}

int main(int argc, char **argv) {
    const char *split = NULL, *ops = "2", *n_arg = "1000", *seed_arg = "1";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--split") && i + 1 < argc) split = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n_arg = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed_arg = argv[++i];
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc) ops = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else {
            usage(stderr);
            return 2;
        }
    }
    unsigned long long nu, seed;
    if (!split || (strcmp(split, "train") && strcmp(split, "test")) || whole(n_arg, 1, 10000000, &nu, NULL)) {
        fprintf(stderr, "dapo-gen-arith: --split must be train or test and --n a whole number in 1..10000000\n");
        return 2;
    }
    if (whole(seed_arg, 0, UINT64_MAX, &seed, NULL)) {
        fprintf(stderr, "dapo-gen-arith: --seed '%s' must be a whole number in 0..%llu\n", seed_arg,
                (unsigned long long)UINT64_MAX);
        return 2;
    }
    long n = (long)nu;
    int ops_min = 0, ops_max = 0;
    if (parse_ops(ops, &ops_min, &ops_max)) {
        fprintf(stderr, "dapo-gen-arith: --ops '%s' must be K or MIN-MAX with 1 <= MIN <= MAX <= %d\n", ops, MAX_OPS);
        return 2;
    }
    int want_test = !strcmp(split, "test");
    long made = 0;
    for (uint32_t k = 0; made < n; k++) {
        int x[MAX_OPS + 1], op[MAX_OPS + 1], si;
        int nops = draw_problem(seed, k, ops_min, ops_max, x, op, &si);
        if (is_test(x, op, nops) != want_test) continue;
        const Story *st = &stories[si];
        char prob[1024], phrase[128], sol[512], prompt[1280], esc[2560], esc_sol[1024];
        size_t pl = (size_t)snprintf(prob, sizeof prob, st->start, x[0]), sl = 0;
        int s = x[0];
        for (int i = 1; i <= nops; i++) {
            snprintf(phrase, sizeof phrase, op[i] ? st->plus : st->minus, x[i]);
            pl += (size_t)snprintf(prob + pl, sizeof prob - pl, "%s", phrase);
            int t = op[i] ? s + x[i] : s - x[i];
            sl += (size_t)snprintf(sol + sl, sizeof sol - sl, "%s%d%c%d=%d.", i > 1 ? " " : "", s, op[i] ? '+' : '-',
                                   x[i], t);
            s = t;
        }
        snprintf(prob + pl, sizeof prob - pl, "%s", st->question);
        snprintf(sol + sl, sizeof sol - sl, "\nAnswer: %d", s);
        snprintf(prompt, sizeof prompt, "%s Give the answer as \"Answer: N\".", prob);
        json_escape(prompt, esc, sizeof esc);
        json_escape(sol, esc_sol, sizeof esc_sol);
        printf("{\"data_source\":\"arith\",\"prompt\":[{\"role\":\"user\",\"content\":\"%s\"}],\"ability\":\"MATH\","
               "\"reward_model\":{\"ground_truth\":\"%d\",\"style\":\"rule\"},\"extra_info\":{\"index\":%ld,"
               "\"split\":\"%s\",\"solution\":\"%s\"}}\n", esc, s, made, split, esc_sol);
        made++;
    }
    return 0;
}
