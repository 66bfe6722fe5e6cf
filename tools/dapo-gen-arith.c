/* tools/dapo-gen-arith.c: the embedded default task — multi-step arithmetic word problems with integer answers,
 * in the verl / DAPO-Math-17k JSONL schema, with a worked solution for the SFT warm start.
 *
 *   dapo-gen-arith --split train|test [--n N] [--seed S] > file.jsonl
 *
 * A problem is a ± b ± c evaluated left to right (a, b, c in 0..99; the team's TINY-RECIPE.md notes measured this task),
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

/* Test split membership of a problem: independent of the seed and the story. */
static int is_test(int a, int op1, int b, int op2, int c) {
    uint32_t h = mix(mix(mix(mix(mix(17, (uint32_t)a), (uint32_t)op1), (uint32_t)b), (uint32_t)op2), (uint32_t)c);
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

static void usage(FILE *f) {
    fprintf(f, "usage: dapo-gen-arith --split train|test [--n N] [--seed S] > out.jsonl\n"
               "  --split train|test  which split (disjoint by construction)\n"
               "  --n N               problems to write (1..10000000, default 1000)\n"
               "  --seed S            Philox seed (default 1)\n"
               "  --help, -h          print this text and exit\n");
}

int main(int argc, char **argv) {
    const char *split = NULL;
    long n = 1000;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--split") && i + 1 < argc) split = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!split || (strcmp(split, "train") && strcmp(split, "test")) || n < 1 || n > 10000000) {
        fprintf(stderr, "dapo-gen-arith: --split must be train or test and --n between 1 and 10000000\n");
        return 2;
    }
    int want_test = !strcmp(split, "test");
    long made = 0;
    for (uint32_t k = 0; made < n; k++) {
        float u[4], v[4];
        rng_uniform4f(seed, 0xA817, k, 0, u);
        rng_uniform4f(seed, 0xA817, k, 1, v);
        int a = (int)(u[0] * 100), b = (int)(u[1] * 100), c = (int)(u[2] * 100);
        int op1 = u[3] < 0.5f, op2 = v[0] < 0.5f;           /* 1: plus, 0: minus */
        if (!op1 && b > a) b = (int)(v[1] * (a + 1));     /* take away at most what there is */
        int s = op1 ? a + b : a - b;
        if (!op2 && c > s) c = (int)(v[2] * (s + 1));
        int t = op2 ? s + c : s - c;
        if (is_test(a, op1, b, op2, c) != want_test) continue;
        const Story *st = &stories[(int)(v[3] * NSTORIES) % NSTORIES];
        char prob[512], p1[128], p2[128], start[128], sol[128], prompt[1024], esc[2048], esc_sol[256];
        snprintf(start, sizeof start, st->start, a);
        snprintf(p1, sizeof p1, op1 ? st->plus : st->minus, b);
        snprintf(p2, sizeof p2, op2 ? st->plus : st->minus, c);
        snprintf(prob, sizeof prob, "%s%s%s%s", start, p1, p2, st->question);
        snprintf(sol, sizeof sol, "%d%c%d=%d. %d%c%d=%d.\nAnswer: %d", a, op1 ? '+' : '-', b, s, s, op2 ? '+' : '-', c,
                 t, t);
        snprintf(prompt, sizeof prompt, "%s Give the answer as \"Answer: N\".", prob);
        json_escape(prompt, esc, sizeof esc);
        json_escape(sol, esc_sol, sizeof esc_sol);
        printf("{\"data_source\":\"arith\",\"prompt\":[{\"role\":\"user\",\"content\":\"%s\"}],\"ability\":\"MATH\","
               "\"reward_model\":{\"ground_truth\":\"%d\",\"style\":\"rule\"},\"extra_info\":{\"index\":%ld,"
               "\"split\":\"%s\",\"solution\":\"%s\"}}\n", esc, t, made, split, esc_sol);
        made++;
    }
    return 0;
}
