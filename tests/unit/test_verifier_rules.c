/* tests/unit/test_verifier_rules.c: the math_dapo rules one by one (tests/data/verifier/README.md), with
 * expected values computed by the reference (verl 0.8.0's verl/utils/reward_score/math_dapo.py, identical in
 * both modes to DAPO's eval/math_dapo.py; `normalize_final_answer`, `re.findall(r"(?i)Answer\s*:\s*([^\n]+)")`,
 * `compute_score` under CPython 3.11.7) and pasted here; UTF-8 repair against bytes.decode("utf-8", "replace");
 * the Unicode tables against tests/data/verifier/pyunicode.txt; the tail-window shortcut against a full
 * decode on random bytes; robustness (10 MB strings, invalid UTF-8, NULs, 100,000 nested braces,
 * 100,000 `Answer:` lines, each 1 MB case under 50 ms); the deadline; the data_source table.
 * Not here: the 4,283 corpus cases (test_verifier_cases.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reward/reward.h"

typedef struct {
    const char *in;
    size_t      in_len;
    const char *out;
    size_t      out_len;
} StrPair;
#define NC(a, b) { a, sizeof(a) - 1, b, sizeof(b) - 1 }

/* normalize_final_answer(in) == out, one row per rule of README §3 (and its examples). */
static const StrPair norm_cases[] = {
    NC("x = 5", "5"),
    NC("\\boxed{x=5}", "5}"),
    NC("2a + 3b", "2+3b"),
    NC("\\alpha + 1", "\\alph+1"),
    NC("Juan 5", "Ju5"),
    NC("a = 5", "5"),
    NC("\\sigma", "\\sia"),
    NC("12 parameters", "12para"),
    NC("12 cm^2", "12^2"),
    NC("30\302\260", "30\302\260"),
    NC("Theansweris$5$.", "5"),
    NC("$5$and$6$", "5"),
    NC("$$5$$", ""),
    NC("\\text{{5}}", "{5}"),
    NC("\\text{\\text{a}}", "\\text{a}"),
    NC("0.\\overline{3}", "0.3"),
    NC("\\boxed{5}.", "5."),
    NC("\\boxed{5}and\\boxed{6}", "5}and\\boxed{6"),
    NC("\\boxed{{{5}}}", "{{5}}"),
    NC("\\dfrac12", "\\dfrac{1}{2}"),
    NC("\\frac123", "\\frac{1}{2}3"),
    NC("\\frac1{2}", "\\frac{1}{{}2}"),
    NC("\\frac1\015", "\\frac{1}{\015}"),
    NC("\\frac{a}{b}", "\\frac{a}{b}"),
    NC("\\sqrt2", "\\sqrt{2}"),
    NC("3\\sqrt13", "3\\sqrt{1}3"),
    NC("\\sqrt[3]{2}", "\\sqrt{[}3]{2}"),
    NC("1,234", "1234"),
    NC("1,234\015", "1,234"),
    NC("1,234\011", "1,234"),
    NC("-1,234", "-1,234"),
    NC("1,234.5", "1,234.5"),
    NC("1, 2, 3", "123"),
    NC("1, 2, \\ldots, 10", "1210"),
    NC("\357\274\221,\357\274\222\357\274\223\357\274\224", "\357\274\221\357\274\222\357\274\223\357\274\224"),
    NC("\302\262,\302\263", "\302\262\302\263"),
    NC("\331\243,\331\244\331\245\331\246", "\331\243\331\244\331\245\331\246"),
    NC("\360\235\237\217,\360\235\237\220", "\360\235\237\217\360\235\237\220"),
    NC("\342\221\240,\342\221\241", "\342\221\240\342\221\241"),
    NC("4\302\2402", "4\302\2402"),
    NC(" \343\200\200 5 \342\200\250", "5"),
    NC("\342\200\2135\342\200\213", "\342\200\2135\342\200\213"),
    NC("\357\273\2775", "\357\273\2775"),
    NC("\341\240\2165", "\341\240\2165"),
    NC("\302\2055\341\232\200", "5"),
    NC("\\text{m}", ""),
    NC("5\\text{ cm}", "5"),
    NC("\\mbox{and}", ","),
    NC("1,\\text{and}2", "12"),
    NC("$\\frac{1}{2}$.", "\\frac{1}{2}"),
    NC("10\\%", "10\\%"),
    NC("\\$18.90", "18.90"),
    NC("10,\\!080", "10080"),
    NC("90^\\circ", "90"),
    NC("90^{\\circ}", "90"),
    NC("\\text{(C)}", "(C)"),
    NC("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left(3,\\frac{\\pi}{2}\\right)"),
    NC("a\012b$1$c$2$\012d", "a\0121\012d"),
    NC("$a\012b$", "a\012b"),
    NC("\\text{a\012}b}", "\\text{a\012}b}"),
    NC("\\text{a}\\text{b", "a\\text{b"),
    NC("\\boxed{1\012}2}", "\\boxed{1\012}2}"),
    NC("x\\boxed{1}\012\\boxed{2}}y", "x1\0122}y"),
    NC("frac", "frac"),
    NC("fracx", "fracx"),
    NC("frac{", "frac{"),
    NC("sqrt", "sqrt"),
    NC("sqrt\012", "sqrt{\012}"),
    NC("sqrt{2}", "sqrt{2}"),
    NC("frac\012x", "frac{\012}{x}"),
    NC("frac x\012", "fracx"),
    NC("frac\303\251\342\202\254", "frac{\303\251}{\342\202\254}"),
    NC("sqrt\360\237\230\200", "sqrt{\360\237\230\200}"),
    NC("\\textbf{7}", "7"),
    NC("\\overline{12}\\overline{3", "12\\overline{3"),
    NC("[INVALID]", "[INVALID]"),
    NC("", ""),
    NC(",", ","),
    NC(",,", ",,"),
    NC("5\000", "5\000"),
    NC("\305\277", "\305\277"),
    NC("\\text{}^2", ""),
    NC("\\text{\012s}", ""),
    NC("\\text{\012}", ""),
    NC("x=", ""),
    NC("=", ""),
    NC("a=b=c", "c"),
    NC("\\sqrtx\\fracyz", "\\sqrt{x}\\frac{y}{z}"),
    NC("\\boxed{\\text{5}}", "5"),
    NC("\\text{\\boxed{5}}", "5"),
    NC("\"5\"", "5"),
    NC("5 dollars", "5"),
    NC("\\frac{3}{4} inches", "\\frac{3}{4}"),
    NC("\\ldots\\dots", ""),
    NC("childrentickets 4", "4"),
    NC("\\mathrm{th}3", "3"),
    NC("\\;5\\;", "5"),
    NC("1{,}000", "1000"),
    NC("5 km", "5"),
    NC("5 mph", "5"),
    NC("5.$", "5"),
    NC("\\ 5", "5"),
    NC("an an 5", "5"),
    NC("banana 5", "banan5"),
    NC("a  b", "b"),
    NC("\\text{and}", ","),
    NC("\342\210\2225", "\342\210\2225"),
    NC("- 5", "-5"),
    NC("5\342\200\251", "5"),
};

