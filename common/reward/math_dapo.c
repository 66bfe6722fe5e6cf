/* common/reward/math_dapo.c: the DAPO math reward (eval/math_dapo.py of BytedTsinghua-SIA/DAPO, commit
 * 33fe317) as linear scans over repaired UTF-8; tests/data/verifier/README.md gives the rules implemented
 * here, step by step (the § numbers below refer to it).
 * Why no regex engine: each pattern of the reference is a fixed string or a one-line scan whose Python `re`
 * semantics (lazy/greedy per line, back-off of `\s*` at the end) are easier to state and to keep linear by
 * hand than to reproduce with PCRE2 classes and match limits.
 * Not here: data_source dispatch (reward.c), JSON, threads, the overlong penalty. */
#include "reward/math_dapo.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "core/utf8.h"

/* Ground truths longer than this are refused (ERR_TOO_BIG) so scratch stays bounded (at most ~9x of it). */
#define MATH_DAPO_MAX_GT_BYTES ((size_t)64 << 20)
/* Scratch buffers above this size are released at the start of the next call (bounded idle memory). */
#define MATH_DAPO_KEEP_BYTES ((size_t)4 << 20)
/* Inputs at least this long check the deadline between normalization steps (short ones finish in µs). */
#define MATH_DAPO_CHECK_BYTES 16384
/* The last 300 code points of any UTF-8 text lie in its last 4 * 300 bytes (a code point or a replaced
 * maximal subpart is at most 4 bytes). */
#define MATH_DAPO_TAIL_BYTES (4 * MATH_DAPO_WINDOW)

#define NOCHG ((size_t)-1) /* a step found nothing to change: keep the input buffer */

typedef struct {
    char  *p;
    size_t cap;
} Buf;

struct MathDapoWs {
    Buf tail;   /* repaired solution tail (<= 3 * 1203 bytes) */
    Buf gtfix;  /* strict mode: repaired ground truth */
    Buf pred;   /* strict mode: the box content, NUL-terminated */
    Buf a[2];   /* ping-pong for normalizing the prediction (and math_dapo_normalize) */
    Buf b[2];   /* ping-pong for normalizing the ground truth */
};

/* ------------------------------------------------------------------------------------------- buffers */

static void buf_reserve(Buf *b, size_t n) {
    if (n <= b->cap) return;
    size_t c = b->cap ? b->cap : 256;
    while (c < n) c = c > ((size_t)-1) / 2 ? n : c * 2;
    xfree(b->p);       /* contents are scratch: no need to copy them */
    b->p = xmalloc(c);
    b->cap = c;
}

static void buf_release(Buf *b) {
    xfree(b->p);
    b->p = NULL;
    b->cap = 0;
}

static void ws_trim(MathDapoWs *ws) {
    Buf *all[] = { &ws->tail, &ws->gtfix, &ws->pred, &ws->a[0], &ws->a[1], &ws->b[0], &ws->b[1] };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->cap > MATH_DAPO_KEEP_BYTES) buf_release(all[i]);
}

MathDapoWs *math_dapo_ws_new(void) {
    return xcalloc(1, sizeof(MathDapoWs));
}

void math_dapo_ws_free(MathDapoWs *ws) {
    if (!ws) return;
    buf_release(&ws->tail);
    buf_release(&ws->gtfix);
    buf_release(&ws->pred);
    for (int i = 0; i < 2; i++) {
        buf_release(&ws->a[i]);
        buf_release(&ws->b[i]);
    }
    xfree(ws);
}

int64_t math_dapo_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool deadline_passed(int64_t deadline_ns) {
    return deadline_ns > 0 && math_dapo_now_ns() >= deadline_ns;
}

/* ------------------------------------------------------------------------------- character classes */

/* Python 3.11.7 str.isdigit() (unicodedata 14.0.0): inclusive ranges, generated with
 * [c for c in range(0x110000) if chr(c).isdigit()]; tests/unit/test_verifier_rules.c checks every code
 * point against tests/data/verifier/pyunicode.txt (written by tests/reference/make_verifier_unicode.py). */