typedef struct {
    const char *in;
    size_t      in_len;
    const char *cap;       /* NULL: no match */
    size_t      cap_len;
} ExtCase;
#define EC(a, b) { a, sizeof(a) - 1, b, sizeof(b) - 1 }
#define ECN(a)   { a, sizeof(a) - 1, NULL, 0 }

/* The last capture of re.findall(r"(?i)Answer\s*:\s*([^\n]+)", s) (README §2). */
static const ExtCase ext_cases[] = {
    EC("Answer: 5", "5"),
    EC("Answer: 5 Answer: 6", "5 Answer: 6"),
    EC("Answer:\012Answer: 5", "Answer: 5"),
    EC("Answer:   ", " "),
    EC("Answer:\015\012", "\015"),
    ECN("Answer:"),
    ECN("Answer:\012\012"),
    ECN("x\012Answer:\012\012"),
    EC("ANSWER : 7", "7"),
    EC("an\305\277wer: 3", "3"),
    EC("An\305\277WER:3", "3"),
    ECN("Answer\357\274\2325"),
    ECN("Answers: 5"),
    EC("Answer\012: 5", "5"),
    EC("Final Answer: 9", "9"),
    EC("answer:\011\011 x \015\012y", "x \015"),
    EC("Answer: 1\012Answer: 2\012", "2"),
    EC("Answer: 1\012Answer:", "1"),
    EC("Answer: 1\012Answer:\012", "1"),
    EC("Answer: 1\012Answer:  \012\012", " "),
    EC("Answer:\343\200\200\342\200\250", "\342\200\250"),
    EC("Answer:\343\200\200\012", "\343\200\200"),
    EC("Answer: 5\342\200\250 6\302\205 7\012z", "5\342\200\250 6\302\205 7"),
    EC("**Answer:** 42", "** 42"),
    ECN("**Answer**: 42"),
    EC("aAnswer:1", "1"),
    EC("answeranswer:2", "2"),
    EC("Answer \302\240: 4", "4"),
    ECN("Answer\342\200\213: 4"),
    ECN("\316\221nswer: 5"),
    ECN("nswer: 5"),
    ECN(""),
    EC("Answer: \000x", "\000x"),
    EC("Answer:\012\034\035", "\035"),
    EC("The answer is: 12\012So answer: 13 apples", "13 apples"),
};

typedef struct {
    const char *sol;
    size_t      sol_len;
    const char *gt;
    size_t      gt_len;
    bool        strict;
    int         acc;
    const char *pred;      /* NULL: the reference returns None */
    size_t      pred_len;
} ScoreCase;
#define SC(s, g, b, a, p) { s, sizeof(s) - 1, g, sizeof(g) - 1, b, a, p, sizeof(p) - 1 }
#define SCN(s, g, b, a)   { s, sizeof(s) - 1, g, sizeof(g) - 1, b, a, NULL, 0 }

/* compute_score(solution, ground_truth, strict_box) of the reference. */
static const ScoreCase score_cases[] = {
    SC("no answer here", "[INVALID]", false, 1, "[INVALID]"),
    SC("no answer here", "5", false, 0, "[INVALID]"),
    SC("Answer: $\\frac{1}{2}$", "\\frac12", false, 1, "\\frac{1}{2}"),
    SC("Answer: \\boxed{10\\%}.", "10\\%.", false, 1, "10\\%."),
    SC("\\boxed{42}", "42", true, 1, "42"),
    SC("\\boxed{ 42 }", "42", true, 0, " 42 "),
    SC("\\boxed{\\frac12}", "\\frac{1}{2}", true, 0, "\\frac12"),
    SC("\\boxed{x=5}", "x=5", true, 1, "x=5"),
    SCN("\\boxed{1} then \\boxed{2", "1", true, 0),
    SCN("nothing", "[INVALID]", true, 0),
    SC("\\boxed{a{b}c}", "a{b}c", true, 1, "a{b}c"),
    SCN("\\boxed{a\\{b}", "x", true, 0),
    SC("\\boxed{\\boxed{3}}", "\\boxed{3}", true, 0, "3"),
    SC("Answer: 5\012\\boxed{6}", "6", true, 1, "6"),
    SC("Answer: 5\012\\boxed{6}", "5", false, 1, "5"),
    SC("\\boxed{}", "", true, 1, ""),
    SC("", "", false, 0, "[INVALID]"),
    SCN("", "", true, 0),
    SC("Answer: 1,000", "1000", false, 1, "1000"),
    SC("Answer: 1,000\015\012", "1000", false, 0, "1,000"),
    SC("Answer:\302\2405\302\240", "5", false, 1, "5"),
    SC("Answer: \342\210\2225", "-5", false, 0, "\342\210\2225"),
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static void print_bytes(const char *label, const char *s, size_t n) {
    fprintf(stderr, "%s [", label);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 32 && c < 127) fputc(c, stderr);
        else fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "]\n");
}

static void test_normalize_rules(void **state) {
    (void)state;
    MathDapoWs *ws = math_dapo_ws_new();
    char err[ERR_LEN];
    int bad = 0;
    for (size_t i = 0; i < ARRAY_LEN(norm_cases); i++) {
        const StrPair *c = &norm_cases[i];
        const char *out;
        size_t n;
        assert_int_equal(math_dapo_normalize(ws, c->in, c->in_len, 0, &out, &n, err), 0);
        assert_int_equal(out[n], '\0');
        if (n != c->out_len || memcmp(out, c->out, n) != 0) {
            bad++;
            print_bytes("normalize", c->in, c->in_len);
            print_bytes("  want", c->out, c->out_len);
            print_bytes("  got ", out, n);
        }
    }
    math_dapo_ws_free(ws);
    assert_int_equal(bad, 0);
}

static void test_answer_extraction(void **state) {
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < ARRAY_LEN(ext_cases); i++) {
        const ExtCase *c = &ext_cases[i];
        size_t off = 99, len = 99;
        bool found = math_dapo_answer_find(c->in, c->in_len, &off, &len);
        bool ok = c->cap ? found && len == c->cap_len && memcmp(c->in + off, c->cap, len) == 0 : !found;
        if (!ok) {
            bad++;
            print_bytes("extract", c->in, c->in_len);
            if (c->cap) print_bytes("  want", c->cap, c->cap_len);
            else fprintf(stderr, "  want no match\n");
            if (found) print_bytes("  got ", c->in + off, len);
            else fprintf(stderr, "  got no match\n");
        }
    }
    assert_int_equal(bad, 0);
}