static const uint32_t digit_ranges[][2] = {
    {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9},
    {0x966, 0x96F}, {0x9E6, 0x9EF}, {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F}, {0xBE6, 0xBEF},
    {0xC66, 0xC6F}, {0xCE6, 0xCEF}, {0xD66, 0xD6F}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9},
    {0xF20, 0xF29}, {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x1371}, {0x17E0, 0x17E9},
    {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19DA}, {0x1A80, 0x1A89}, {0x1A90, 0x1A99},
    {0x1B50, 0x1B59}, {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0x2070, 0x2070},
    {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468}, {0x2474, 0x247C}, {0x2488, 0x2490},
    {0x24EA, 0x24EA}, {0x24F5, 0x24FD}, {0x24FF, 0x24FF}, {0x2776, 0x277E}, {0x2780, 0x2788},
    {0x278A, 0x2792}, {0xA620, 0xA629}, {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9},
    {0xA9F0, 0xA9F9}, {0xAA50, 0xAA59}, {0xABF0, 0xABF9}, {0xFF10, 0xFF19}, {0x104A0, 0x104A9},
    {0x10A40, 0x10A43}, {0x10D30, 0x10D39}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x11066, 0x1106F},
    {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9}, {0x112F0, 0x112F9}, {0x11450, 0x11459},
    {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9}, {0x11730, 0x11739}, {0x118E0, 0x118E9},
    {0x11950, 0x11959}, {0x11C50, 0x11C59}, {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x16A60, 0x16A69},
    {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9},
    {0x1E950, 0x1E959}, {0x1F100, 0x1F10A}, {0x1FBF0, 0x1FBF9},
};