static void check_score(RewardWs *ws, const char *sol, size_t sn, const char *gt, size_t gn, bool strict, int acc,
                        const char *pred, size_t pred_len, int *bad) {
    RewardResult r;
    assert_int_equal(reward_score(ws, "math_dapo", sol, sn, gt, gn, strict, 0, &r), 0);
    bool ok = r.acc == (acc != 0) && r.score == (acc ? 1.0 : -1.0) && r.error == 0;
    ok = ok && (pred ? r.has_pred && r.pred_len == pred_len && memcmp(r.pred, pred, pred_len) == 0
                     : !r.has_pred && r.pred == NULL);
    if (!ok) {
        (*bad)++;
        print_bytes(strict ? "score strict" : "score", sol, sn > 200 ? 200 : sn);
        fprintf(stderr, "  want acc %d pred %s; got acc %d has_pred %d\n", acc, pred ? "" : "null", r.acc,
                r.has_pred);
        if (r.has_pred) print_bytes("  got pred", r.pred, r.pred_len);
    }
}

static void test_compute_score_cases(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    int bad = 0;
    for (size_t i = 0; i < ARRAY_LEN(score_cases); i++) {
        const ScoreCase *c = &score_cases[i];
        check_score(ws, c->sol, c->sol_len, c->gt, c->gt_len, c->strict, c->acc, c->pred, c->pred_len, &bad);
    }
    reward_ws_free(ws);
    assert_int_equal(bad, 0);
}

/* Builds prefix + rep * unit + suffix into a static buffer; returns its length. */
static char g_buf[4096];
static size_t build(const char *prefix, const char *unit, int rep, const char *suffix) {
    size_t n = 0;
    n += (size_t)snprintf(g_buf + n, sizeof g_buf - n, "%s", prefix);
    for (int i = 0; i < rep; i++) n += (size_t)snprintf(g_buf + n, sizeof g_buf - n, "%s", unit);
    n += (size_t)snprintf(g_buf + n, sizeof g_buf - n, "%s", suffix);
    return n;
}

/* README §1 and §4: the 300- and 100-code-point windows, counted in code points of any byte length
 * (reference values from compute_score). */
static void test_windows(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    int bad = 0;
    size_t n;
    n = build("", "x", 295, "Answer: 5");              /* 304 cp: four x cut, the line survives */
    check_score(ws, g_buf, n, "5", 1, false, 1, "5", 1, &bad);
    n = build("Answer: 5\n", "\xc3\xa9", 290, "");      /* 300 cp: 'A' is the first code point kept */
    check_score(ws, g_buf, n, "5", 1, false, 1, "5", 1, &bad);
    n = build("Answer: 5\n", "\xc3\xa9", 291, "");      /* 301 cp: 'A' cut, "nswer: 5" does not match */
    check_score(ws, g_buf, n, "5", 1, false, 0, "[INVALID]", 9, &bad);
    n = build("", "\xc3\xa9", 400, "Answer: 5");
    check_score(ws, g_buf, n, "5", 1, false, 1, "5", 1, &bad);
    n = build("Answer: 12\n", "\xf0\x9f\x98\x80", 289, "");   /* 4-byte code points: 300 cp */
    check_score(ws, g_buf, n, "12", 2, false, 1, "12", 2, &bad);
    n = build("Answer: 12\n", "\xf0\x9f\x98\x80", 290, "");   /* 301 cp */
    check_score(ws, g_buf, n, "12", 2, false, 0, "[INVALID]", 9, &bad);
    n = build("\\boxed{7}", "y", 91, "");                      /* 100 cp: the box is inside T */
    check_score(ws, g_buf, n, "7", 1, true, 1, "7", 1, &bad);
    n = build("\\boxed{7}", "y", 92, "");                      /* 101 cp: the backslash is cut */
    check_score(ws, g_buf, n, "7", 1, true, 0, NULL, 0, &bad);
    n = build("\\boxed{7}", "\xe2\x82\xac", 91, "");           /* same with 3-byte code points */
    check_score(ws, g_buf, n, "7", 1, true, 1, "7", 1, &bad);
    n = build("\\boxed{7}", "\xe2\x82\xac", 92, "");
    check_score(ws, g_buf, n, "7", 1, true, 0, NULL, 0, &bad);
    reward_ws_free(ws);
    assert_int_equal(bad, 0);
}

/* bytes.decode("utf-8", "replace").encode() for CPython's maximal-subpart cases. */
static void test_utf8_repair(void **state) {
    (void)state;
    static const StrPair cases[] = {
        NC("\xe0\x80", "\xef\xbf\xbd\xef\xbf\xbd"),
        NC("\xf0\x90\x80" "A", "\xef\xbf\xbd" "A"),
        NC("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
        NC("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"),
        NC("a\xe2\x82", "a\xef\xbf\xbd"),
        NC("\xff", "\xef\xbf\xbd"),
        NC("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
        NC("\xf0\x90\x80\x80", "\xf0\x90\x80\x80"),
        NC("\xe2\x82\xac" "x", "\xe2\x82\xac" "x"),
        NC("\xe2\x82" "x", "\xef\xbf\xbd" "x"),
        NC("\x80\x80\x80\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"),
        NC("\xf5", "\xef\xbf\xbd"),
        NC("\xc2", "\xef\xbf\xbd"),
        NC("a\0b", "a\0b"),
        NC("", ""),
    };
    char out[64];
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        size_t n = math_dapo_utf8_repair(cases[i].in, cases[i].in_len, out);
        assert_int_equal(n, cases[i].out_len);
        assert_memory_equal(out, cases[i].out, n);
    }
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

/* Random bytes rich in UTF-8 fragments: each piece is ASCII, a valid 2/3/4-byte code point, a truncated
 * one, a lone continuation byte, or an `Answer:`/`\boxed{` fragment. */
static size_t random_text(char *buf, size_t want) {
    static const char *frags[] = { "Answer: ", "\\boxed{", "}", "{", "\n", " ", "\xc3\xa9", "\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80", "\xe2\x82", "\xf0\x9f\x98", "\x80", "\xbf", "\xc5\xbf",
                                   "\xed\xa0\x80", "\xff", "1", "=", "$", ",", "frac", "sqrt", "\\text{", "a " };
    size_t n = 0;
    while (n + 16 < want) {
        const char *f = frags[rnd() % ARRAY_LEN(frags)];
        size_t l = strlen(f);
        memcpy(buf + n, f, l);
        n += l;
    }
    return n;
}

/* The score path decodes only the solution's last ~1200 bytes; on random invalid UTF-8 it must give what a
 * full decode + [-300:] (and [-100:]) gives. */
static void test_tail_window_equals_full_decode(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    MathDapoWs *mws = math_dapo_ws_new();
    char *sol = xmalloc(4096), *full = xmalloc(3 * 4096), *ans = xmalloc(4096);
    char err[ERR_LEN];
    for (int it = 0; it < 3000; it++) {
        size_t n = random_text(sol, 1100 + rnd() % 2000);
        size_t fn = math_dapo_utf8_repair(sol, n, full);
        size_t s = fn, cps = 0;   /* start of the last 300 code points of the full decode */
        while (s > 0 && cps < MATH_DAPO_WINDOW) {
            s--;
            if (((unsigned char)full[s] & 0xC0) != 0x80) cps++;
        }
        size_t off, len;
        const char *a = "[INVALID]";
        size_t an = 9;
        if (math_dapo_answer_find(full + s, fn - s, &off, &len)) {
            memcpy(ans, full + s + off, len);
            a = ans, an = len;
        }
        const char *want;
        size_t wn;
        assert_int_equal(math_dapo_normalize(mws, a, an, 0, &want, &wn, err), 0);
        RewardResult r;
        assert_int_equal(reward_score(ws, "math_dapo", sol, n, "1", 1, false, 0, &r), 0);
        assert_true(r.has_pred);
        assert_int_equal(r.pred_len, wn);
        assert_memory_equal(r.pred, want, wn);

        size_t t = fn;   /* strict: the last 100 code points */
        for (cps = 0; t > 0 && cps < MATH_DAPO_STRICT_WINDOW;) {
            t--;
            if (((unsigned char)full[t] & 0xC0) != 0x80) cps++;
        }
        bool has = math_dapo_boxed_last(full + t, fn - t, &off, &len);
        assert_int_equal(reward_score(ws, "math_dapo", sol, n, "1", 1, true, 0, &r), 0);
        assert_int_equal(r.has_pred, has);
        if (has) {
            assert_int_equal(r.pred_len, len);
            assert_memory_equal(r.pred, full + t + off, len);
        }
    }
    xfree(sol), xfree(full), xfree(ans);
    math_dapo_ws_free(mws);
    reward_ws_free(ws);
}

/* Every code point's isdigit/isspace against CPython's (pyunicode.txt). */
static void test_unicode_tables_match_python(void **state) {
    (void)state;
    const char *root = getenv("DAPO_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/verifier/pyunicode.txt", root && *root ? root : ".");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static uint8_t digit[0x110000], space[0x110000];
    memset(digit, 0, sizeof digit);
    memset(space, 0, sizeof space);
    char line[256], kind[32];
    unsigned a, b;
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        assert_int_equal(sscanf(line, "%31s %x %x", kind, &a, &b), 3);
        assert_true(a <= b && b < 0x110000);
        uint8_t *t = strcmp(kind, "isdigit") == 0 ? digit : space;
        for (unsigned c = a; c <= b; c++) t[c] = 1;
        rows++;
    }
    fclose(f);
    assert_true(rows > 80);
    int nd = 0, ns = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (math_dapo_is_digit(c) != (digit[c] != 0)) fprintf(stderr, "isdigit U+%04X\n", c);
        if (math_dapo_is_space(c) != (space[c] != 0)) fprintf(stderr, "isspace U+%04X\n", c);
        assert_int_equal(math_dapo_is_digit(c), digit[c] != 0);
        assert_int_equal(math_dapo_is_space(c), space[c] != 0);
        nd += digit[c], ns += space[c];
    }
    assert_int_equal(ns, 29);
    assert_int_equal(nd, 788);
}