bool math_dapo_is_digit(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    size_t lo = 0, hi = sizeof digit_ranges / sizeof digit_ranges[0];
    while (lo < hi) {   /* first range whose end >= cp */
        size_t mid = (lo + hi) / 2;
        if (digit_ranges[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < sizeof digit_ranges / sizeof digit_ranges[0] && digit_ranges[lo][0] <= cp;
}

bool math_dapo_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* Bytes of the code point starting at p (valid UTF-8, p < end). */
static size_t u8_len(const unsigned char *p, const unsigned char *end) {
    size_t l = p[0] < 0x80 ? 1 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
    return l <= (size_t)(end - p) ? l : (size_t)(end - p);
}

/* Decodes the code point at p (valid UTF-8). */
static uint32_t u8_decode(const unsigned char *p, size_t l) {
    switch (l) {
    case 1: return p[0];
    case 2: return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    case 3: return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    default: return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
                    (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    }
}

/* Byte length of the whitespace code point (README "Character classes") at p, or 0 (valid UTF-8). */
static size_t ws_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) ? 1 : 0;
    size_t l = u8_len(p, end);
    if (l < 2 || (c != 0xC2 && c != 0xE1 && c != 0xE2 && c != 0xE3)) return 0;
    return math_dapo_is_space(u8_decode(p, l)) ? l : 0;
}

/* Start of the code point that ends at `end` (exclusive), not before lo (valid UTF-8). */
static const unsigned char *u8_prev(const unsigned char *lo, const unsigned char *end) {
    const unsigned char *p = end - 1;
    while (p > lo && (*p & 0xC0) == 0x80) p--;
    return p;
}

/* First occurrence of pat (plen >= 1 bytes) in h[0..n), or NULL: memchr on the first byte, then memcmp.
 * Linear for our short patterns (<= 15 bytes). Not glibc memmem: sanitizers check memmem's whole haystack
 * on every call, which makes a loop of successive searches quadratic under ASan. */
static const char *str_find(const void *hay, size_t n, const char *pat, size_t plen) {
    const char *h = hay, *end = h + n;
    while ((size_t)(end - h) >= plen) {
        const char *p = memchr(h, pat[0], (size_t)(end - h) - plen + 1);
        if (!p) return NULL;
        size_t k = 1;   /* inline compare: the patterns are a few bytes, a memcmp call costs more */
        while (k < plen && p[k] == pat[k]) k++;
        if (k == plen) return p;
        h = p + 1;
    }
    return NULL;
}

/* memcpy for the many short segments between hits (a libc call per 2-byte copy dominates otherwise). */
static inline char *copy_out(char *o, const char *src, size_t n) {
    if (n <= 16) {
        for (size_t i = 0; i < n; i++) o[i] = src[i];
    } else {
        memcpy(o, src, n);
    }
    return o + n;
}

/* ------------------------------------------------------------------------------------ UTF-8 repair */

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

size_t math_dapo_utf8_repair(const char *in, size_t n, char *out) { return utf8_repair(in, n, out); }

/* Offset in s[0..n) from which decoding gives the same units as decoding all of s (a unit boundary of the
 * full decode) and still covers the last MATH_DAPO_WINDOW code points: every non-continuation byte starts
 * a unit, and a continuation byte preceded by three continuation bytes does too. */
static size_t tail_start(const unsigned char *s, size_t n) {
    if (n <= MATH_DAPO_TAIL_BYTES) return 0;
    size_t p = n - MATH_DAPO_TAIL_BYTES;
    for (size_t k = 0; k <= 3 && k <= p; k++)
        if (!is_cont(s[p - k]) || k == p) return p - k;   /* offset 0 is a boundary too */
    return p;   /* s[p-3..p] are all continuation bytes */
}

/* Offset of the last `cps` code points of valid UTF-8 s[0..n). */
static size_t last_cps(const unsigned char *s, size_t n, size_t cps) {
    size_t p = n;
    while (p > 0 && cps > 0) {
        p--;
        if (!is_cont(s[p])) cps--;
    }
    return p;
}

/* ------------------------------------------------------------------------------- answer extraction */

/* End of `answer` matched case-insensitively at p (README §2.1: ASCII case, plus U+017F ſ for s), or NULL. */
static const unsigned char *keyword_match(const unsigned char *p, const unsigned char *end) {
    static const char kw[] = "answer";
    for (int k = 0; k < 6; k++) {
        if (p >= end) return NULL;
        if ((*p | 0x20) == (unsigned char)kw[k]) p++;
        else if (kw[k] == 's' && p[0] == 0xC5 && end - p >= 2 && p[1] == 0xBF) p += 2;
        else return NULL;
    }
    return p;
}

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end) {
    size_t l;
    while (p < end && (l = ws_len(p, end)) > 0) p += l;
    return p;
}

bool math_dapo_answer_find(const char *str, size_t n, size_t *off, size_t *len) {
    const unsigned char *s = (const unsigned char *)str, *end = s + n, *i = s;
    bool found = false;
    while (i < end) {
        while (i < end && (*i | 0x20) != 'a') i++;
        if (i >= end) break;
        const unsigned char *k = keyword_match(i, end);
        if (!k) { i++; continue; }
        const unsigned char *c = skip_ws(k, end);
        if (c >= end || *c != ':') { i++; continue; }
        c++;
        const unsigned char *w = skip_ws(c, end);
        if (w < end) {   /* s[w] is not whitespace, hence not LF: capture to the end of the line */
            const unsigned char *e = memchr(w, '\n', (size_t)(end - w));
            if (!e) e = end;
            *off = (size_t)(w - s), *len = (size_t)(e - w), found = true;
            i = e;
            continue;
        }
        /* \s* ran to the end of the text: it gives back code points until one that is not LF is free */
        const unsigned char *q = end;
        while (q > c && q[-1] == '\n') q--;
        if (q > c) {
            const unsigned char *st = u8_prev(c, q);
            *off = (size_t)(st - s), *len = (size_t)(q - st), found = true;
            i = q;
            continue;
        }
        i++;
    }
    return found;
}

/* ------------------------------------------------------------------------------------ strict box */

static const char *mem_rfind(const char *h, size_t n, const char *pat, size_t plen) {
    if (n < plen) return NULL;
    for (const char *p = h + (n - plen) + 1; p-- > h;)
        if (*p == pat[0] && memcmp(p, pat, plen) == 0) return p;
    return NULL;
}

bool math_dapo_boxed_last(const char *s, size_t n, size_t *off, size_t *len) {
    const char *idx = mem_rfind(s, n, "\\boxed{", 7);
    if (!idx) return false;
    long depth = 0;
    for (const char *p = idx; p < s + n; p++) {
        if (*p == '{') depth++;
        else if (*p == '}' && --depth == 0) {
            *off = (size_t)(idx + 7 - s), *len = (size_t)(p - (idx + 7));
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------------------ normalization */

typedef struct {
    const char *pat, *rep;
    size_t      plen, rlen;
} Subst;
#define SUB(p, r) { p, r, sizeof(p) - 1, sizeof(r) - 1 }

/* README §3.2 and §3.3, in order (DAPO math_dapo.py SUBSTITUTIONS then REMOVED_EXPRESSIONS). */
static const Subst substs[] = {
    SUB("an ", ""), SUB("a ", ""), SUB(".$", "$"), SUB("\\$", ""), SUB("\\ ", ""), SUB(" ", ""),
    SUB("mbox", "text"), SUB(",\\text{and}", ","), SUB("\\text{and}", ","), SUB("\\text{m}", "\\text{}"),
    SUB("square", ""), SUB("ways", ""), SUB("integers", ""), SUB("dollars", ""), SUB("mph", ""),
    SUB("inches", ""), SUB("hours", ""), SUB("km", ""), SUB("units", ""), SUB("\\ldots", ""), SUB("sue", ""),
    SUB("points", ""), SUB("feet", ""), SUB("minutes", ""), SUB("digits", ""), SUB("cents", ""),
    SUB("degrees", ""), SUB("cm", ""), SUB("gm", ""), SUB("pounds", ""), SUB("meters", ""), SUB("meals", ""),
    SUB("edges", ""), SUB("students", ""), SUB("childrentickets", ""), SUB("multiples", ""),
    SUB("\\text{s}", ""), SUB("\\text{.}", ""), SUB("\\text{\ns}", ""), SUB("\\text{}^2", ""),
    SUB("\\text{}^3", ""), SUB("\\text{\n}", ""), SUB("\\text{}", ""), SUB("\\mathrm{th}", ""),
    SUB("^\\circ", ""), SUB("^{\\circ}", ""), SUB("\\;", ""), SUB(",\\!", ""), SUB("{,}", ""), SUB("\"", ""),
    SUB("\\dots", ""),
};
#define NSUBST (sizeof substs / sizeof substs[0])

/* Byte-presence set: a pattern whose bytes are not all present cannot occur (a cheap skip for the
 * 51 passes, most of which find nothing). */
typedef struct {
    uint64_t w[4];
} ByteSet;

static void byteset_add(ByteSet *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        b->w[c >> 6] |= (uint64_t)1 << (c & 63);
    }
}

static bool byteset_covers(const ByteSet *have, const ByteSet *need) {
    for (int i = 0; i < 4; i++)
        if (need->w[i] & ~have->w[i]) return false;
    return true;
}

static ByteSet subst_need[NSUBST];   /* bytes of each pattern, filled once */
static pthread_once_t subst_once = PTHREAD_ONCE_INIT;
static void subst_init(void) {
    for (size_t i = 0; i < NSUBST; i++) byteset_add(&subst_need[i], substs[i].pat, substs[i].plen);
}

/* str.replace(pat, rep): one left-to-right pass of non-overlapping occurrences. NOCHG when none. */
static size_t replace_all(const char *in, size_t n, const char *pat, size_t plen, const char *rep,
                          size_t rlen, char *out) {
    const char *end = in + n, *cur = in, *hit = str_find(in, n, pat, plen);
    if (!hit) return NOCHG;
    char *o = out;
    if (plen == 1 && rlen == 0) {   /* deleting one byte value (` `, `"`, `$`): a plain filter */
        o = copy_out(o, in, (size_t)(hit - in));
        for (const char *p = hit; p < end; p++)
            if (*p != pat[0]) *o++ = *p;
        return (size_t)(o - out);
    }
    do {
        o = copy_out(o, cur, (size_t)(hit - cur));
        o = copy_out(o, rep, rlen);
        cur = hit + plen;
    } while ((hit = str_find(cur, (size_t)(end - cur), pat, plen)) != NULL);
    o = copy_out(o, cur, (size_t)(end - cur));
    return (size_t)(o - out);
}

/* §3.4: re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", s): each line holding two `$` becomes `$`+between+`$`. */
static size_t dollar_math(const char *in, size_t n, char *out) {
    const char *end = in + n, *cur = in, *p = in;
    char *o = out;
    bool changed = false;
    while (p < end) {   /* p: start of a line */
        const char *d1 = memchr(p, '$', (size_t)(end - p));
        if (!d1) break;
        const char *ls = memrchr(p, '\n', (size_t)(d1 - p));
        ls = ls ? ls + 1 : p;
        const char *le = memchr(d1, '\n', (size_t)(end - d1));
        if (!le) le = end;
        const char *d2 = memchr(d1 + 1, '$', (size_t)(le - (d1 + 1)));
        if (d2) {
            o = copy_out(o, cur, (size_t)(ls - cur));
            *o++ = '$';
            o = copy_out(o, d1 + 1, (size_t)(d2 - d1 - 1));
            *o++ = '$';
            cur = le;
            changed = true;
        }
        p = le < end ? le + 1 : end;
    }
    if (!changed) return NOCHG;
    o = copy_out(o, cur, (size_t)(end - cur));
    return (size_t)(o - out);
}

/* §3.5-7: re.sub(r"(<pat>)(.*?)(\})", "\\2", s): `<pat>` up to the first `}` on its line -> the text
 * between. The first `}`-or-LF after a failed opener is cached, so a line of 100k openers stays linear. */
static size_t unwrap_lazy(const char *in, size_t n, const char *pat, size_t plen, char *out) {
    const char *end = in + n, *cur = in, *p = in, *stop = NULL, *hit;
    char *o = out;
    bool changed = false;
    while ((hit = str_find(p, (size_t)(end - p), pat, plen)) != NULL) {
        const char *c0 = hit + plen;
        if (!stop || stop < c0) {   /* [old c0, stop) holds no '}' or LF, so a stop >= c0 is still valid */
            stop = c0;
            while (stop < end && *stop != '}' && *stop != '\n') stop++;
        }
        if (stop < end && *stop == '}') {
            o = copy_out(o, cur, (size_t)(hit - cur));
            o = copy_out(o, c0, (size_t)(stop - c0));
            cur = p = stop + 1;
            changed = true;
        } else {
            p = hit + 1;
        }
    }
    if (!changed) return NOCHG;
    o = copy_out(o, cur, (size_t)(end - cur));
    return (size_t)(o - out);
}

/* §3.8: re.sub(r"(\\boxed\{)(.*)(\})", "\\2", s): per line, the first `\boxed{` to the last `}` of the line. */
static size_t unwrap_boxed(const char *in, size_t n, char *out) {
    const char *end = in + n, *cur = in, *p = in, *hit;
    char *o = out;
    bool changed = false;
    while ((hit = str_find(p, (size_t)(end - p), "\\boxed{", 7)) != NULL) {
        const char *le = memchr(hit, '\n', (size_t)(end - hit));
        if (!le) le = end;
        const char *c0 = hit + 7;
        const char *r = memrchr(c0, '}', (size_t)(le - c0));
        if (r) {
            o = copy_out(o, cur, (size_t)(hit - cur));
            o = copy_out(o, c0, (size_t)(r - c0));
            cur = r + 1;
            changed = true;
        }
        p = le;   /* later openers on this line have no `}` after the last one */
    }
    if (!changed) return NOCHG;
    o = copy_out(o, cur, (size_t)(end - cur));
    return (size_t)(o - out);
}

/* §3.9 re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}") and §3.10 re.sub(r"(sqrt)([^{])", "sqrt{\\2}"):
 * with_y selects frac (two code points X, Y; Y not LF) or sqrt (one X). X is any code point but `{`. */
static size_t shorthand(const char *in, size_t n, const char *word, bool with_y, char *out) {
    const unsigned char *s = (const unsigned char *)in, *end = s + n, *cur = s, *p = s, *hit;
    char *o = out;
    bool changed = false;
    while ((hit = (const unsigned char *)str_find(p, (size_t)(end - p), word, 4)) != NULL) {
        const unsigned char *x = hit + 4, *y = NULL, *after = NULL;
        if (x < end && *x != '{') {
            y = x + u8_len(x, end);
            if (!with_y) after = y;
            else if (y < end && *y != '\n') after = y + u8_len(y, end);
        }
        if (!after) { p = hit + 4; continue; }   /* `word` cannot overlap itself */
        o = copy_out(o, (const char *)cur, (size_t)(x - cur));
        *o++ = '{';
        o = copy_out(o, (const char *)x, (size_t)(y - x));
        *o++ = '}';
        if (with_y) {
            *o++ = '{';
            o = copy_out(o, (const char *)y, (size_t)(after - y));
            *o++ = '}';
        }
        cur = p = after;
        changed = true;
    }
    if (!changed) return NOCHG;
    o = copy_out(o, (const char *)cur, (size_t)(end - cur));
    return (size_t)(o - out);
}

/* §3.12: if s.replace(",", "").isdigit(): s = s.replace(",", "") (isdigit is false on ""). */
static size_t int_commas(const char *in, size_t n, char *out) {
    const unsigned char *s = (const unsigned char *)in, *end = s + n;
    size_t digits = 0, commas = 0;
    for (const unsigned char *p = s; p < end;) {
        if (*p == ',') { commas++, p++; continue; }
        size_t l = u8_len(p, end);
        if (!math_dapo_is_digit(u8_decode(p, l))) return NOCHG;
        digits++, p += l;
    }
    if (!digits || !commas) return NOCHG;
    char *o = out;
    for (size_t i = 0; i < n; i++)
        if (in[i] != ',') *o++ = in[i];
    return (size_t)(o - out);
}

/* The normalization pipeline over a pair of ping-pong buffers. On entry s points into pair[cur] (already
 * repaired); on return *out points into one of them, NUL-terminated. */
static int normalize_run(Buf pair[2], int cur, const char *s, size_t n, int64_t deadline_ns,
                         const char **out, size_t *out_len, char err[ERR_LEN]) {
    bool check = n >= MATH_DAPO_CHECK_BYTES;
#define STEP(expr)                                                                   \
    do {                                                                             \
        buf_reserve(&pair[cur ^ 1], 2 * n + 16);                                     \
        char *dst = pair[cur ^ 1].p;                                                 \
        size_t m_ = (expr);                                                          \
        if (m_ != NOCHG) s = dst, n = m_, cur ^= 1;                                  \
        if (check && deadline_passed(deadline_ns)) return err_set(err, ERR_TIMEOUT, "timeout"); \
    } while (0)

    const char *eq = memrchr(s, '=', n);   /* §3.1 split("=")[-1] */
    if (eq) n -= (size_t)(eq + 1 - s), s = eq + 1;

    pthread_once(&subst_once, subst_init);
    ByteSet have = {{0}};
    byteset_add(&have, s, n);
    for (size_t i = 0; i < NSUBST; i++) {   /* §3.2, §3.3 */
        const Subst *t = &substs[i];
        if (!byteset_covers(&have, &subst_need[i])) continue;
        STEP(replace_all(s, n, t->pat, t->plen, t->rep, t->rlen, dst));
        byteset_add(&have, t->rep, t->rlen);   /* a superset of what s holds now is enough */
    }
    if (memchr(s, '$', n)) STEP(dollar_math(s, n, dst));   /* §3.4 */
    STEP(unwrap_lazy(s, n, "\\text{", 6, dst));             /* §3.5 */
    STEP(unwrap_lazy(s, n, "\\textbf{", 8, dst));           /* §3.6 */
    STEP(unwrap_lazy(s, n, "\\overline{", 10, dst));        /* §3.7 */
    STEP(unwrap_boxed(s, n, dst));                          /* §3.8 */
    STEP(shorthand(s, n, "frac", true, dst));               /* §3.9 */
    STEP(shorthand(s, n, "sqrt", false, dst));              /* §3.10 */
    if (memchr(s, '$', n)) STEP(replace_all(s, n, "$", 1, "", 0, dst));   /* §3.11 */
    STEP(int_commas(s, n, dst));                            /* §3.12 */
#undef STEP

    /* §3.13 strip(): the 29 whitespace code points, both ends */
    const unsigned char *b = (const unsigned char *)s, *e = b + n;
    b = skip_ws(b, e);
    while (e > b) {
        const unsigned char *st = u8_prev(b, e);
        if (!ws_len(st, e)) break;
        e = st;
    }
    /* NUL-terminate in place: s lies in a pair buffer whose capacity exceeds the text written there */
    ((char *)e)[0] = '\0';
    *out = (const char *)b;
    *out_len = (size_t)(e - b);
    return 0;
}

int math_dapo_normalize(MathDapoWs *ws, const char *in, size_t n, int64_t deadline_ns,
                        const char **out, size_t *out_len, char err[ERR_LEN]) {
    if (!ws || !out || !out_len || (!in && n)) return err_set(err, ERR_INVAL, "math_dapo_normalize: NULL argument");
    if (n > MATH_DAPO_MAX_GT_BYTES) return err_set(err, ERR_TOO_BIG, "input of %zu bytes over the limit", n);
    ws_trim(ws);
    if (deadline_passed(deadline_ns)) return err_set(err, ERR_TIMEOUT, "timeout");
    buf_reserve(&ws->a[0], 3 * n + 16);
    size_t m = n ? math_dapo_utf8_repair(in, n, ws->a[0].p) : 0;
    return normalize_run(ws->a, 0, ws->a[0].p, m, deadline_ns, out, out_len, err);
}

/* ------------------------------------------------------------------------------------ scoring */

int math_dapo_score(MathDapoWs *ws, const char *sol, size_t sol_len, const char *gt, size_t gt_len,
                    bool strict_box, int64_t deadline_ns, MathDapoResult *out, char err[ERR_LEN]) {
    if (!out) return err_set(err, ERR_INVAL, "math_dapo_score: NULL result");
    *out = (MathDapoResult){ .score = -1.0, .acc = false, .has_pred = false, .pred = NULL, .pred_len = 0 };
    if (!ws || (!sol && sol_len) || (!gt && gt_len)) return err_set(err, ERR_INVAL, "math_dapo_score: NULL argument");
    if (gt_len > MATH_DAPO_MAX_GT_BYTES)
        return err_set(err, ERR_TOO_BIG, "ground truth of %zu bytes over the limit", gt_len);
    ws_trim(ws);
    if (deadline_passed(deadline_ns)) return err_set(err, ERR_TIMEOUT, "timeout");

    /* §1: S = solution[-300:], decoded only from a unit boundary within the last 1200 bytes */
    const unsigned char *su = (const unsigned char *)sol;
    size_t t0 = sol_len ? tail_start(su, sol_len) : 0;
    buf_reserve(&ws->tail, 3 * (sol_len - t0) + 16);
    size_t tn = sol_len ? math_dapo_utf8_repair(sol + t0, sol_len - t0, ws->tail.p) : 0;
    const char *S = ws->tail.p + last_cps((const unsigned char *)ws->tail.p, tn, MATH_DAPO_WINDOW);
    size_t Sn = (size_t)(ws->tail.p + tn - S);

    if (strict_box) {   /* §4 */
        const char *T = S + last_cps((const unsigned char *)S, Sn, MATH_DAPO_STRICT_WINDOW);
        size_t off, len;
        if (!math_dapo_boxed_last(T, (size_t)(S + Sn - T), &off, &len)) return 0;
        buf_reserve(&ws->pred, len + 1);
        memcpy(ws->pred.p, T + off, len);
        ws->pred.p[len] = '\0';
        buf_reserve(&ws->gtfix, 3 * gt_len + 16);
        size_t gn = gt_len ? math_dapo_utf8_repair(gt, gt_len, ws->gtfix.p) : 0;
        out->has_pred = true;
        out->pred = ws->pred.p;
        out->pred_len = len;
        out->acc = gn == len && memcmp(ws->gtfix.p, ws->pred.p, len) == 0;
        out->score = out->acc ? 1.0 : -1.0;
        return 0;
    }

    /* §2: the last Answer capture (or "[INVALID]"), normalized; then the normalized ground truth */
    size_t off = 0, len = 0;
    const char *ans = "[INVALID]";
    size_t an = 9;
    if (math_dapo_answer_find(S, Sn, &off, &len)) ans = S + off, an = len;
    buf_reserve(&ws->a[0], an + 16);
    memcpy(ws->a[0].p, ans, an);
    const char *pred, *gtn;
    size_t pn, gn;
    int rc = normalize_run(ws->a, 0, ws->a[0].p, an, deadline_ns, &pred, &pn, err);
    if (rc) return rc;
    buf_reserve(&ws->b[0], 3 * gt_len + 16);
    size_t gm = gt_len ? math_dapo_utf8_repair(gt, gt_len, ws->b[0].p) : 0;
    if (gm >= MATH_DAPO_CHECK_BYTES && deadline_passed(deadline_ns)) return err_set(err, ERR_TIMEOUT, "timeout");
    rc = normalize_run(ws->b, 0, ws->b[0].p, gm, deadline_ns, &gtn, &gn, err);
    if (rc) return rc;
    out->has_pred = true;
    out->pred = pred;
    out->pred_len = pn;
    out->acc = pn == gn && memcmp(pred, gtn, pn) == 0;
    out->score = out->acc ? 1.0 : -1.0;
    return 0;
}