/* ------------------------------------------------------------------------------------ robustness */

static char *repeat(const char *unit, size_t times, const char *tail, size_t *n) {
    size_t ul = strlen(unit), tl = strlen(tail);
    char *s = xmalloc(ul * times + tl + 1);
    for (size_t i = 0; i < times; i++) memcpy(s + i * ul, unit, ul);
    memcpy(s + ul * times, tail, tl + 1);
    *n = ul * times + tl;
    return s;
}

/* Sanitizer builds run the same scans 2-5x slower (every memchr/memcmp is intercepted and checked); the
 * 50 ms bound is asserted on the optimized build, a 5x looser one under ASan. */
#if defined(__SANITIZE_ADDRESS__)
#define TIME_SCALE 5.0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TIME_SCALE 5.0
#endif
#endif
#ifndef TIME_SCALE
#define TIME_SCALE 1.0
#endif

static double g_slowest_ms;
static const char *g_slowest = "";

/* Scores sol/gt both ways round, in both modes, asserting success and < limit_ms per call. */
static void score_timed(RewardWs *ws, const char *what, const char *a, size_t an, const char *b, size_t bn,
                        double limit_ms) {
    limit_ms *= TIME_SCALE;
    for (int swap = 0; swap < 2; swap++)
        for (int strict = 0; strict < 2; strict++) {
            RewardResult r;
            int64_t t0 = math_dapo_now_ns();
            int rc = swap ? reward_score(ws, "math_dapo", b, bn, a, an, strict, 0, &r)
                          : reward_score(ws, "math_dapo", a, an, b, bn, strict, 0, &r);
            double ms = (math_dapo_now_ns() - t0) / 1e6;
            if (ms > g_slowest_ms) g_slowest_ms = ms, g_slowest = what;
            if (rc || ms >= limit_ms)
                fprintf(stderr, "%s (swap %d strict %d): rc %d, %.2f ms\n", what, swap, strict, rc, ms);
            assert_int_equal(rc, 0);
            assert_true(r.score == 1.0 || r.score == -1.0);
            assert_true(ms < limit_ms);
        }
}

/* 1 MB adversarial inputs, as the solution and as the ground truth: each call well under 50 ms. */
static void test_adversarial_1mb_under_50ms(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    const size_t MB = 1u << 20;
    struct {
        const char *what, *unit, *tail;
        size_t times;
    } adv[] = {
        { "100,000 nested boxes", "\\boxed{", "5", 100000 },
        { "100,000 nested braces", "{", "5", 100000 },
        { "100,000 Answer lines", "Answer: 1\n", "Answer: 2", 100000 },
        { "100,000 Answer: without capture", "Answer:", "", 100000 },
        { "unclosed \\text{", "\\text{", "", MB / 6 },
        { "unclosed \\overline{ on lines", "\\overline{\n", "", MB / 11 },
        { "frac", "frac", "", MB / 4 },
        { "sqrt", "sqrt", "", MB / 4 },
        { "dollars", "$", "", MB },
        { "dollar lines", "$5$\n", "", MB / 4 },
        { "equals", "=", "5", MB },
        { "articles", "a an ", "", MB / 5 },
        { "digits and commas", "1,", "2", MB / 2 },
        { "full-width digits", "\xef\xbc\x91", "", MB / 3 },
        { "whitespace", "\xe3\x80\x80 \n", "", MB / 5 },
        { "NUL bytes", "\0", "", MB },
        { "units", "squarewaysintegers", "", MB / 18 },
        { "closed \\text{} pairs", "\\text{a}", "", MB / 8 },
        { "empty \\text{}", "\\text{}", "", MB / 7 },
        { "boxed lines", "\\boxed{1}\n", "", MB / 11 },
        { "frac shorthand", "frac12", "", MB / 6 },
        { "sqrt shorthand", "sqrt2", "", MB / 5 },
        { "mixed substitutions", "an \\$,\\!mbox\\text{m}", "", MB / 22 },
        { "multi-byte code points", "\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9", "", MB / 9 },
    };
    for (size_t i = 0; i < ARRAY_LEN(adv); i++) {
        size_t n;
        char *s;
        if (adv[i].unit[0] == '\0') {   /* NULs */
            n = adv[i].times;
            s = xcalloc(n + 1, 1);
        } else {
            s = repeat(adv[i].unit, adv[i].times, adv[i].tail, &n);
        }
        score_timed(ws, adv[i].what, s, n, "Answer: 5", 9, 50.0);
        xfree(s);
    }
    /* a box closing 100,000 levels down, then its closers: also the 100,000-brace strict walk */
    size_t n1, n2;
    char *open = repeat("\\boxed{", 100000, "5", &n1);
    char *close = repeat("}", 100000, "", &n2);
    char *both = xmalloc(n1 + n2 + 1);
    memcpy(both, open, n1);
    memcpy(both + n1, close, n2 + 1);
    score_timed(ws, "balanced 100,000 boxes", both, n1 + n2, "5", 1, 50.0);
    xfree(open), xfree(close), xfree(both);
    /* random bytes (invalid UTF-8 throughout) */
    char *rb = xmalloc(MB);
    for (size_t i = 0; i < MB; i++) rb[i] = (char)(rnd() >> 24);
    score_timed(ws, "random bytes", rb, MB, rb + MB / 2, MB / 2, 50.0);
    xfree(rb);
    reward_ws_free(ws);
    fprintf(stderr, "slowest 1 MB case: %s, %.2f ms (bound %.0f ms)\n", g_slowest, g_slowest_ms, 50.0 * TIME_SCALE);
}

/* 10 MB strings: finish, and the scratch is bounded and released afterwards. */
static void test_10mb_strings_bounded_memory(void **state) {
    (void)state;
    const size_t N = 10u << 20;
    size_t base0 = xmalloc_used();
    RewardWs *ws = reward_ws_new();
    size_t base = xmalloc_used();
    char *s = xmalloc(N);
    for (size_t i = 0; i < N; i++) s[i] = (char)(rnd() >> 24);   /* random bytes: ~3x growth on repair */
    RewardResult r;
    int64_t t0 = math_dapo_now_ns();
    assert_int_equal(reward_score(ws, "math_dapo", s, N, s, N, false, 0, &r), 0);
    double ms = (math_dapo_now_ns() - t0) / 1e6;
    size_t peak = xmalloc_used() - base - N;
    fprintf(stderr, "10 MB random bytes as solution and ground truth: %.1f ms, scratch %.1f MB\n", ms, peak / 1e6);
    assert_true(peak < 10 * N);    /* O(gt_len), documented as <= ~8x */
    assert_true(ms < 2000);
    memset(s, 'x', N);
    memcpy(s + N - 9, "Answer: 5", 9);
    assert_int_equal(reward_score(ws, "math_dapo", s, N, "5", 1, false, 0, &r), 0);
    assert_true(r.acc);
    assert_true(xmalloc_used() - base - N < (size_t)1 << 20);   /* big buffers released on the next call */
    xfree(s);
    reward_ws_free(ws);
    assert_int_equal(xmalloc_used(), base0);
}

/* NUL bytes are ordinary code points: inside the capture, the prediction and the comparison. Bad arguments
 * and oversized ground truths are errors with score -1. */
static void test_nul_bytes(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    RewardResult r;
    static const char sol[] = "work\0work\nAnswer: 4\0 2";
    assert_int_equal(reward_score(ws, "math_dapo", sol, sizeof sol - 1, "4\0" "2", 3, false, 0, &r), 0);
    assert_true(r.acc);
    assert_int_equal(r.pred_len, 3);
    assert_memory_equal(r.pred, "4\0" "2", 3);
    assert_int_equal(reward_score(ws, "math_dapo", sol, sizeof sol - 1, "42", 2, false, 0, &r), 0);
    assert_false(r.acc);
    static const char box[] = "\\boxed{\0}";
    assert_int_equal(reward_score(ws, "math_dapo", box, sizeof box - 1, "\0", 1, true, 0, &r), 0);
    assert_true(r.acc && r.has_pred && r.pred_len == 1 && r.pred[0] == '\0');
    assert_int_equal(reward_score(ws, "math_dapo", NULL, 0, NULL, 0, false, 0, &r), 0);
    assert_string_equal(r.pred, "[INVALID]");
    assert_int_equal(reward_score(ws, "math_dapo", NULL, 5, "x", 1, false, 0, &r), ERR_INVAL);
    assert_true(r.score == -1.0 && !r.acc && !r.has_pred);
    size_t big = ((size_t)64 << 20) + 1;   /* ground truths over 64 MiB are refused before any work */
    char *gt = xmalloc(big);
    memset(gt, '1', big);
    assert_int_equal(reward_score(ws, "math_dapo", "Answer: 1", 9, gt, big, false, 0, &r), ERR_TOO_BIG);
    assert_true(r.score == -1.0 && !r.acc && !r.has_pred && r.err[0]);
    xfree(gt);
    reward_ws_free(ws);
}

static void test_deadline_timeout(void **state) {
    (void)state;
    RewardWs *ws = reward_ws_new();
    RewardResult r;
    /* an absurdly small deadline: 1 ns from now */
    int rc = reward_score(ws, "math_dapo", "Answer: 5", 9, "5", 1, false, math_dapo_now_ns() + 1, &r);
    assert_int_equal(rc, ERR_TIMEOUT);
    assert_int_equal(r.error, ERR_TIMEOUT);
    assert_string_equal(r.err, "timeout");
    assert_true(r.score == -1.0 && !r.acc && !r.has_pred);
    rc = reward_score(ws, "math_dapo", "\\boxed{5}", 9, "5", 1, true, math_dapo_now_ns() + 1, &r);
    assert_int_equal(rc, ERR_TIMEOUT);
    assert_true(r.score == -1.0 && !r.acc);
    /* a deadline that passes during a long normalization (10 MB ground truth, 100 µs) */
    size_t n;
    char *gt = repeat("\\text{a}x", (10u << 20) / 9, "", &n);
    rc = reward_score(ws, "math_dapo", "Answer: 5", 9, gt, n, false, math_dapo_now_ns() + 100000, &r);
    assert_int_equal(rc, ERR_TIMEOUT);
    assert_string_equal(r.err, "timeout");
    assert_true(r.score == -1.0 && !r.acc);
    /* the same item without a deadline completes; a generous deadline too */
    assert_int_equal(reward_score(ws, "math_dapo", "Answer: 5", 9, gt, n, false, 0, &r), 0);
    assert_int_equal(reward_score(ws, "math_dapo", "Answer: 5", 9, "5", 1, false, math_dapo_now_ns() + 1000000000, &r), 0);
    assert_true(r.acc);
    xfree(gt);
    reward_ws_free(ws);
}

static void test_scorer_table(void **state) {
    (void)state;
    const char *math[] = { "math_dapo", "math500", "openai/gsm8k", "aime-2024", "aime25", "HuggingFaceH4/MATH-500",
                           "lighteval/MATH" };
    for (size_t i = 0; i < ARRAY_LEN(math); i++) {
        const RewardScorer *s = reward_scorer_find(math[i]);
        assert_string_equal(s->name, "math_dapo");
        assert_false(s->is_default);
    }
    assert_true(reward_scorer_find("something/else")->is_default);
    assert_true(reward_scorer_find(NULL)->is_default);
    assert_true(reward_scorer_find("")->is_default);
    assert_string_equal(reward_scorer_find("unknown")->name, "math_dapo");
    size_t n;
    const RewardScorer *t = reward_scorers(&n);
    assert_true(n >= 2 && t[n - 1].is_default);
    /* any source scores through the same rules */
    RewardWs *ws = reward_ws_new();
    RewardResult r;
    assert_int_equal(reward_score(ws, "openai/gsm8k", "#### 18\nAnswer: 18", 18, "18", 2, false, 0, &r), 0);
    assert_true(r.acc);
    assert_int_equal(reward_score(ws, "nobody-knows", "Answer: 18", 10, "18", 2, false, 0, &r), 0);
    assert_true(r.acc);
    reward_ws_free(ws);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_rules),
        cmocka_unit_test(test_answer_extraction),
        cmocka_unit_test(test_compute_score_cases),
        cmocka_unit_test(test_windows),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_tail_window_equals_full_decode),
        cmocka_unit_test(test_unicode_tables_match_python),
        cmocka_unit_test(test_adversarial_1mb_under_50ms),
        cmocka_unit_test(test_10mb_strings_bounded_memory),
        cmocka_unit_test(test_nul_bytes),
        cmocka_unit_test(test_deadline_timeout),
        cmocka_unit_test(test_scorer_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
